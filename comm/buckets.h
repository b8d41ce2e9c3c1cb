/* Gradient buckets (docs/ARCHITECTURE.md §2, §4): slices of the flat gradient buffers, in reverse
 * layer order, each summed over all ranks as soon as backward has written its last gradient, while
 * backward goes on (over MPI on host memory, or with NCCL on the device buffers themselves when the
 * communicator has device collectives). A bucket is a contiguous range of one group's buffer
 * holding whole parameters; the first bucket of a group is small (first_bucket_bytes) so
 * communication starts early, the others close once they reach bucket_bytes (PyTorch DDP's
 * rule). On the wire gradients are in
 * the group's gradient dtype, or converted to another (comm.grad_dtype) through a wire buffer.
 * With predivide f each rank's gradient is divided by f before the sum and by world / f after
 * it, which keeps large fp16 sums finite. Both divisions are the caller's, folded into scales it
 * applies anyway: the pre-division into the loss gradient (mp_grad_sync_pre_scale), so backward
 * itself produces gradient / f and a rank's half gradients overflow no sooner than one rank's
 * with the global batch; the post-division into the unscaling (mp_grad_sync_post_scale).
 * With cfg.shard (ZeRO-1) a bucket is reduce-scattered instead: each rank receives the sum of
 * the part of it that lies in its own block of the group (params->groups[g].lo, .n), and the
 * rest of its gradient buffer is not summed (zero or as it was: padding stays zero). With
 * cfg.accumulate the micro-batches of an accumulation window before the last add their
 * gradients to an FP32 accumulator (mp_grad_sync_accumulate) and nothing travels; in the last
 * one each bucket adds the accumulator to its gradients just before it travels (or, with one
 * rank, it would). */
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
    bool shard;       /* reduce-scatter to the ranks' blocks of each group (ZeRO-1) */
    bool accumulate;  /* keep an accumulator for micro-batches (gradient accumulation) */
} mp_grad_sync_config;

typedef struct mp_grad_sync {
    mp_comm *comm;
    const mp_ops *ops;
    mp_params *params;
    mp_grad_sync_config cfg;
    mp_dtype wire[MP_NGROUPS];
    mp_tensor wirebuf[MP_NGROUPS]; /* (total) in the wire dtype when it is not the gradient's */
    mp_tensor acc[MP_NGROUPS];     /* (total) FP32 (FP64 for FP64 gradients): the sum of the
                                      window's earlier micro-batches (cfg.accumulate) */
    bool add_acc;                  /* this step's buckets add acc to their gradients first */
    mp_bucket *buckets;            /* sorted by first_param, highest first: the start order */
    int nbuckets, next;            /* next: the first bucket not started this step */
    double t_first, t_backward;    /* this step: first start, end of backward (seconds) */
    double comm_ms, exposed_ms;    /* the last finished step: first start to all summed, and
                                      the part of it after backward (not hidden); where the
                                      host does not wait (NCCL), those of the marked step two
                                      before, timed on the device; 0 where nothing was timed */
    bool timed;                    /* the last finished step has them: the same on every rank */
    void *mark[2][3];              /* where the host does not wait, two sets used in turn: the
                                      backend's clock marks at the first start, backward's end
                                      and all summed */
    bool pending[2];               /* a set's marks recorded and not read yet */
    int set;                       /* the set this step marks */
    bool marked;                   /* this step recorded mark[set][0] */
} mp_grad_sync;

/* Plans the buckets of p's groups (see the file comment) with `wire_bytes[g]` bytes an element
 * on the wire; writes at most p->count + MP_NGROUPS buckets to out, sorted by first_param,
 * highest first, and returns how many. Groups without elements get none. Not collective. */
int mp_buckets_plan(const mp_params *p, const size_t wire_bytes[MP_NGROUPS], int64_t bucket_bytes,
                    int64_t first_bucket_bytes, mp_bucket *out);

/* Sets up buckets over p's gradients; `ops` is the backend that owns the buffers (conversion
 * to and from the wire dtype; the communicator's data plane routes the sums by its memory). Not
 * collective. MP_EUSAGE for a bad configuration. */
mp_status mp_grad_sync_init(mp_grad_sync *s, mp_comm *comm, const mp_ops *ops, mp_params *p,
                            const mp_grad_sync_config *cfg);

/* Begins a step, the last micro-batch of its window: no bucket started, no time measured; with
 * `accumulated` (cfg.accumulate, and earlier micro-batches went to mp_grad_sync_accumulate)
 * every bucket adds the accumulator to its gradients before it travels. */
void mp_grad_sync_begin(mp_grad_sync *s, bool accumulated);

/* A micro-batch before the last of its window finished backward (announcing no bucket): its
 * gradients are added to the accumulator in FP32, the window's first replacing what it held.
 * Queued work only; nothing travels. MP_EINTERNAL without cfg.accumulate. */
mp_status mp_grad_sync_accumulate(mp_grad_sync *s, bool first);

/* Backward has written the final gradients of parameters first_param..count-1: starts every
 * bucket that is now complete (with overlap on). Collective in effect: every rank must see the
 * same calls. Matches mp_model's grads_ready (arg = the mp_grad_sync). */
mp_status mp_grad_sync_ready(void *s, int first_param);

/* Backward is over: starts the buckets not started yet and leaves each group's gradient buffer
 * (with cfg.shard: the rank's block of it) holding the sum over ranks for the ops queued after
 * this call (mp_comm_coll_order). Where the
 * host waits for the sums (under the watchdog) comm_ms and exposed_ms measure them; on a device
 * transport with a stream of its own (NCCL) the host does not wait: the backend's clock marks
 * time them on the device, in two sets used in turn, a set read at the first start of the
 * marked step after next (mark_elapsed waits for it, so the host runs at most about two steps
 * ahead of the device), and comm_ms and exposed_ms are those of the marked step two before (0
 * at the first two and inside a graph capture, which records no mark), or after unmarked
 * steps those of the last marked step (mp_grad_sync_unmarked). */
mp_status mp_grad_sync_finish(mp_grad_sync *s);

/* Steps that record no marks (graph launches) ran since the last marked step: the next marked
 * step reads the newest set, that last marked step's, instead of the older one (which can be
 * a warm-up step's, with NCCL's connection set-up in it). Not collective; every rank calls it
 * at the same steps. */
void mp_grad_sync_unmarked(mp_grad_sync *s);

/* The factor to fold into the loss gradient: 1 / predivide (1 with one rank). */
double mp_grad_sync_pre_scale(const mp_grad_sync *s);

/* The factor that turns the sum of pre-scaled gradients into the mean over ranks:
 * predivide / world (1 with one rank, where nothing is divided). */
double mp_grad_sync_post_scale(const mp_grad_sync *s);

/* Frees the buckets, wire buffers and accumulator. */
void mp_grad_sync_free(mp_grad_sync *s);

#endif
