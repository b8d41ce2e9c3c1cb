/* The engine's allocator: 64-byte aligned blocks, counted by category so that the bytes of
 * weights, master weights, gradients, optimizer state and activations (current and peak) come
 * from the allocator itself, not from formulas. Like Redis's zmalloc it never returns NULL:
 * running out of host memory prints a message and aborts the process.
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

/* Zero-filled, 64-byte aligned block of `bytes` counted under `cat`. Free with mp_free. */
void *mp_alloc(size_t bytes, mp_mem_cat cat);

/* Frees a block from mp_alloc (NULL is ignored) and uncounts it. */
void mp_free(void *p);

/* Counts `delta` bytes (negative: released) held under `cat` outside mp_alloc: device memory
 * the CUDA backend allocates, so that the counters cover every backend. */
void mp_mem_count(mp_mem_cat cat, int64_t delta);

/* The category's name as metrics print it ("weights", "master", ...). */
const char *mp_mem_cat_name(mp_mem_cat cat);

/* Bytes currently held under `cat`, and the most ever held under it. */
int64_t mp_mem_current(mp_mem_cat cat);
int64_t mp_mem_peak(mp_mem_cat cat);

/* The most bytes ever held in all categories together. */
int64_t mp_mem_peak_total(void);

/* Starts the peaks again from what each category (and the total) holds now, so that a later
 * mp_mem_peak measures one phase (mpdist eval's evaluation, say). */
void mp_mem_reset_peaks(void);

#endif
