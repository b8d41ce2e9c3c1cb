/* GELU's arithmetic, tanh form (PyTorch's approximate='tanh'), written once for every backend
 * (MP_HD) in the accumulator type ACC (float for FP32 and half data, double for FP64: suffix
 * f32 / f64), in PyTorch's order of operations:
 *   y = 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi);
 *   y' = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 0.044715 x^2), t = tanh(k (x + 0.044715 x^3)).
 * In float the tanh is our own mp_tanh_f32 below, a sequence of correctly rounded operations,
 * so the CPU and the GPU (both built without FMA contraction) should give the same bits (not
 * yet checked on a GPU: the op table's GELU cases will show it), and the CPU
 * loop needs no call into libm (whose tanhf took most of a GELU); in double it is libm's (CPU)
 * and CUDA's tanh, which may differ in the last bits. */
#ifndef MP_GELU_RULE_H
#define MP_GELU_RULE_H

#include <math.h>

#include "engine/half.h"
#include "engine/hd.h"

#define MP_GELU_K 0.7978845608028654   /* sqrt(2 / pi) */
#define MP_GELU_C 0.044715

/* tanh in float, within 2 ulp of the exact value (tests/unit/test_gelu_rule.c sweeps it), with
 * no branch (both halves are computed and one is chosen, so a loop of them vectorizes):
 * |x| < 0.625: |x| + |x|^3 P(x^2), P a least-squares fit of (tanh a - a) / a^3 (relative error
 * 2e-10); else 1 - 2 / (e^(2|x|) + 1), with e^y as 2^n e^r, n = round(y / ln 2) (found by adding
 * 1.5 * 2^23, which rounds to an integer, so no conversion to int stands in the vectoriser's
 * way), r = y - n ln 2 in two parts (Cody and Waite: n ln2_hi is exact) and e^r by its Taylor
 * polynomial of degree 7 (|r| <= ln 2 / 2: relative error 5e-9); |x| is clamped to 9.1, where
 * tanh rounds to 1. The sign is x's; NaN stays NaN. */
MP_HD_INLINE static inline float mp_tanh_f32(float x)
{
    float a = fabsf(x), s = a * a;
    float p = 0.0021535908f;
    p = p * s - 0.0081899462f;
    p = p * s + 0.021706252f;
    p = p * s - 0.053947888f;
    p = p * s + 0.13333216f;
    p = p * s - 0.33333331f;
    float small = a + a * s * p;
    float y = 2.0f * (a < 9.1f ? a : 9.1f);
    float z = y * 1.44269504f + 12582912.0f; /* 1.5 * 2^23: z's low bits hold n = rint(y / ln 2) */
    float n = z - 12582912.0f;
    uint32_t k = mp_f32_bits(z) - 0x4B400000u;
    float r = (y - n * 0.693145751953125f) - n * 1.428606765330187e-6f;
    float e = 1.0f / 5040.0f;
    e = e * r + 1.0f / 720.0f;
    e = e * r + 1.0f / 120.0f;
    e = e * r + 1.0f / 24.0f;
    e = e * r + 1.0f / 6.0f;
    e = e * r + 0.5f;
    e = e * r + 1.0f;
    e = e * r + 1.0f;
    e = e * mp_bits_f32((k + 127u) << 23);
    float large = 1.0f - 2.0f / (e + 1.0f);
    float t = a < 0.625f ? small : large;
    return x != x ? x : copysignf(t, x);
}

/* Defines mp_gelu_SFX(x) (the forward value) and mp_gelu_grad_SFX(x, dy) (dy * y'(x)) for
 * accumulator type ACC with its tanh TANH. */
#define MP_GELU_RULES(ACC, SFX, TANH)                                                        \
    MP_HD_INLINE static inline ACC mp_gelu_##SFX(ACC x)                                     \
    {                                                                                       \
        ACC inner = (ACC)MP_GELU_K * (x + (ACC)MP_GELU_C * (x * x * x));                     \
        return (ACC)0.5 * x * ((ACC)1 + TANH(inner));                                       \
    }                                                                                       \
    MP_HD_INLINE static inline ACC mp_gelu_grad_##SFX(ACC x, ACC dy)                        \
    {                                                                                       \
        ACC x2 = x * x;                                                                     \
        ACC t = TANH((ACC)MP_GELU_K * (x + (ACC)MP_GELU_C * (x2 * x)));                      \
        ACC right = (ACC)1 + t;                                                             \
        ACC dinner = (ACC)MP_GELU_K * ((ACC)1 + (ACC)3 * (ACC)MP_GELU_C * x2);               \
        ACC dright = ((ACC)1 - t * t) * dinner;                                             \
        return dy * ((ACC)0.5 * right + (ACC)0.5 * x * dright);                             \
    }

MP_GELU_RULES(float, f32, mp_tanh_f32)
MP_GELU_RULES(double, f64, tanh)

#endif
