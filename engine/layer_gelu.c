/* The GELU layer (tanh form); backward reads the forward's input. */
#include "engine/layer.h"

static mp_status gelu_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    return l->ops->gelu_forward(x, y);
}

static mp_status gelu_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    return dx ? l->ops->gelu_backward(x, dy, dx) : MP_OK;
}

static const mp_layer_class mp_gelu_class = {
    .type = "gelu", .forward = gelu_forward, .backward = gelu_backward, .skips_y = true};

mp_status mp_layer_gelu_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3])
{
    mp_layer_begin(l, &mp_gelu_class, ops, name, in_shape, in_shape[2]);
    return MP_OK;
}

mp_status mp_layer_gelu_make(mp_layer *l, const mp_ops *ops, const char *name,
                             const mp_layer_spec *s, const int64_t in_shape[3])
{
    (void)s;
    return mp_layer_gelu_init(l, ops, name, in_shape);
}
