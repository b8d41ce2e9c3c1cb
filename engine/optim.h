/* Optimizers over the flat parameter buffers: one op call per step for the whole model.
 * The optimizer owns its state (the momentum buffer, counted under MP_MEM_OPTIM). */
#ifndef MP_OPTIM_H
#define MP_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/ops.h"
#include "engine/params.h"

typedef struct mp_optimizer {
    const mp_ops *ops;
    mp_sgd_args args; /* lr is set per step */
    mp_tensor momentum; /* same shape as the flat parameters; empty when momentum == 0 */
    int64_t steps;      /* completed steps */
} mp_optimizer;

/* Prepares SGD (torch.optim.SGD semantics) for the parameters in p. */
void mp_sgd_init(mp_optimizer *o, const mp_ops *ops, const mp_params *p, double momentum,
                 double dampening, double weight_decay, bool nesterov);

/* One step with learning rate lr over all of p using the gradients in p->grad. */
mp_status mp_optimizer_step(mp_optimizer *o, mp_params *p, double lr);

/* Frees the optimizer state. */
void mp_optimizer_free(mp_optimizer *o);

#endif
