/* The prefetching loader (docs/ARCHITECTURE.md §2: "x, y <- loader, prefetched by worker threads,
 * already in the input dtype"). Each epoch the caller hands it a list of dataset indices; batch b
 * is idx[b * batch ..) (the last one may be smaller), gathered, augmented and normalised with
 * mp_dataset_batch_augmented. Worker threads fill up to `depth` batches ahead of the one the
 * consumer holds, into depth + 1 slots allocated once under MP_MEM_DATA.
 * Invariants: batches come back strictly in order; a batch's bytes depend only on (seed, epoch,
 * its indices), never on the number of threads or their timing; a worker never writes the slot
 * the consumer holds. One consumer thread calls next/start_epoch/close, never concurrently. */
#ifndef MP_LOADER_H
#define MP_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "io/dataset.h"

typedef struct mp_loader mp_loader;

typedef struct mp_loader_config {
    const mp_dataset *data;   /* read-only, must outlive the loader */
    int threads;              /* worker threads; 0 = each batch is built in mp_loader_next */
    int depth;                /* batches prepared ahead (>= 1; e.g. 2) */
    int nice;                 /* added to each worker's nice value (0-19; 0 = unchanged) */
    int64_t batch;            /* samples per batch (the last of an epoch may be smaller) */
    mp_dtype dtype;           /* of x */
    const double *mean, *std; /* (data->c) per channel; copied by mp_loader_open */
    int pad;                  /* augmentation, as mp_dataset_batch_augmented */
    bool flip;
    uint64_t seed;
    /* Allocator of the x and y buffers (NULL: mp_alloc and mp_free): the trainer passes its
     * backend's pinned host memory, from which batches copy to a GPU asynchronously. It must
     * return zeroed memory, or NULL when none is left. */
    void *(*host_alloc)(size_t bytes, mp_mem_cat cat);
    void (*host_free)(void *p);
    /* Fences (ops->fence_wait, fence_free; NULL: none): a slot whose fence the consumer
     * recorded (mp_loader_fence) is refilled only after fence_wait on it returns, so an
     * asynchronous copy out of the slot finishes first; close frees the fences. */
    mp_status (*fence_wait)(void *fence);
    void (*fence_free)(void *fence);
} mp_loader_config;

/* Creates a loader for configuration *c (copied; mean and std are copied too) and starts its
 * worker threads, which wait for the first mp_loader_start_epoch. On success *l owns the
 * threads and the slot buffers (depth + 1 batches of x and y, MP_MEM_DATA); free it with
 * mp_loader_close. Returns MP_EINTERNAL, with *l = NULL and nothing left allocated or running,
 * when the configuration is invalid (no data, threads < 0, depth < 1, batch < 1, pad < 0, nice
 * outside [0, 19], no mean/std) or a thread cannot start; MP_EDATA, the same way, when the slot
 * buffers would not fit memory or their size overflows (mp_data_mem_check, before anything is
 * allocated). */
mp_status mp_loader_open(mp_loader **l, const mp_loader_config *c);

/* Begins epoch `epoch` (>= 0, keys the augmentation) over the dataset indices idx[0..count)
 * (count >= 0, each in [0, data->count)); batches are idx[b * batch ..). idx is borrowed: it
 * must stay valid and unchanged until the next start_epoch or close. Called mid-epoch, it waits
 * for the fills in flight, discards every batch of the old epoch and invalidates the buffers
 * the last mp_loader_next returned. */
void mp_loader_start_epoch(mp_loader *l, const int64_t *idx, int64_t count, int64_t epoch);

/* Blocks until batch k of the current epoch is ready (k = batches returned so far this epoch)
 * and returns its buffers: *x (n, H, W, C) of the configured dtype, *y labels (n *
 * mp_dataset_label_len(data): one per image, T per text window), *n samples.
 * The buffers belong to the loader and stay valid until the next call to next, start_epoch or
 * close. Past the last batch, or before any epoch, returns MP_EINTERNAL ("loader: no batch left
 * in this epoch") and leaves the outputs untouched; a batch that could not be built (a token
 * shard that cannot be read) returns its error (MP_EDATA, the shard's message) the same way. */
mp_status mp_loader_next(mp_loader *l, const void **x, const int32_t **y, int64_t *n);

/* Seconds mp_loader_next has spent so far waiting for the device to finish reading a slot (its
 * fence) before the slot's next batch could be made: the consumer ran its prefetched batches
 * ahead of the device, so the device, not the input, held the step. The rest of next's time is
 * the wait for the input itself. Consumer thread only. */
double mp_loader_device_wait_s(const mp_loader *l);

typedef struct mp_loader_stats {
    int64_t fills;          /* batches built */
    double fill_s, fence_s; /* wall seconds building them, and waiting on fences before */
} mp_loader_stats;

/* What the loader's fills have cost since it opened, discarded ones included (a fill still
 * running is not counted yet): batches built, the wall seconds building them (summed over the
 * threads that built them, from the end of the fence wait to the batch's last byte; a worker
 * preempted by the step counts its wait too) and the seconds fills waited on slots' fences
 * (with threads, a worker's, overlapping the consumer's own wait on the same fence that
 * mp_loader_device_wait_s counts; without, about 0, the consumer having waited first).
 * fill_s / fills is about a batch's cost on one thread; an input wait about that long every
 * step while the device is the slower side means the ring of slots, not the input, sets the
 * pace. Any thread (it takes the lock). */
void mp_loader_stats_get(mp_loader *l, mp_loader_stats *out);

/* The fence of the slot the last mp_loader_next returned, for the consumer to record (with
 * ops->fence_record) once it has queued the copies that read the slot. Not valid before the
 * first mp_loader_next. */
void **mp_loader_fence(mp_loader *l);

/* Stops and joins the worker threads (a fill in progress is finished first; nothing else is
 * waited for, so it is safe mid-epoch and before any epoch) and frees everything. NULL is
 * ignored. */
void mp_loader_close(mp_loader *l);

#endif
