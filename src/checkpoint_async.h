/* Asynchronous checkpoints (checkpoint.async; docs/ARCHITECTURE.md §6): at the step boundary
 * rank 0 copies the training state into a host snapshot (one block of host memory, pinned on
 * the GPU backend, kept and reused by the next save) and a writer thread writes the file from it
 * as mp_checkpoint_save does (same datasets, same bytes, temporary file, fsync, atomic rename)
 * and prunes the old ones, while training goes on. At most one save is in flight: the caller
 * waits for the one before (mp_ckpt_async_poll with wait) before starting the next. */
#ifndef MP_CHECKPOINT_ASYNC_H
#define MP_CHECKPOINT_ASYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "src/train_state.h"

typedef struct mp_ckpt_async mp_ckpt_async;

/* What a finished save reports. */
typedef struct mp_ckpt_done {
    int64_t step;          /* the state's step */
    char path[1100];       /* the file written ("" when it failed) */
    double write_s;        /* the writer thread's time: written, fsynced, renamed (not pruning) */
    int64_t steps_during;  /* training steps counted (mp_ckpt_async_step) while in flight */
} mp_ckpt_done;

/* A writer with no save in flight and no snapshot memory yet, in *a. */
mp_status mp_ckpt_async_create(mp_ckpt_async **a);

/* Rank 0: copies state s (its tensors whole and in s->ops's memory) and the resume point `at`
 * into the snapshot, growing it when the state is larger than any before, and starts the writer
 * thread on it; returns once the copy is made, so that s may change. MP_EINTERNAL when a save is
 * in flight or the thread cannot start; MP_ENOMEM-like failures of host_alloc as MP_EINTERNAL
 * naming the bytes. */
mp_status mp_ckpt_async_start(mp_ckpt_async *a, const mp_train_state *s,
                              const mp_resume_point *at);

/* Whether a save is in flight (started and not yet reported by mp_ckpt_async_poll). */
bool mp_ckpt_async_busy(const mp_ckpt_async *a);

/* Counts one training step completed while a save is in flight (nothing when none is). */
void mp_ckpt_async_step(mp_ckpt_async *a);

/* Reports the save in flight once it has finished (with wait: waits for it first): *done true,
 * d filled and the writer's status returned (MP_ECKPT with its message when the file could not
 * be written: the checkpoints before it are untouched). *done false and MP_OK when none has
 * finished or none is in flight. */
mp_status mp_ckpt_async_poll(mp_ckpt_async *a, bool wait, bool *done, mp_ckpt_done *d);

/* Waits for a save in flight (a failure of it is reported on stderr), frees the snapshot and a
 * (NULL is ignored). */
void mp_ckpt_async_free(mp_ckpt_async *a);

#endif
