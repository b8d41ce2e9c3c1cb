/* The 2-D convolution layer: y (N, P, Q, K) = conv(x (N, H, W, C), weight (K, R, S, C / G)) + b,
 * as PyTorch's Conv2d in NHWC. Backward: dweight = correlation of x with dy, dbias = sum of dy
 * over (N, P, Q), dx = conv_transpose(dy, weight). The layer reads its tensors as 4-D views
 * built from its per-sample shapes, so callers may pass flattened (N, features) tensors. */
#include "engine/layer.h"

#include "engine/conv_geom.h"

/* t seen as (n, shape[0], shape[1], shape[2]), n = t's batch; MP_EINTERNAL when t's per-sample
 * size differs. */
static mp_status image_view(const mp_layer *l, const mp_tensor *t, const int64_t shape[3],
                            const char *what, mp_tensor *v)
{
    if (t->ndim < 1 || mp_tensor_row(t) != mp_shape_numel(shape))
        return mp_fail(MP_EINTERNAL, "layer %s: conv2d %s has %lld elements per sample, want %lld",
                       l->name, what, (long long)(t->ndim < 1 ? 0 : mp_tensor_row(t)),
                       (long long)mp_shape_numel(shape));
    int64_t s[4] = {t->shape[0], shape[0], shape[1], shape[2]};
    *v = mp_tensor_view(t->data, t->dtype, 4, s);
    return MP_OK;
}

/* y (or dy) as (N * P * Q, K) rows for the bias ops. */
static mp_tensor channel_rows(const mp_tensor *y4)
{
    int64_t s[2] = {y4->shape[0] * y4->shape[1] * y4->shape[2], y4->shape[3]};
    return mp_tensor_view(y4->data, y4->dtype, 2, s);
}

static mp_status conv2d_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    mp_tensor x4, y4;
    MP_TRY(image_view(l, x, l->in_shape, "input", &x4));
    MP_TRY(image_view(l, y, l->out_shape, "output", &y4));
    MP_TRY(l->ops->conv2d_forward(&l->conv, &x4, &l->w[0], &y4));
    if (l->nparams < 2)
        return MP_OK;
    mp_tensor rows = channel_rows(&y4);
    return l->ops->bias_add(&rows, &l->w[1]);
}

static mp_status conv2d_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                 const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    mp_tensor x4, dy4, dx4;
    MP_TRY(image_view(l, x, l->in_shape, "input", &x4));
    MP_TRY(image_view(l, dy, l->out_shape, "output gradient", &dy4));
    if (dx)
        MP_TRY(image_view(l, dx, l->in_shape, "input gradient", &dx4));
    MP_TRY(l->ops->conv2d_backward(&l->conv, &x4, &l->w[0], &dy4, &l->dw[0], dx ? &dx4 : NULL));
    if (l->nparams < 2)
        return MP_OK;
    mp_tensor rows = channel_rows(&dy4);
    return l->ops->bias_grad(&rows, &l->dw[1]);
}

static const mp_layer_class mp_conv2d_class = {
    .type = "conv2d", .forward = conv2d_forward, .backward = conv2d_backward,
    .out_dtype = mp_out_compute, .cast_input = true, .skips_y = true};

mp_status mp_layer_conv2d_init(mp_layer *l, const mp_ops *ops, const char *name,
                               const int64_t in_shape[3], int64_t out, const int kernel[2],
                               const mp_conv_desc *d, bool bias)
{
    int64_t h = in_shape[0], w = in_shape[1], c = in_shape[2];
    if (h < 1 || w < 1 || c < 1)
        return mp_fail(MP_EUSAGE, "layer %s: conv2d needs a non-empty (H, W, C) input (got %lld x "
                       "%lld x %lld)", name, (long long)h, (long long)w, (long long)c);
    if (out < 1 || kernel[0] < 1 || kernel[1] < 1)
        return mp_fail(MP_EUSAGE, "layer %s: conv2d needs out >= 1 and a kernel >= 1x1 (got out "
                       "%lld, kernel %dx%d)", name, (long long)out, kernel[0], kernel[1]);
    if (!mp_conv_desc_valid(d))
        return mp_fail(MP_EUSAGE, "layer %s: conv2d needs stride and dilation >= 1, padding >= 0 "
                       "and groups >= 1 (got stride %dx%d, dilation %dx%d, padding %dx%d, "
                       "groups %d)", name, d->stride[0], d->stride[1], d->dilation[0],
                       d->dilation[1], d->pad[0], d->pad[1], d->groups);
    if (c % d->groups != 0 || out % d->groups != 0)
        return mp_fail(MP_EUSAGE, "layer %s: conv2d groups %d must divide the input channels "
                       "%lld and the output channels %lld", name, d->groups, (long long)c,
                       (long long)out);
    int64_t p = mp_conv_extent(h, kernel[0], d->stride[0], d->pad[0], d->dilation[0]);
    int64_t q = mp_conv_extent(w, kernel[1], d->stride[1], d->pad[1], d->dilation[1]);
    if (p < 1 || q < 1)
        return mp_fail(MP_EUSAGE, "layer %s: conv2d output would be empty (input %lldx%lld, "
                       "kernel %dx%d, padding %dx%d, dilation %dx%d)", name, (long long)h,
                       (long long)w, kernel[0], kernel[1], d->pad[0], d->pad[1], d->dilation[0],
                       d->dilation[1]);
    mp_layer_begin(l, &mp_conv2d_class, ops, name, in_shape, out);
    l->out_shape[0] = p;
    l->out_shape[1] = q;
    l->conv = *d;
    int64_t cg = c / d->groups;
    l->nparams = bias ? 2 : 1;
    l->param_suffix[0] = "weight";
    l->param_ndim[0] = 4;
    l->param_shape[0][0] = out;
    l->param_shape[0][1] = kernel[0];
    l->param_shape[0][2] = kernel[1];
    l->param_shape[0][3] = cg;
    l->param_init[0] = MP_INIT_UNIFORM;
    if (bias) {
        l->param_suffix[1] = "bias";
        l->param_ndim[1] = 1;
        l->param_shape[1][0] = out;
        l->param_init[1] = MP_INIT_UNIFORM;
    }
    l->fan_in = (double)(kernel[0] * kernel[1]) * (double)cg;
    return MP_OK;
}

mp_status mp_layer_conv2d_make(mp_layer *l, const mp_ops *ops, const char *name,
                               const mp_layer_spec *s, const int64_t in_shape[3])
{
    int stride = s->stride ? (int)s->stride : 1, pad = (int)s->pad;
    int dil = s->dilation > 1 ? (int)s->dilation : 1, groups = s->groups > 1 ? (int)s->groups : 1;
    mp_conv_desc d = {{stride, stride}, {pad, pad}, {dil, dil}, groups};
    int kernel[2] = {(int)s->kernel, (int)s->kernel};
    return mp_layer_conv2d_init(l, ops, name, in_shape, s->out, kernel, &d, s->bias);
}
