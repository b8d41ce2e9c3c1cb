/* The pre-LN transformer block (GPT-2, ViT), a composite layer of two children:
 *   h = x + attention path (ln1, attn.qkv, attn, attn.proj[, drop1]) of x
 *   y = h + MLP path (ln2, mlp.fc, gelu, mlp.proj[, drop2]) of h
 * with per-token linear layers (the MLP 4x wide). The residual stream keeps the block's input
 * dtype; h lives in the block's out_tmp, its gradient in in_tmp. */
#include <stdlib.h>

#include "engine/seq.h"

static mp_status block_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    mp_block *b = l->block;
    mp_seq attn = mp_block_child(b, 0), mlp = mp_block_child(b, 1);
    mp_tensor a, m, h = mp_tensor_batch(&b->out_tmp, x->shape[0]);
    MP_TRY(mp_seq_forward(&attn, x, train, l->step, &a));
    MP_TRY(l->ops->add(x, &a, &h));
    MP_TRY(mp_seq_forward(&mlp, &h, train, l->step, &m));
    return l->ops->add(&h, &m, y);
}

static mp_status block_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                const mp_tensor *dy, mp_tensor *dx)
{
    (void)y;
    mp_block *b = l->block;
    int64_t n = x->shape[0];
    mp_seq attn = mp_block_child(b, 0), mlp = mp_block_child(b, 1);
    mp_tensor h = mp_tensor_batch(&b->out_tmp, n), gh = mp_tensor_batch(&b->in_tmp, n);
    MP_TRY(mp_seq_backward(&mlp, &h, dy, &gh, b->gbuf, NULL));
    MP_TRY(l->ops->add(&gh, dy, &gh));
    MP_TRY(mp_seq_backward(&attn, x, &gh, dx, b->gbuf, NULL));
    return dx ? l->ops->add(dx, &gh, dx) : MP_OK;
}

static const mp_layer_class mp_transformer_class = {
    .type = "transformer", .forward = block_forward, .backward = block_backward, .skips_y = true};

/* Appends a layer to child c set up by init(...), its input the child's last output (or the
 * block's input). */
#define APPEND(c, init, ...)                                                                   \
    do {                                                                                       \
        mp_layer *nl_ = mp_block_append(b, c);                                                 \
        MP_TRY(init(nl_, ops, __VA_ARGS__));                                                   \
        shape = nl_->out_shape;                                                                \
    } while (0)

static mp_status build(mp_block *b, const mp_ops *ops, const int64_t in_shape[3], int heads,
                       bool causal, double p, double eps, bool flash)
{
    int64_t d = in_shape[2];
    const int64_t *shape = in_shape;
    b->nchild = 2;
    b->out_child = -1;
    b->in_tmp_used = true;
    b->mid_tmp = true;
    APPEND(0, mp_layer_layernorm_init, "ln1", shape, eps);
    APPEND(0, mp_layer_linear_init, "attn.qkv", shape, 3 * d, true);
    APPEND(0, mp_layer_attention_init, "attn", shape, heads, causal, p, flash);
    APPEND(0, mp_layer_linear_init, "attn.proj", shape, d, true);
    if (p > 0)
        APPEND(0, mp_layer_dropout_init, "drop1", shape, p);
    shape = in_shape;
    APPEND(1, mp_layer_layernorm_init, "ln2", shape, eps);
    APPEND(1, mp_layer_linear_init, "mlp.fc", shape, 4 * d, true);
    APPEND(1, mp_layer_gelu_init, "gelu", shape);
    APPEND(1, mp_layer_linear_init, "mlp.proj", shape, d, true);
    if (p > 0)
        APPEND(1, mp_layer_dropout_init, "drop2", shape, p);
    return MP_OK;
}

mp_status mp_layer_transformer_init(mp_layer *l, const mp_ops *ops, const char *name,
                                    const int64_t in_shape[3], int heads, bool causal, double p,
                                    double eps, bool flash)
{
    mp_layer_begin(l, &mp_transformer_class, ops, name, in_shape, in_shape[2]);
    l->block = calloc(1, sizeof *l->block);
    if (!l->block)
        return mp_fail(MP_EINTERNAL, "layer %s: out of memory", name);
    mp_status st = build(l->block, ops, in_shape, heads, causal, p, eps, flash);
    if (st != MP_OK) {
        mp_status keep = mp_fail(st, "layer %s: %s", name, mp_error_message());
        free(l->block);
        l->block = NULL;
        return keep;
    }
    return MP_OK;
}

mp_status mp_layer_transformer_make(mp_layer *l, const mp_ops *ops, const char *name,
                                    const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_transformer_init(l, ops, name, in_shape, (int)s->heads, s->causal, s->p,
                                     s->eps > 0 ? s->eps : 1e-5, mp_layer_spec_flash(s));
}
