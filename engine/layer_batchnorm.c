/* The batch normalisation layer (PyTorch's BatchNorm2d in NHWC, or BatchNorm1d on (1, 1, C)
 * features): per channel, y = (x - mean) / sqrt(var + eps) * weight + bias. Training uses the
 * batch statistics over (N, H, W), saves them for backward and updates the running statistics
 * with `momentum` (unbiased variance); evaluation uses the running statistics. Parameters
 * weight (C) = 1 and bias (C) = 0 are normalisation parameters (param_norm); the buffers are
 * running_mean (C) = 0 and running_var (C) = 1 (persistent) and save_mean, save_invstd (C)
 * (scratch between forward and backward), all bound by the owner. */
#include "engine/layer.h"

enum { BN_RUNNING_MEAN, BN_RUNNING_VAR, BN_SAVE_MEAN, BN_SAVE_INVSTD, BN_NBUFFERS };

/* t seen as (n, H, W, C), n = t's batch; MP_EINTERNAL when t's per-sample size differs. */
static mp_status image_view(const mp_layer *l, const mp_tensor *t, const char *what,
                            mp_tensor *v)
{
    if (t->ndim < 1 || mp_tensor_row(t) != mp_shape_numel(l->in_shape))
        return mp_fail(MP_EINTERNAL, "layer %s: batchnorm %s has %lld elements per sample, "
                       "want %lld", l->name, what, (long long)(t->ndim < 1 ? 0 : mp_tensor_row(t)),
                       (long long)mp_shape_numel(l->in_shape));
    int64_t s[4] = {t->shape[0], l->in_shape[0], l->in_shape[1], l->in_shape[2]};
    *v = mp_tensor_view(t->data, t->dtype, 4, s);
    return MP_OK;
}

/* Training normalises over a channel's values of the batch: one value has no variance
 * (PyTorch refuses it too). */
static mp_status batchnorm_check_batch(const mp_layer *l, int64_t n, bool train)
{
    if (train && n * l->in_shape[0] * l->in_shape[1] < 2)
        return mp_fail(MP_EUSAGE, "layer %s: batchnorm in training needs more than one value "
                       "per channel (batch %lld of %lld x %lld)", l->name, (long long)n,
                       (long long)l->in_shape[0], (long long)l->in_shape[1]);
    return MP_OK;
}

static mp_status batchnorm_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    mp_tensor x4, y4;
    MP_TRY(image_view(l, x, "input", &x4));
    MP_TRY(image_view(l, y, "output", &y4));
    MP_TRY(batchnorm_check_batch(l, x4.shape[0], train));
    mp_bn_args a = l->bn;
    if (l->recomputing) /* the first forward updated them; momentum 0 leaves them exact */
        a.momentum = 0.0;
    return l->ops->batchnorm_forward(&a, train, &x4, &l->w[0], &l->w[1],
                                     &l->buf[BN_RUNNING_MEAN], &l->buf[BN_RUNNING_VAR],
                                     &l->buf[BN_SAVE_MEAN], &l->buf[BN_SAVE_INVSTD], &y4);
}

/* Training-mode gradients from the statistics the last training forward saved (and, fused
 * with a ReLU, its output y). */
static mp_status batchnorm_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                    const mp_tensor *dy, mp_tensor *dx)
{
    mp_tensor x4, y4, dy4, dx4;
    MP_TRY(image_view(l, x, "input", &x4));
    if (l->bn.relu)
        MP_TRY(image_view(l, y, "output", &y4));
    MP_TRY(image_view(l, dy, "output gradient", &dy4));
    if (dx)
        MP_TRY(image_view(l, dx, "input gradient", &dx4));
    return l->ops->batchnorm_backward(&l->bn, &x4, l->bn.relu ? &y4 : NULL, &dy4, &l->w[0],
                                      &l->buf[BN_SAVE_MEAN], &l->buf[BN_SAVE_INVSTD],
                                      dx ? &dx4 : NULL, &l->dw[0], &l->dw[1]);
}

static const mp_layer_class mp_batchnorm_class = {
    .type = "batchnorm",
    .forward = batchnorm_forward,
    .backward = batchnorm_backward,
    .inplace_backward = true,
    .skips_y = true,
    .check_batch = batchnorm_check_batch};

/* BatchNorm + ReLU: its backward reads y (the ReLU's mask). */
static const mp_layer_class mp_batchnorm_relu_class = {
    .type = "batchnorm_relu",
    .forward = batchnorm_forward,
    .backward = batchnorm_backward,
    .inplace_backward = true,
    .check_batch = batchnorm_check_batch};

bool mp_layer_batchnorm_fuse_relu(mp_layer *l)
{
    if (l->cls != &mp_batchnorm_class)
        return false;
    l->cls = &mp_batchnorm_relu_class;
    l->bn.relu = true;
    return true;
}

mp_status mp_layer_batchnorm_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], double eps, double momentum)
{
    if (in_shape[0] < 1 || in_shape[1] < 1 || in_shape[2] < 1)
        return mp_fail(MP_EUSAGE, "layer %s: batchnorm needs a non-empty (H, W, C) input (got "
                       "%lld x %lld x %lld)", name, (long long)in_shape[0],
                       (long long)in_shape[1], (long long)in_shape[2]);
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
        return mp_fail(MP_EUSAGE, "layer %s: batchnorm needs eps > 0 and momentum in [0, 1] "
                       "(got eps %g, momentum %g)", name, eps, momentum);
    mp_layer_begin(l, &mp_batchnorm_class, ops, name, in_shape, in_shape[2]);
    int64_t c = in_shape[2];
    static const char *const params[2] = {"weight", "bias"};
    l->nparams = 2;
    for (int j = 0; j < 2; j++) {
        l->param_suffix[j] = params[j];
        l->param_ndim[j] = 1;
        l->param_shape[j][0] = c;
        l->param_norm[j] = true;
    }
    l->param_init[0] = MP_INIT_ONES;
    l->param_init[1] = MP_INIT_ZEROS;
    static const char *const buffers[BN_NBUFFERS] = {"running_mean", "running_var", "save_mean",
                                                     "save_invstd"};
    l->nbuffers = BN_NBUFFERS;
    for (int j = 0; j < BN_NBUFFERS; j++) {
        l->buffer_suffix[j] = buffers[j];
        l->buffer_numel[j] = c;
        l->buffer_persistent[j] = j == BN_RUNNING_MEAN || j == BN_RUNNING_VAR;
        l->buffer_init[j] = j == BN_RUNNING_VAR ? 1.0 : 0.0;
    }
    l->bn.eps = eps;
    l->bn.momentum = momentum;
    return MP_OK;
}

mp_status mp_layer_batchnorm_make(mp_layer *l, const mp_ops *ops, const char *name,
                                  const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_batchnorm_init(l, ops, name, in_shape, s->eps > 0 ? s->eps : 1e-5,
                                   s->momentum);
}
