/* The self-attention layer: the core between the qkv projection and the output projection of a
 * transformer block, y (N, H, W, D) from qkv (N, H, W, 3D) over the H W tokens of each sample.
 * Tiled (attn_flash, the default): attention_flash_forward keeps each row's maximum and sum
 * (heads, T, 2) in FP32 per sample (mp_layer.save) and backward recomputes the probabilities
 * from them and y; else attention_forward keeps the probabilities (heads, T, T) per sample.
 * Dropout on the probabilities draws its mask, like the dropout layer's, from
 * (seed, step 2^32 + i): the same mask on both paths; step is l->step, or the one the ops read
 * at l->mask_step when it is set (engine/dropout_mask.h's mp_mask_offset). */
#include "engine/attn_flash.h"
#include "engine/dropout_mask.h"
#include "engine/layer.h"

static mp_attn_desc desc(const mp_layer *l, bool train)
{
    mp_attn_desc d = l->attn;
    d.dropout_p = train ? l->attn.dropout_p : 0.0;
    d.seed = l->seed;
    d.offset = l->mask_step ? 0 : (uint64_t)l->step * MP_MASK_STEP_STRIDE;
    d.step = l->mask_step;
    return d;
}

static mp_tensor saved(const mp_layer *l, int64_t n) { return mp_tensor_batch(&l->save, n); }

/* Dropout draws one counter of a step's 2^32 per probability: N heads T^2 of them. */
static mp_status attn_check_batch(const mp_layer *l, int64_t n, bool train)
{
    int64_t T = l->in_shape[0] * l->in_shape[1], probs = n * l->attn.heads * T * T;
    if (train && l->attn.dropout_p > 0 && (uint64_t)probs > MP_MASK_STEP_STRIDE)
        return mp_fail(MP_EUSAGE, "layer %s: attention dropout over a batch of %lld (%lld "
                       "heads, %lld tokens) draws %lld counters, more than the 2^32 of a step: "
                       "a smaller batch or no dropout", l->name, (long long)n,
                       (long long)l->attn.heads, (long long)T, (long long)probs);
    return MP_OK;
}

static mp_status attn_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    mp_attn_desc d = desc(l, train);
    mp_tensor s = saved(l, x->shape[0]);
    MP_TRY(attn_check_batch(l, x->shape[0], train));
    if (l->attn_flash)
        return l->ops->attention_flash_forward(&d, x, &s, y);
    return l->ops->attention_forward(&d, x, &s, y);
}

/* Backward runs only after a training forward: its dropout mask is the training one, and y and
 * the saved tensor are that forward's. */
static mp_status attn_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx)
{
    if (!dx)
        return MP_OK;
    mp_attn_desc d = desc(l, true);
    mp_tensor s = saved(l, x->shape[0]);
    if (l->attn_flash)
        return l->ops->attention_flash_backward(&d, x, y, &s, dy, dx);
    return l->ops->attention_backward(&d, x, &s, dy, dx);
}

static const mp_layer_class mp_attention_class = {
    .type = "attention", .forward = attn_forward, .backward = attn_backward,
    .check_batch = attn_check_batch};

mp_status mp_layer_attention_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], int heads, bool causal, double p,
                                  bool flash)
{
    int64_t width = in_shape[2] / 3, tokens = in_shape[0] * in_shape[1];
    if (!mp_attn_fits(heads, tokens, in_shape[2]))
        return mp_fail(MP_EUSAGE, "layer %s: attention needs 3 D features per token (q, k, v), "
                       "D a multiple of the %d heads (got %lld)", name, heads,
                       (long long)in_shape[2]);
    if (!mp_attn_dropout_ok(p))
        return mp_fail(MP_EUSAGE, "layer %s: attention dropout must be in [0, 1) (got %g)",
                       name, p);
    if (flash && !mp_attn_flash_fits(width / heads))
        return mp_fail(MP_EUSAGE, "layer %s: heads of %lld columns are wider than the %d that "
                       "attention = \"flash\" takes: use more heads or attention = \"matrix\"",
                       name, (long long)(width / heads), MP_ATTN_FLASH_MAX_DH);
    mp_layer_begin(l, &mp_attention_class, ops, name, in_shape, width);
    l->save_shape[0] = heads;
    l->save_shape[1] = tokens;
    l->save_shape[2] = flash ? 2 : tokens;
    l->save_fp32 = flash;
    l->attn = (mp_attn_desc){.heads = heads, .causal = causal, .dropout_p = p};
    l->attn_flash = flash;
    return MP_OK;
}

mp_status mp_layer_attention_make(mp_layer *l, const mp_ops *ops, const char *name,
                                  const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_attention_init(l, ops, name, in_shape, (int)s->heads, s->causal, s->p,
                                   mp_layer_spec_flash(s));
}
