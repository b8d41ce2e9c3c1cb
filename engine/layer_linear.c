/* The linear layer: y (N, out) = x (N, in) W^T + b, weight (out, in) as in PyTorch, over the
 * flattened sample, or per token over the last dimension (PyTorch's nn.Linear on (N, T, D)).
 * Backward: dW = dy^T x, db = sum_rows dy, dx = dy W. A head tied to an embedding uses the
 * embedding's weight and has no bias; its weight gradient is written first (backward runs from
 * the head down) and the embedding adds its own to it. */
#include "engine/layer.h"

int64_t mp_shape_numel(const int64_t shape[3]) { return shape[0] * shape[1] * shape[2]; }

/* t as the layer's 2-D operand: (rows, features) with features the last dimension per token
 * (per_token) or the whole flattened sample. */
static mp_tensor rows_view(const mp_layer *l, const mp_tensor *t)
{
    int64_t row = l->per_token ? t->shape[t->ndim - 1] : mp_tensor_row(t);
    int64_t shape[2] = {mp_tensor_numel(t) / (row ? row : 1), row};
    return mp_tensor_view(t->data, t->dtype, 2, shape);
}

static const mp_tensor *weight(const mp_layer *l) { return l->tie ? &l->tie->w[0] : &l->w[0]; }

static mp_status linear_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    mp_tensor x2 = rows_view(l, x), y2 = rows_view(l, y);
    if (l->tie)
        return l->ops->gemm(false, true, 1.0, &x2, weight(l), 0.0, &y2);
    return l->ops->gemm_bias(false, true, &x2, weight(l), &l->w[1], &y2);
}

static mp_status linear_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                 const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    mp_tensor x2 = rows_view(l, x), dy2 = rows_view(l, dy), dx2;
    if (dx)
        dx2 = rows_view(l, dx);
    return l->ops->linear_backward(&x2, weight(l), &dy2, l->tie ? &l->tie->dw[0] : &l->dw[0],
                                   l->tie ? NULL : &l->dw[1], dx ? &dx2 : NULL);
}

static const mp_layer_class mp_linear_class = {
    .type = "linear", .forward = linear_forward, .backward = linear_backward,
    .out_dtype = mp_out_compute, .cast_input = true, .skips_y = true};

mp_status mp_layer_linear_init(mp_layer *l, const mp_ops *ops, const char *name,
                               const int64_t in_shape[3], int64_t out, bool per_token)
{
    if (out < 1)
        return mp_fail(MP_EUSAGE, "layer %s: linear needs out >= 1 (got %lld)", name,
                       (long long)out);
    mp_layer_begin(l, &mp_linear_class, ops, name, in_shape, out);
    l->per_token = per_token;
    if (!per_token)
        l->out_shape[0] = l->out_shape[1] = 1;
    int64_t in = per_token ? in_shape[2] : mp_shape_numel(in_shape);
    l->nparams = 2;
    l->param_suffix[0] = "weight";
    l->param_ndim[0] = 2;
    l->param_shape[0][0] = out;
    l->param_shape[0][1] = in;
    l->param_suffix[1] = "bias";
    l->param_ndim[1] = 1;
    l->param_shape[1][0] = out;
    l->fan_in = (double)in;
    return MP_OK;
}

mp_status mp_layer_linear_tie(mp_layer *l, mp_layer *embedding)
{
    const int64_t *ws = embedding->param_shape[0];
    if (!l->per_token || ws[0] != l->param_shape[0][0] || ws[1] != l->param_shape[0][1])
        return mp_fail(MP_EUSAGE, "layer %s: a tied head needs per-token features of the "
                       "embedding's width %lld and %lld outputs (got %lld -> %lld)", l->name,
                       (long long)ws[1], (long long)ws[0], (long long)l->param_shape[0][1],
                       (long long)l->param_shape[0][0]);
    l->tie = embedding;
    l->nparams = 0;
    embedding->shared = true;
    return MP_OK;
}

mp_status mp_layer_linear_make(mp_layer *l, const mp_ops *ops, const char *name,
                               const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_linear_init(l, ops, name, in_shape, s->out, s->per_token || s->tie);
}
