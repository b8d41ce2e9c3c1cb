/* The pooling layers over (H, W, C) inputs: max and average pooling with a window, stride and
 * padding (mp_pool_desc; max ignores padding, average counts padded zeros as PyTorch's
 * count_include_pad=True), and global average pooling (H, W, C) -> (1, 1, C). No parameters.
 * The layer reads its tensors as 4-D views built from its per-sample shapes, so callers may
 * pass flattened (N, features) tensors. */
#include "engine/layer.h"

#include <string.h>

/* t seen as (n, shape[0], shape[1], shape[2]), n = t's batch; MP_EINTERNAL when t's per-sample
 * size differs. */
static mp_status image_view(const mp_layer *l, const mp_tensor *t, const int64_t shape[3],
                            const char *what, mp_tensor *v)
{
    if (t->ndim < 1 || mp_tensor_row(t) != mp_shape_numel(shape))
        return mp_fail(MP_EINTERNAL, "layer %s: pooling %s has %lld elements per sample, want "
                       "%lld", l->name, what, (long long)(t->ndim < 1 ? 0 : mp_tensor_row(t)),
                       (long long)mp_shape_numel(shape));
    int64_t s[4] = {t->shape[0], shape[0], shape[1], shape[2]};
    *v = mp_tensor_view(t->data, t->dtype, 4, s);
    return MP_OK;
}

static mp_status pool_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    mp_tensor x4, y4;
    MP_TRY(image_view(l, x, l->in_shape, "input", &x4));
    MP_TRY(image_view(l, y, l->out_shape, "output", &y4));
    return l->ops->pool_forward(&l->pool, &x4, &y4);
}

static mp_status pool_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx)
{
    if (!dx)
        return MP_OK;
    mp_tensor x4, y4, dy4, dx4;
    MP_TRY(image_view(l, x, l->in_shape, "input", &x4));
    MP_TRY(image_view(l, y, l->out_shape, "output", &y4));
    MP_TRY(image_view(l, dy, l->out_shape, "output gradient", &dy4));
    MP_TRY(image_view(l, dx, l->in_shape, "input gradient", &dx4));
    return l->ops->pool_backward(&l->pool, &x4, &y4, &dy4, &dx4);
}

static const mp_layer_class mp_maxpool_class = {
    .type = "maxpool", .forward = pool_forward, .backward = pool_backward};
static const mp_layer_class mp_avgpool_class = {
    .type = "avgpool", .forward = pool_forward, .backward = pool_backward};
static const mp_layer_class mp_gavgpool_class = {
    .type = "gavgpool", .forward = pool_forward, .backward = pool_backward};

/* Checks d against in_shape and fills the layer; cls picks the display type. */
static mp_status pool_setup(mp_layer *l, const mp_ops *ops, const char *name,
                            const int64_t in_shape[3], const mp_pool_desc *d,
                            const mp_layer_class *cls)
{
    const char *kind = d->max ? "max pooling" : "average pooling";
    if (in_shape[0] < 1 || in_shape[1] < 1 || in_shape[2] < 1)
        return mp_fail(MP_EUSAGE, "layer %s: %s needs a non-empty (H, W, C) input (got %lld x "
                       "%lld x %lld)", name, kind, (long long)in_shape[0],
                       (long long)in_shape[1], (long long)in_shape[2]);
    if (d->window[0] < 1 || d->window[1] < 1 || d->stride[0] < 1 || d->stride[1] < 1)
        return mp_fail(MP_EUSAGE, "layer %s: %s needs window and stride >= 1 (got window %dx%d, "
                       "stride %dx%d)", name, kind, d->window[0], d->window[1], d->stride[0],
                       d->stride[1]);
    if (d->pad[0] < 0 || d->pad[1] < 0 || 2 * d->pad[0] > d->window[0] ||
        2 * d->pad[1] > d->window[1])
        return mp_fail(MP_EUSAGE, "layer %s: %s padding must be between 0 and half the window "
                       "(got pad %dx%d, window %dx%d)", name, kind, d->pad[0], d->pad[1],
                       d->window[0], d->window[1]);
    int64_t hp = in_shape[0] + 2 * (int64_t)d->pad[0] - d->window[0];
    int64_t wp = in_shape[1] + 2 * (int64_t)d->pad[1] - d->window[1];
    if (hp < 0 || wp < 0)
        return mp_fail(MP_EUSAGE, "layer %s: %s window %dx%d is larger than the padded input "
                       "%lld x %lld: the output would be empty", name, kind, d->window[0],
                       d->window[1], (long long)(in_shape[0] + 2 * (int64_t)d->pad[0]),
                       (long long)(in_shape[1] + 2 * (int64_t)d->pad[1]));
    mp_layer_begin(l, cls, ops, name, in_shape, in_shape[2]);
    l->out_shape[0] = hp / d->stride[0] + 1;
    l->out_shape[1] = wp / d->stride[1] + 1;
    l->pool = *d;
    return MP_OK;
}

mp_status mp_layer_pool_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3], const mp_pool_desc *d)
{
    return pool_setup(l, ops, name, in_shape, d, d->max ? &mp_maxpool_class : &mp_avgpool_class);
}

mp_status mp_layer_global_avgpool_init(mp_layer *l, const mp_ops *ops, const char *name,
                                       const int64_t in_shape[3])
{
    mp_pool_desc d;
    memset(&d, 0, sizeof d);
    d.window[0] = (int)in_shape[0];
    d.window[1] = (int)in_shape[1];
    d.stride[0] = d.stride[1] = 1;
    return pool_setup(l, ops, name, in_shape, &d, &mp_gavgpool_class);
}

mp_status mp_layer_pool_make(mp_layer *l, const mp_ops *ops, const char *name,
                             const mp_layer_spec *s, const int64_t in_shape[3])
{
    int k = (int)s->kernel, stride = s->stride ? (int)s->stride : k, pad = (int)s->pad;
    mp_pool_desc d = {{k, k}, {stride, stride}, {pad, pad}, strcmp(s->type, "maxpool") == 0};
    return mp_layer_pool_init(l, ops, name, in_shape, &d);
}

mp_status mp_layer_global_avgpool_make(mp_layer *l, const mp_ops *ops, const char *name,
                                       const mp_layer_spec *s, const int64_t in_shape[3])
{
    (void)s;
    return mp_layer_global_avgpool_init(l, ops, name, in_shape);
}
