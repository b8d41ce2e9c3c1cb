/* Gradient buckets (DESIGN §2, §4): slices of the flat gradient buffers, in reverse layer order,
 * each summed over all ranks as soon as backward has written its last gradient, while backward
 * goes on (over MPI on host memory, or with NCCL on the device buffers themselves when the
 * communicator has device collectives). A bucket is a contiguous range of one group's buffer
 * holding whole parameters; the first bucket of a group is small (first_bucket_bytes) so
 * communication starts early, the others close once they reach bucket_bytes (PyTorch DDP's
 * rule). On the wire gradients are in
 * the group's gradient dtype, or converted to another (comm.grad_dtype) through a wire buffer.
 * With predivide f each rank's gradient is divided by f before the sum and by world / f after
 * it, which keeps large fp16 sums finite. Both divisions are the caller's, folded into scales it
 * applies anyway: the pre-division into the loss gradient (mp_grad_sync_pre_scale), so backward
 * itself produces gradient / f and a rank's half gradients overflow no sooner than one rank's
 * with the global batch; the post-division into the unscaling (mp_grad_sync_post_scale). */
#ifndef MP_BUCKETS_H
#define MP_BUCKETS_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "engine/ops.h"
#include "engine/params.h"

typedef struct mp_bucket {
    int group;          /* mp_group_id */
    int64_t lo, hi;     /* elements [lo, hi) of the group's flat gradient buffer */
    int first_param;    /* its lowest parameter index: ready once backward passed it */
    int nparams;
    uint64_t ticket;    /* of this step's all-reduce; 0 before it started */
    char what[80];      /* its name in messages, set by mp_grad_sync_init */
} mp_bucket;

typedef struct mp_grad_sync_config {
    int64_t bucket_bytes, first_bucket_bytes; /* on the wire */
    int wire;         /* an mp_dtype for every group, or -1: each group's gradient dtype */
    double predivide; /* f > 0; 1 = none */
    bool overlap;     /* start buckets during backward (else all after it) */
} mp_grad_sync_config;

typedef struct mp_grad_sync {
    mp_comm *comm;
    const mp_ops *ops;
    mp_params *params;
    mp_grad_sync_config cfg;
    mp_dtype wire[MP_NGROUPS];
    mp_tensor wirebuf[MP_NGROUPS]; /* (total) in the wire dtype when it is not the gradient's */
    void *host[MP_NGROUPS];        /* (total) wire-dtype host copy that MPI sums when the
                                      backend's memory is not the host's (several ranks, no
                                      device collectives) */
    mp_bucket *buckets;            /* sorted by first_param, highest first: the start order */
    int nbuckets, next;            /* next: the first bucket not started this step */
    double t_first, t_backward;    /* this step: first start, end of backward (seconds) */
    double comm_ms, exposed_ms;    /* the last finished step: first start to all summed, and
                                      the part of it after backward (not hidden); 0 with
                                      device collectives, where the host never waits */
} mp_grad_sync;

/* Plans the buckets of p's groups (see the file comment) with `wire_bytes[g]` bytes an element
 * on the wire; writes at most p->count + MP_NGROUPS buckets to out, sorted by first_param,
 * highest first, and returns how many. Groups without elements get none. Not collective. */
int mp_buckets_plan(const mp_params *p, const size_t wire_bytes[MP_NGROUPS], int64_t bucket_bytes,
                    int64_t first_bucket_bytes, mp_bucket *out);

/* Sets up buckets over p's gradients; `ops` is the backend that owns the buffers (conversion
 * to and from the wire dtype). The host mirrors MPI needs are not made when the communicator
 * already has its device transport (else mp_grad_sync_use_device frees them). Not collective. MP_EUSAGE for a bad configuration. */
mp_status mp_grad_sync_init(mp_grad_sync *s, mp_comm *comm, const mp_ops *ops, mp_params *p,
                            const mp_grad_sync_config *cfg);

/* The communicator has opened its device transport (NCCL) after mp_grad_sync_init: frees the
 * host mirrors, which NCCL does not use. Nothing when it has none. Not collective. */
void mp_grad_sync_use_device(mp_grad_sync *s);

/* Begins a step: no bucket started. */
void mp_grad_sync_begin(mp_grad_sync *s);

/* Backward has written the final gradients of parameters first_param..count-1: starts every
 * bucket that is now complete (with overlap on). Collective in effect: every rank must see the
 * same calls. Matches mp_model's grads_ready (arg = the mp_grad_sync). */
mp_status mp_grad_sync_ready(void *s, int first_param);

/* Backward is over: starts the buckets not started yet, waits for all (under the watchdog) and
 * leaves each group's gradient buffer holding the sum over ranks. With device collectives
 * (mp_comm_has_device) nothing waits on the host: the compute stream is made to wait for the
 * sums (mp_comm_device_order), so the ops queued after this call see them; comm_ms and
 * exposed_ms are then 0, since measuring them would need host waits. */
mp_status mp_grad_sync_finish(mp_grad_sync *s);

/* The factor to fold into the loss gradient: 1 / predivide (1 with one rank). */
double mp_grad_sync_pre_scale(const mp_grad_sync *s);

/* The factor that turns the sum of pre-scaled gradients into the mean over ranks:
 * predivide / world (1 with one rank, where nothing is divided). */
double mp_grad_sync_post_scale(const mp_grad_sync *s);

/* Frees the buckets and wire buffers. */
void mp_grad_sync_free(mp_grad_sync *s);

#endif
