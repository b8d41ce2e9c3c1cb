/* `mpdist bench-comm`: sweeps of all-reduce, reduce-scatter and all-gather in nccl-tests' format
 * through the communicator (the path gradients and ZeRO shards take: the transport's worker, the
 * half sums) beside the raw call on the same bytes, measured alternately in one run: host memory
 * over MPI beside raw MPI, or (--device cuda) GPU memory through the NCCL transport beside a bare
 * NCCL loop (comm/nccl_raw.h). --device cpu takes the CPU backend's memory, which under
 * MPDIST_CPU_STAGED=1 is device-like and travels the device route (a second MPI transport), so
 * the CPU suite runs the device code of this command. The stages, each agreed over the ranks by
 * the caller before the next: parse, same_opts, check_memory, open (local), choose, connect, run
 * (each collective), close. */
#ifndef MP_BENCH_COMM_H
#define MP_BENCH_COMM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "comm/comm.h"
#include "comm/nccl_raw.h"
#include "engine/ops.h"

typedef struct mp_bench_comm_opts {
    int64_t min_bytes, max_bytes; /* -b, -e */
    int factor;                   /* -f: size multiplier between rows */
    int64_t step_bytes;           /* -i: size increment between rows instead (0: -f) */
    int iters, warmup;            /* -n, -w: timed and untimed iterations per round */
    int rounds;                   /* -r: alternating rounds; queued, the best round's mean of
                                     the slowest rank (MAX) counts */
    bool csv;                     /* --csv: CSV instead of the table */
    bool blocking;                /* --blocking: each iteration timed alone (waited for before
                                     the next) as the least over the ranks (MIN); the median
                                     over all rounds' iterations counts */
    double timeout_s;             /* --timeout: the watchdog's limit */
    int skew_us;                  /* --skew (with --blocking): the last rank computes this many
                                     microseconds before each timed collective */
    unsigned ops;                 /* --op: MP_BENCH_* bits, the collectives swept */
    unsigned types;               /* -d: MP_BENCH_FLOAT, _HALF, _BFLOAT16 bits, the dtypes
                                     swept */
    const char *device;           /* --device: "cuda" or "cpu", the backend whose memory the
                                     buffers are; NULL: host memory */
    bool share_gpu;               /* --share-gpu (with --device cuda): ranks may share a GPU
                                     (comm.share_gpu's testing mode, comm/device_bind.h) */
} mp_bench_comm_opts;

/* Where a run's buffers live and what its raw rows call. */
typedef struct mp_bench_mem {
    const mp_ops *ops;        /* the backend of --device (NULL: host memory) */
    int device;               /* its CUDA device; -1 for none */
    void *buf, *host;         /* the -e bytes swept (ops' memory) and a host copy (the same
                                 block on host memory) */
    mp_nccl_raw *raw;         /* the raw rows' bare NCCL communicator, on NCCL; else raw MPI */
    bool nccl;                /* choose took NCCL for the device route */
    bool connected;           /* connect opened the communicator's device transport */
    char where[160];          /* the memory in the tables' header, e.g. "cuda memory (GPU 0)" */
} mp_bench_mem;

/* The names of -d's and --op's bits, in bit order: nccl-tests' names. */
extern const char *const mp_bench_type_names[3];
extern const char *const mp_bench_op_names[3];

enum { MP_BENCH_ALLREDUCE = 1, MP_BENCH_REDUCE_SCATTER = 2, MP_BENCH_ALLGATHER = 4 };
enum { MP_BENCH_FLOAT = 1, MP_BENCH_HALF = 2, MP_BENCH_BFLOAT16 = 4 }; /* -d's bits */

/* The most sizes a sweep with -i may have. */
enum { MP_BENCH_MAX_SIZES = 1000 };

/* The most iterations (-n times -r) --blocking keeps the times of. */
enum { MP_BENCH_BLOCKING_MAX = 1000000 };

/* Parses argv[first..argc) into *o (defaults first). MP_EUSAGE with a message for a bad option.
 * Not collective. */
mp_status mp_bench_comm_parse(mp_bench_comm_opts *o, int argc, char **argv, int first);

/* Collective: MP_EUSAGE on a rank whose options (parsed) differ from rank 0's, naming both (a
 * launch that gives ranks other arguments would otherwise run mismatched collectives); MP_OK
 * on the others, for the caller's agreement. */
mp_status mp_bench_comm_same_opts(mp_comm *c, const mp_bench_comm_opts *o);

/* Whether the largest size's buffers fit in memory (mp_data_mem_check): the buffer and the
 * collective's working copy of it, for each rank on this host. MP_EDATA with the numbers
 * otherwise, before anything is allocated. */
mp_status mp_bench_comm_check_memory(const mp_comm *c, const mp_bench_comm_opts *o);

/* This rank's part of setting up *m (zeroed first): without --device, host buffers; with it, the
 * backend opened on the rank's device (local rank modulo the GPUs it sees), -e bytes of its
 * memory and a host copy. MP_EUSAGE when the backend cannot be opened (no GPU, no CUDA in the
 * build), MP_EDATA when its memory cannot hold -e bytes. Not collective. */
mp_status mp_bench_comm_open(const mp_comm *c, const mp_bench_comm_opts *o, mp_bench_mem *m);

/* Collective, after every rank's open succeeded; sets c->timeout_s (--timeout). With --device
 * cuda: gathers every rank's GPU and decides that NCCL carries the collectives (m->nccl), which
 * needs each rank on a GPU of its own, or --share-gpu (then NCCL's environment for sharing is set
 * here, before the first NCCL call); else MP_EUSAGE "bench-comm --device cuda: " with
 * mp_comm_choose's reason, the same on every rank. One rank takes NCCL too. Otherwise it does
 * nothing. */
mp_status mp_bench_comm_choose(mp_comm *c, const mp_bench_comm_opts *o, mp_bench_mem *m);

/* Collective, after every rank's choose succeeded: for memory that is not the host's, opens the
 * communicator's device transport (NCCL when m->nccl, else a second MPI transport) and, on NCCL,
 * the bare communicator of the raw rows. Each step fails alike on every rank (MP_ECOMM naming the
 * rank, MP_EUSAGE for MPI below MPI_THREAD_MULTIPLE). Host memory: nothing. */
mp_status mp_bench_comm_connect(mp_comm *c, mp_bench_mem *m);

/* Runs the sweep on m; rank 0 writes the table (or CSV) to out. MP_ECOMM when a collective fails
 * or any result is wrong. Collective. */
mp_status mp_bench_comm_run(mp_comm *c, const mp_bench_comm_opts *o, const mp_bench_mem *m,
                            FILE *out);

/* Frees what open and connect made (the device transport dropped, the bare communicator
 * destroyed). Collective when connect succeeded. */
void mp_bench_comm_close(mp_comm *c, mp_bench_mem *m);

#endif
