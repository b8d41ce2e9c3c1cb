/* The flatten layer: (H, W, C) -> (1, 1, H * W * C). NHWC rows are already laid out as the
 * flattened features, so forward and backward are element copies (ops->convert, which also
 * converts when the two tensors' dtypes differ). */
#include "engine/layer.h"

static mp_status flatten_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    return l->ops->convert(x, y);
}

static mp_status flatten_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                  const mp_tensor *dy, mp_tensor *dx)
{
    (void)x;
    (void)y;
    return dx ? l->ops->convert(dy, dx) : MP_OK;
}

static const mp_layer_class mp_flatten_class = {
    .type = "flatten", .forward = flatten_forward, .backward = flatten_backward,
    .skips_x = true, .skips_y = true};

mp_status mp_layer_flatten_init(mp_layer *l, const mp_ops *ops, const char *name,
                                const int64_t in_shape[3])
{
    mp_layer_begin(l, &mp_flatten_class, ops, name, in_shape, mp_shape_numel(in_shape));
    l->out_shape[0] = 1;
    l->out_shape[1] = 1;
    return MP_OK;
}

mp_status mp_layer_flatten_make(mp_layer *l, const mp_ops *ops, const char *name,
                                const mp_layer_spec *s, const int64_t in_shape[3])
{
    (void)s;
    return mp_layer_flatten_init(l, ops, name, in_shape);
}
