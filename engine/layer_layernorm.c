/* The LayerNorm layer over the last dimension (the width of each token): weight (C) = 1,
 * bias (C) = 0, normalisation parameters (kept in FP32 when amp.keep_norm_fp32). Statistics are
 * FP32 whatever the storage (the op's rule); at O1 the output is FP32 too, as autocast runs
 * layer_norm in FP32. */
#include "engine/layer.h"

static mp_status ln_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    return l->ops->layernorm_forward(l->bn.eps, x, &l->w[0], &l->w[1], y);
}

static mp_status ln_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                             const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    return l->ops->layernorm_backward(l->bn.eps, x, dy, &l->w[0], dx, &l->dw[0], &l->dw[1]);
}

static mp_dtype ln_out(const mp_layer *l, const mp_amp_policy *a, mp_dtype in)
{
    (void)l;
    return a->level == MP_O1 ? MP_F32 : in;
}

static const mp_layer_class mp_layernorm_class = {
    .type = "layernorm", .forward = ln_forward, .backward = ln_backward, .out_dtype = ln_out,
    .skips_y = true};

mp_status mp_layer_layernorm_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], double eps)
{
    if (!(eps > 0))
        return mp_fail(MP_EUSAGE, "layer %s: layernorm eps must be > 0 (got %g)", name, eps);
    mp_layer_begin(l, &mp_layernorm_class, ops, name, in_shape, in_shape[2]);
    l->bn.eps = eps;
    l->nparams = 2;
    for (int j = 0; j < 2; j++) {
        l->param_suffix[j] = j == 0 ? "weight" : "bias";
        l->param_ndim[j] = 1;
        l->param_shape[j][0] = in_shape[2];
        l->param_init[j] = j == 0 ? MP_INIT_ONES : MP_INIT_ZEROS;
        l->param_norm[j] = true;
    }
    return MP_OK;
}

mp_status mp_layer_layernorm_make(mp_layer *l, const mp_ops *ops, const char *name,
                                  const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_layernorm_init(l, ops, name, in_shape, s->eps > 0 ? s->eps : 1e-5);
}
