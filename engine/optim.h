/* Optimizers over the flat parameter groups: one fused op call per group per step (unscale,
 * update the FP32 masters, write the half copy), over the rank's block of each group when the
 * parameters are sharded (ZeRO-1: the other blocks' model copies come from their owners). The
 * optimizer owns its state (slots of the block's size, counted under MP_MEM_OPTIM), which a
 * skipped step never touches. */
#ifndef MP_OPTIM_H
#define MP_OPTIM_H

#include <stdint.h>

#include "engine/ops.h"
#include "engine/params.h"

typedef struct mp_optimizer {
    const mp_ops *ops;
    mp_optim_args args;                 /* hyper-parameters; lr, step and grad_scale per step */
    mp_tensor slot1[MP_NGROUPS], slot2[MP_NGROUPS];
    int64_t steps;                      /* steps taken (skipped steps excluded) */
} mp_optimizer;

/* Prepares an optimizer with the hyper-parameters in `hyper` (kind, weight decay, momentum,
 * dampening, nesterov, betas, eps) for the parameters in p, allocating its zeroed slots. */
void mp_optimizer_init(mp_optimizer *o, const mp_ops *ops, mp_params *p,
                       const mp_optim_args *hyper);

/* One step over every group with learning rate lr, multiplying each gradient by grad_scale
 * first. Call only for steps that are not skipped. */
mp_status mp_optimizer_step(mp_optimizer *o, mp_params *p, double lr, double grad_scale);

/* One step that takes its word from the mixed-precision state st in backend memory (the
 * optim_step op with st and mp_optim_args.lr_from_state): skipped on the device when
 * st->found_inf is set, at the rate st->lr (the amp_step_values op sets it before the step, so
 * that a graph holding this step reads each step's), gradients times grad_scale / the loss scale,
 * clipped to the global norm max_norm (0: never) from st->sumsq, Adam's step count
 * st->steps + 1. o->steps is not advanced: st->steps counts. */
mp_status mp_optimizer_step_amp(mp_optimizer *o, mp_params *p, double grad_scale,
                                double max_norm, const mp_amp_state *st);

/* Frees the optimizer state. */
void mp_optimizer_free(mp_optimizer *o);

#endif
