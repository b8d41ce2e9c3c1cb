/* The linear layer: y (N, out) = x (N, in) W^T + b, weight (out, in) as in PyTorch.
 * Backward: dW = dy^T x, db = sum_rows dy, dx = dy W. */
#include "engine/layer.h"

#include <stdio.h>
#include <string.h>

int64_t mp_shape_numel(const int64_t shape[3]) { return shape[0] * shape[1] * shape[2]; }

static mp_tensor rows_view(const mp_tensor *t)
{
    int64_t shape[2] = {t->shape[0], mp_tensor_row(t)};
    return mp_tensor_view(t->data, t->dtype, 2, shape);
}

static mp_status linear_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    mp_tensor x2 = rows_view(x), y2 = rows_view(y);
    return l->ops->gemm_bias(false, true, &x2, &l->w[0], &l->w[1], &y2);
}

static mp_status linear_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                 const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    mp_tensor x2 = rows_view(x), dy2 = rows_view(dy);
    MP_TRY(l->ops->gemm(true, false, 1.0, &dy2, &x2, 0.0, &l->dw[0]));
    MP_TRY(l->ops->bias_grad(&dy2, &l->dw[1]));
    if (!dx)
        return MP_OK;
    mp_tensor dx2 = rows_view(dx);
    return l->ops->gemm(false, false, 1.0, &dy2, &l->w[0], 0.0, &dx2);
}

static const mp_layer_class mp_linear_class = {"linear", linear_forward, linear_backward};

mp_status mp_layer_linear_init(mp_layer *l, const mp_ops *ops, const char *name,
                               const int64_t in_shape[3], int64_t out)
{
    if (out < 1)
        return mp_fail(MP_EUSAGE, "layer %s: linear needs out >= 1 (got %lld)", name,
                       (long long)out);
    memset(l, 0, sizeof *l);
    l->cls = &mp_linear_class;
    l->ops = ops;
    snprintf(l->name, sizeof l->name, "%s", name);
    memcpy(l->in_shape, in_shape, sizeof l->in_shape);
    l->out_shape[0] = 1;
    l->out_shape[1] = 1;
    l->out_shape[2] = out;
    int64_t in = mp_shape_numel(in_shape);
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
