/* The ReLU layer: y = max(x, 0); backward passes dy where y > 0. */
#include "engine/layer.h"

#include <stdio.h>
#include <string.h>

static mp_status relu_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    return l->ops->relu_forward(x, y);
}

static mp_status relu_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx)
{
    (void)x;
    return dx ? l->ops->relu_backward(y, dy, dx) : MP_OK;
}

static const mp_layer_class mp_relu_class = {
    .type = "relu", .forward = relu_forward, .backward = relu_backward};

mp_status mp_layer_relu_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3])
{
    memset(l, 0, sizeof *l);
    l->cls = &mp_relu_class;
    l->ops = ops;
    snprintf(l->name, sizeof l->name, "%s", name);
    memcpy(l->in_shape, in_shape, sizeof l->in_shape);
    memcpy(l->out_shape, in_shape, sizeof l->out_shape);
    return MP_OK;
}
