/* The engine's allocator: 64-byte aligned blocks, counted by category so that the bytes of
 * weights, master weights, gradients, optimizer state and activations (current and peak) come
 * from the allocator itself, not from formulas. Like Redis's zmalloc it never returns NULL:
 * running out of host memory prints a message and aborts the process.
 * Each block is also counted by place: device (what a backend's mem_alloc hands out, on the CPU
 * backend too, and the device workspaces a backend holds) or host (everything else: the dataset,
 * the loader's pinned slots, host copies), so that device memory can be compared with what
 * PyTorch counts (torch.cuda.max_memory_allocated: device allocations only).
 * The counters are process-wide and thread-safe. */
#ifndef MP_ALLOC_H
#define MP_ALLOC_H

#include <stddef.h>
#include <stdint.h>

typedef enum mp_mem_cat {
    MP_MEM_WEIGHTS,
    MP_MEM_MASTER,
    MP_MEM_GRADS,
    MP_MEM_OPTIM,
    MP_MEM_ACTIVATIONS,
    MP_MEM_DATA,
    MP_MEM_WORKSPACE,
    MP_MEM_NCAT
} mp_mem_cat;

typedef enum mp_mem_place { MP_MEM_HOST, MP_MEM_DEVICE, MP_MEM_NPLACE } mp_mem_place;

/* Zero-filled, 64-byte aligned block of `bytes` counted under `cat`, on the host. Free with
 * mp_free. */
void *mp_alloc(size_t bytes, mp_mem_cat cat);

/* mp_alloc counted at `place` (the CPU backend's mem_alloc: MP_MEM_DEVICE). Free with mp_free. */
void *mp_alloc_at(size_t bytes, mp_mem_cat cat, mp_mem_place place);

/* Frees a block from mp_alloc (NULL is ignored) and uncounts it. */
void mp_free(void *p);

/* Counts `delta` bytes (negative: released) held under `cat` at `place` outside mp_alloc: the
 * memory the CUDA backend allocates (device blocks, pinned host blocks), so that the counters
 * cover every backend. */
void mp_mem_count(mp_mem_place place, mp_mem_cat cat, int64_t delta);

/* The category's name as metrics print it ("weights", "master", ...). */
const char *mp_mem_cat_name(mp_mem_cat cat);

/* Bytes currently held under `cat`, and the most ever held under it. */
int64_t mp_mem_current(mp_mem_cat cat);
int64_t mp_mem_peak(mp_mem_cat cat);

/* The most bytes ever held in all categories together. */
int64_t mp_mem_peak_total(void);

/* Bytes held at `place` now (all categories together), and the most ever held there. */
int64_t mp_mem_current_at(mp_mem_place place);
int64_t mp_mem_peak_at(mp_mem_place place);

/* Starts the peaks again from what each category, place and the total hold now, so that a later
 * mp_mem_peak measures one phase (mpdist eval's evaluation, say). */
void mp_mem_reset_peaks(void);

#endif
