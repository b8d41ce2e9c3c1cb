/* What layer classes share (engine/layer.h): the common start of their set-up, and output
 * dtype rules. */
#include "engine/layer.h"

#include <stdio.h>
#include <string.h>

void mp_layer_begin(mp_layer *l, const mp_layer_class *cls, const mp_ops *ops, const char *name,
                    const int64_t in_shape[3], int64_t out_c)
{
    memset(l, 0, sizeof *l);
    l->cls = cls;
    l->ops = ops;
    snprintf(l->name, sizeof l->name, "%s", name);
    memcpy(l->in_shape, in_shape, sizeof l->in_shape);
    l->out_shape[0] = in_shape[0];
    l->out_shape[1] = in_shape[1];
    l->out_shape[2] = out_c;
}

mp_dtype mp_out_compute(const mp_layer *l, const mp_amp_policy *a, mp_dtype in)
{
    (void)l;
    (void)in;
    return a->compute;
}

mp_dtype mp_out_weights(const mp_layer *l, const mp_amp_policy *a, mp_dtype in)
{
    (void)l;
    (void)in;
    return a->weights;
}
