/* The geometry and element rules of multi-head self-attention (mp_attn_desc, engine/ops.h's
 * attention_forward / attention_backward), written once for every backend: the shape checks,
 * the dropout counter of each probability, and the softmax's exponential (engine/exp_rule.h),
 * so the CPU and the GPU attend over the same positions, drop the same probabilities and
 * exponentiate to the same bits. qkv (N, H, W, 3D) holds N sequences of T = H W tokens, each row
 * [q | k | v] of D columns each; head h reads columns h dh .. (h + 1) dh - 1 of each part,
 * dh = D / heads. */
#ifndef MP_ATTN_GEOM_H
#define MP_ATTN_GEOM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/dtype.h"
#include "engine/exp_rule.h"
#include "engine/hd.h"
#include "engine/ops.h"

typedef struct mp_attn_geom {
    int64_t N, T, D, heads, dh;
} mp_attn_geom;

/* t is 4-D with the given leading dimensions and last dimension `last`. */
static inline bool mp_attn_shaped(const mp_tensor *t, int64_t n, int64_t h, int64_t w,
                                  int64_t last)
{
    return t->ndim == 4 && t->shape[0] == n && t->shape[1] == h && t->shape[2] == w &&
           t->shape[3] == last;
}

/* The rules of attention over `tokens` positions of `features` = 3D columns (q, k, v) each:
 * at least one position, D >= 1 a multiple of heads >= 1. The layer checks a model's shapes with
 * them, the ops each call's. */
static inline bool mp_attn_fits(int64_t heads, int64_t tokens, int64_t features)
{
    return features >= 3 && features % 3 == 0 && tokens >= 1 && heads >= 1 &&
           (features / 3) % heads == 0;
}

/* Whether p is a dropout probability of attention, in [0, 1). */
static inline bool mp_attn_dropout_ok(double p) { return p >= 0 && p < 1; }

/* Fills *g from d and qkv (N, H, W, 3D), and checks out (N, H, W, D) (the forward's output or
 * backward's dout); false when a shape does not match, heads < 1 or does not divide D, D or T
 * is 0, or dropout_p is outside [0, 1). N may be 0 (nothing to do). */
static inline bool mp_attn_geom_of(const mp_attn_desc *d, const mp_tensor *qkv,
                                   const mp_tensor *out, mp_attn_geom *g)
{
    if (qkv->ndim != 4 || !mp_attn_dropout_ok(d->dropout_p) ||
        !mp_attn_fits(d->heads, qkv->shape[1] * qkv->shape[2], qkv->shape[3]))
        return false;
    g->N = qkv->shape[0];
    g->T = qkv->shape[1] * qkv->shape[2];
    g->D = qkv->shape[3] / 3;
    g->heads = d->heads;
    g->dh = g->D / g->heads;
    return mp_attn_shaped(out, g->N, qkv->shape[1], qkv->shape[2], g->D);
}

/* mp_attn_geom_of, and probs (N, heads, T, T). */
static inline bool mp_attn_geometry(const mp_attn_desc *d, const mp_tensor *qkv,
                                    const mp_tensor *probs, const mp_tensor *out,
                                    mp_attn_geom *g)
{
    return mp_attn_geom_of(d, qkv, out, g) && mp_attn_shaped(probs, g->N, g->heads, g->T, g->T);
}

/* The dropout counter of probability (n, h, i, j): offset + ((n heads + h) T + i) T + j, the
 * element's flat index in probs. */
MP_HD static inline uint64_t mp_attn_counter(uint64_t offset, int64_t heads, int64_t T, int64_t n,
                                             int64_t h, int64_t i, int64_t j)
{
    return offset + (uint64_t)(((n * heads + h) * T + i) * T + j);
}

/* The number of positions row i attends to: i + 1 under the causal mask, else T. */
MP_HD static inline int64_t mp_attn_span(bool causal, int64_t T, int64_t i)
{
    return causal ? i + 1 : T;
}

#endif
