/* SGD driver: state allocation and the per-step call into the backend's fused SGD op. */
#include "engine/optim.h"

#include <string.h>

void mp_sgd_init(mp_optimizer *o, const mp_ops *ops, const mp_params *p, double momentum,
                 double dampening, double weight_decay, bool nesterov)
{
    memset(o, 0, sizeof *o);
    o->ops = ops;
    o->args.momentum = momentum;
    o->args.dampening = dampening;
    o->args.weight_decay = weight_decay;
    o->args.nesterov = nesterov;
    if (momentum != 0.0)
        o->momentum = mp_tensor_alloc(p->data.dtype, p->data.ndim, p->data.shape, MP_MEM_OPTIM);
}

mp_status mp_optimizer_step(mp_optimizer *o, mp_params *p, double lr)
{
    o->args.lr = lr;
    o->args.first_step = o->steps == 0;
    MP_TRY(o->ops->sgd_step(&o->args, &p->data, &p->grad, o->momentum.data ? &o->momentum : NULL));
    o->steps++;
    return MP_OK;
}

void mp_optimizer_free(mp_optimizer *o)
{
    mp_tensor_free(&o->momentum);
    memset(o, 0, sizeof *o);
}
