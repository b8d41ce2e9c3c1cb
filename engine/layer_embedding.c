/* Embedding layers: the token embedding y (N, H, W, D) = table[ids] over ids (N, H, W, 1), and
 * the learned position embedding y = x + P, P (H W, D) the same for every sample. Both output
 * the policy's weights dtype (the transformer's residual stream) and draw their initial values
 * with a standard deviation of 0.02 (U(-0.02 sqrt(3), 0.02 sqrt(3))). */
#include "engine/layer.h"

/* fan_in giving the uniform bound 1 / sqrt(fan_in) = 0.02 sqrt(3). */
#define MP_EMBED_FAN_IN (1.0 / (3.0 * 0.02 * 0.02))

static mp_status embed_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    return l->ops->embedding_forward(x, &l->w[0], y);
}

static mp_status embed_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    if (dx)
        return mp_fail(MP_EINTERNAL, "layer %s: token ids have no gradient (an embedding must "
                       "be the first layer)", l->name);
    return l->ops->embedding_backward(x, dy, l->shared, &l->dw[0]);
}

static const mp_layer_class mp_embedding_class = {
    .type = "embedding", .forward = embed_forward, .backward = embed_backward,
    .out_dtype = mp_out_weights, .skips_y = true};

/* P as one row of H W D elements, for bias_add and bias_grad over the batch. */
static mp_tensor flat(const mp_tensor *p)
{
    int64_t n = mp_tensor_numel(p);
    return mp_tensor_view(p->data, p->dtype, 1, &n);
}

static mp_status pos_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    (void)train;
    mp_tensor p = flat(&l->w[0]);
    MP_TRY(l->ops->convert(x, y));
    return l->ops->bias_add(y, &p);
}

static mp_status pos_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                              const mp_tensor *dy, mp_tensor *dx)
{
    (void)x;
    (void)y;
    mp_tensor dp = flat(&l->dw[0]);
    MP_TRY(l->ops->bias_grad(dy, &dp));
    return dx ? l->ops->convert(dy, dx) : MP_OK;
}

static const mp_layer_class mp_posembed_class = {
    .type = "posembed", .forward = pos_forward, .backward = pos_backward,
    .out_dtype = mp_out_weights, .skips_x = true, .skips_y = true};

static void setup(mp_layer *l, const mp_ops *ops, const mp_layer_class *cls, const char *name,
                  const int64_t in_shape[3], int64_t rows, int64_t width)
{
    mp_layer_begin(l, cls, ops, name, in_shape, width);
    l->nparams = 1;
    l->param_suffix[0] = "weight";
    l->param_ndim[0] = 2;
    l->param_shape[0][0] = rows;
    l->param_shape[0][1] = width;
    l->param_init[0] = MP_INIT_UNIFORM;
    l->fan_in = MP_EMBED_FAN_IN;
}

mp_status mp_layer_embedding_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], int64_t vocab, int64_t width)
{
    if (in_shape[2] != 1 || vocab < 1 || width < 1)
        return mp_fail(MP_EUSAGE, "layer %s: an embedding needs one token id per position, a "
                       "vocabulary >= 1 and a width >= 1 (got %lld ids per position, vocabulary "
                       "%lld, width %lld)", name, (long long)in_shape[2], (long long)vocab,
                       (long long)width);
    setup(l, ops, &mp_embedding_class, name, in_shape, vocab, width);
    return MP_OK;
}

mp_status mp_layer_posembed_init(mp_layer *l, const mp_ops *ops, const char *name,
                                 const int64_t in_shape[3])
{
    if (mp_shape_numel(in_shape) < 1)
        return mp_fail(MP_EUSAGE, "layer %s: a position embedding needs a non-empty input",
                       name);
    setup(l, ops, &mp_posembed_class, name, in_shape, in_shape[0] * in_shape[1], in_shape[2]);
    return MP_OK;
}

mp_status mp_layer_embedding_make(mp_layer *l, const mp_ops *ops, const char *name,
                                  const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_embedding_init(l, ops, name, in_shape, s->vocab, s->out);
}

mp_status mp_layer_posembed_make(mp_layer *l, const mp_ops *ops, const char *name,
                                 const mp_layer_spec *s, const int64_t in_shape[3])
{
    (void)s;
    return mp_layer_posembed_init(l, ops, name, in_shape);
}
