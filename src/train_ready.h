/* When backward completes each gradient (log.profile; docs/scaling.md): the input of the scaling
 * model. The recorder sits between the model's grads_ready hook and the gradient buckets'
 * (mp_grad_sync_ready), notes the profile's clock (engine/profile.h: on a GPU read after the
 * queue drained) at each call from backward's start, and keeps the mean over the profiled steps,
 * the first (warm-up) left out as the profile leaves it out. With the host clock only
 * (log.profile_clock = "device" waits for nothing, and records no ready times). */
#ifndef MP_TRAIN_READY_H
#define MP_TRAIN_READY_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/buckets.h"
#include "engine/params.h"
#include "engine/status.h"
#include "io/metrics.h"

typedef struct mp_ready_times {
    mp_grad_sync *sync; /* the hook it passes each call on to, and whose plan it reports */
    double t0;          /* this step's backward start (mp_profile_now) */
    int pending;        /* the highest parameter not yet completed this step */
    double *now, *sum;  /* per parameter, seconds from t0: this step's, and over counted steps */
    int64_t steps;      /* steps counted */
    bool warm;          /* the warm-up step has passed */
} mp_ready_times;

/* Sets r up for the parameters of sync's plan, passing each call on to sync. MP_EINTERNAL when
 * memory runs out. */
mp_status mp_ready_times_init(mp_ready_times *r, mp_grad_sync *sync);

/* Backward of an optimizer step's last micro-batch starts now. */
void mp_ready_times_begin(mp_ready_times *r);

/* The model's grads_ready hook (arg = the mp_ready_times): parameters first_param..count-1 are
 * complete; notes the time and calls mp_grad_sync_ready. */
mp_status mp_ready_times_ready(void *arg, int first_param);

/* That backward has ended: parameters no call named are complete now; the step is counted
 * (after the first). */
void mp_ready_times_end(mp_ready_times *r);

/* Writes the "backward" record (io/metrics.h) to m, of steps of micro_batches micro-batches:
 * nothing before a step was counted. */
void mp_ready_times_report(const mp_ready_times *r, mp_metrics *m, int64_t micro_batches);

/* Frees what init allocated; r may be zeroed or already freed. */
void mp_ready_times_free(mp_ready_times *r);

#endif
