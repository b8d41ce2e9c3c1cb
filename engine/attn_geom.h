/* The geometry and element rules of multi-head self-attention (mp_attn_desc, engine/ops.h's
 * attention_forward / attention_backward), written once for every backend: the shape checks,
 * the dropout counter of each probability, and the softmax's exponential (MP_HD), so the CPU and
 * the GPU attend over the same positions, drop the same probabilities and exponentiate to the
 * same bits. qkv (N, H, W, 3D) holds N sequences of T = H W tokens, each row [q | k | v] of D
 * columns each; head h reads columns h dh .. (h + 1) dh - 1 of each part, dh = D / heads. */
#ifndef MP_ATTN_GEOM_H
#define MP_ATTN_GEOM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/dtype.h"
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

/* e^x in FP32 for the softmax's x = s - max <= 0, within 1 ulp of the exact value, with only
 * additions, multiplications and bit moves, so that every backend computes the same bits (no
 * FMA: the builds forbid contraction) and the CPU's loops over a row vectorise (the selects are
 * on integers: a float comparison under -ftrapping-math keeps GCC from vectorising): x = n ln2 + r
 * with |r| <= ln2 / 2 (Cody-Waite; n rounded by adding 1.5 * 2^23, with no float-to-int
 * conversion), e^r by Cephes' degree-7 polynomial, times 2^n made from n's bits. Below -87
 * (e^x < 2^-125), -inf included, it returns 0; a NaN stays NaN; x > 88 is outside its domain. */
MP_HD static inline float mp_attn_exp_f32(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const uint32_t lim = 0xc2ae0000u; /* -87.0f; negative floats order as their bits */
    uint32_t xb = mp_f32_bits(x);
    uint32_t low = 0u - (uint32_t)(xb > lim && xb <= 0xff800000u); /* x < -87, not NaN */
    float xc = mp_bits_f32((xb & ~low) | (lim & low));
    float t = xc * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = xc - n * 0.693359375f; /* ln2's leading bits: n * this is exact */
    r = r - n * -2.12194440e-4f;     /* the rest of ln2 */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    uint32_t e = (mp_f32_bits(t) - mp_f32_bits(magic) + 127u) << 23; /* 2^n, n in [-126, 127] */
    return mp_bits_f32(mp_f32_bits(p * mp_bits_f32(e)) & ~low);
}

/* e^x in FP64 (the reference's FP64 path: the C library's exp). */
MP_HD static inline double mp_attn_exp_f64(double x) { return exp(x); }

#endif
