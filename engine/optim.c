/* The optimizer driver: state allocation and one fused backend call per parameter group. */
#include "engine/optim.h"

#include <string.h>

void mp_optimizer_init(mp_optimizer *o, const mp_ops *ops, mp_params *p,
                       const mp_optim_args *hyper)
{
    memset(o, 0, sizeof *o);
    o->ops = ops;
    o->args = *hyper;
    bool adam = hyper->kind != MP_OPTIM_SGD;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_tensor u = mp_params_updated(p, k);
        mp_dtype state = u.dtype == MP_F64 ? MP_F64 : MP_F32;
        if (adam || hyper->momentum != 0.0)
            o->slot1[k] = mp_tensor_new(ops, state, u.ndim, u.shape, MP_MEM_OPTIM);
        if (adam)
            o->slot2[k] = mp_tensor_new(ops, state, u.ndim, u.shape, MP_MEM_OPTIM);
    }
}

/* The optim_step op over every group's block with o->args. */
static mp_status step_groups(mp_optimizer *o, mp_params *p, const mp_amp_state *st)
{
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &p->groups[k];
        if (g->n == 0)
            continue;
        mp_tensor param = mp_params_updated(p, k);
        mp_tensor copy = mp_params_slice(&g->model, g->lo, g->lo + g->n);
        mp_tensor grad = mp_params_slice(&g->grad, g->lo, g->lo + g->n);
        MP_TRY(o->ops->optim_step(&o->args, st, &param, copy.data != param.data ? &copy : NULL,
                                  &grad, o->slot1[k].data ? &o->slot1[k] : NULL,
                                  o->slot2[k].data ? &o->slot2[k] : NULL));
    }
    return MP_OK;
}

mp_status mp_optimizer_step(mp_optimizer *o, mp_params *p, double lr, double grad_scale)
{
    o->args.lr = lr;
    o->args.grad_scale = grad_scale;
    o->args.step = o->steps + 1;
    o->args.max_norm = 0.0;
    MP_TRY(step_groups(o, p, NULL));
    o->steps++;
    return MP_OK;
}

mp_status mp_optimizer_step_amp(mp_optimizer *o, mp_params *p, double grad_scale,
                                double max_norm, const mp_amp_state *st)
{
    o->args.lr_from_state = true;
    o->args.grad_scale = grad_scale;
    o->args.max_norm = max_norm;
    return step_groups(o, p, st);
}

void mp_optimizer_free(mp_optimizer *o)
{
    for (int k = 0; k < MP_NGROUPS; k++) {
        if (o->ops) {
            mp_tensor_delete(o->ops, &o->slot1[k]);
            mp_tensor_delete(o->ops, &o->slot2[k]);
        }
    }
    memset(o, 0, sizeof *o);
}
