/* Data sizes checked against memory before they are allocated. mp_alloc never returns NULL (it
 * aborts), so every reader and buffer whose size follows from the data (a file's header or size,
 * data.synthetic_*, the loader's batches) asks mp_data_mem_check first and turns "too big" into a
 * one-line MP_EDATA error with the numbers, instead of a SIGABRT or the kernel's OOM killer.
 *
 * The limit is the memory this process could ever use: the physical memory
 * (sysconf(_SC_PHYS_PAGES) * _SC_PAGE_SIZE), lowered to the smallest memory cgroup limit on the
 * process's cgroup path (v2 memory.max, v1 memory.limit_in_bytes, the cgroup and each ancestor:
 * a container's or a Slurm job's limit) and, under an address-space limit (ulimit -v), to that
 * limit less the address space mapped now plus the data held; less the bytes already held
 * under MP_MEM_DATA. It is
 * deliberately not MemAvailable: that moves with page cache and with the other ranks on the host
 * allocating at the same moment, so ranks would disagree and a run's acceptance would depend on
 * timing; the ceiling refuses exactly what can never fit, the same way on every rank (under
 * ulimit -v it also depends on what each rank has mapped; main agrees on the outcome). Ranks
 * that share a host share its memory, which this per-process check does not divide. */
#ifndef MP_MEMCHECK_H
#define MP_MEMCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

/* Bytes of host memory this process may use at most (see above), never less than 1; `source`
 * (cap bytes, may be NULL) receives what set it: "physical memory", "cgroup limit PATH" or
 * the address-space limit. */
int64_t mp_mem_limit(char *source, size_t cap);

/* The smallest memory limit among the cgroups of a process: `self_cgroup` is its
 * /proc/<pid>/cgroup, `root` the cgroup mount (/sys/fs/cgroup). For the v2 line "0::PATH" it
 * reads root/PATH/memory.max and the same file of every ancestor up to root itself; for a v1
 * line naming the memory controller, root/memory/PATH/memory.limit_in_bytes and its ancestors.
 * Missing files and "max" mean no limit. Returns the limit in bytes with its file in `source`
 * (cap bytes, may be NULL), or -1 when there is none. */
int64_t mp_cgroup_mem_limit(const char *self_cgroup, const char *root, char *source, size_t cap);

/* Checks that a block of factors[0] x factors[1] x ... x factors[n-1] bytes (n >= 1, each >= 0)
 * can be held: the product must fit int64_t and size_t, and must not exceed mp_mem_limit() less
 * mp_mem_current(MP_MEM_DATA). On success returns MP_OK with the product in *bytes (may be
 * NULL). Otherwise *bytes is 0 and it returns MP_EDATA with one line
 * "WHERE: WHAT needs A x B = N bytes (X GiB), more than the M bytes (Y GiB) this process may use
 * (SOURCE) less H bytes already held for data", or "WHERE: WHAT: A x B bytes overflows 64 bits".
 * `where` names the file or directory, `what` the block ("60000 images of 28x28 with labels"). */
mp_status mp_data_mem_check(const char *where, const char *what, int n, const int64_t *factors,
                            int64_t *bytes);

#endif
