/* The self-attention layer: the core between the qkv projection and the output projection of a
 * transformer block, y (N, H, W, D) from qkv (N, H, W, 3D) over the H W tokens of each sample,
 * with its probabilities (heads, T, T) per sample kept for backward (mp_layer.save). Dropout on
 * the probabilities draws its mask, like the dropout layer's, from (seed, step 2^32 + i). */
#include "engine/attn_geom.h"
#include "engine/layer.h"

#define MP_ATTN_STEP_STRIDE ((uint64_t)1 << 32)

static mp_attn_desc desc(const mp_layer *l, bool train)
{
    mp_attn_desc d = l->attn;
    d.dropout_p = train ? l->attn.dropout_p : 0.0;
    d.seed = l->seed;
    d.offset = (uint64_t)l->step * MP_ATTN_STEP_STRIDE;
    return d;
}

static mp_tensor probs(const mp_layer *l, int64_t n) { return mp_tensor_batch(&l->save, n); }

static mp_status attn_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    mp_attn_desc d = desc(l, train);
    mp_tensor p = probs(l, x->shape[0]);
    if ((uint64_t)mp_tensor_numel(&p) > MP_ATTN_STEP_STRIDE)
        return mp_fail(MP_EINTERNAL, "layer %s: attention over %lld probabilities exceeds the "
                       "2^32 dropout counters of a step", l->name, (long long)mp_tensor_numel(&p));
    return l->ops->attention_forward(&d, x, &p, y);
}

/* Backward runs only after a training forward: its dropout mask is the training one. */
static mp_status attn_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    if (!dx)
        return MP_OK;
    mp_attn_desc d = desc(l, true);
    mp_tensor p = probs(l, x->shape[0]);
    return l->ops->attention_backward(&d, x, &p, dy, dx);
}

static const mp_layer_class mp_attention_class = {
    .type = "attention", .forward = attn_forward, .backward = attn_backward};

mp_status mp_layer_attention_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], int heads, bool causal, double p)
{
    int64_t width = in_shape[2] / 3, tokens = in_shape[0] * in_shape[1];
    if (!mp_attn_fits(heads, tokens, in_shape[2]))
        return mp_fail(MP_EUSAGE, "layer %s: attention needs 3 D features per token (q, k, v), "
                       "D a multiple of the %d heads (got %lld)", name, heads,
                       (long long)in_shape[2]);
    if (!mp_attn_dropout_ok(p))
        return mp_fail(MP_EUSAGE, "layer %s: attention dropout must be in [0, 1) (got %g)",
                       name, p);
    mp_layer_begin(l, &mp_attention_class, ops, name, in_shape, width);
    l->save_shape[0] = heads;
    l->save_shape[1] = tokens;
    l->save_shape[2] = tokens;
    l->attn = (mp_attn_desc){.heads = heads, .causal = causal, .dropout_p = p};
    return MP_OK;
}

mp_status mp_layer_attention_make(mp_layer *l, const mp_ops *ops, const char *name,
                                  const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_attention_init(l, ops, name, in_shape, (int)s->heads, s->causal, s->p);
}
