/* The ReLU layer: y = max(x, 0); backward passes dy where y > 0. */
#include "engine/layer.h"

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
    .type = "relu", .forward = relu_forward, .backward = relu_backward, .inplace_backward = true,
    .skips_x = true, .inplace_forward = true};

mp_status mp_layer_relu_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3])
{
    mp_layer_begin(l, &mp_relu_class, ops, name, in_shape, in_shape[2]);
    return MP_OK;
}

mp_status mp_layer_relu_make(mp_layer *l, const mp_ops *ops, const char *name,
                             const mp_layer_spec *s, const int64_t in_shape[3])
{
    (void)s;
    return mp_layer_relu_init(l, ops, name, in_shape);
}
