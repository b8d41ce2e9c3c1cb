/* GELU's arithmetic, tanh form (PyTorch's approximate='tanh'), written once for every backend
 * (MP_HD) in the accumulator type ACC (float for FP32 and half data, double for FP64: suffix
 * f32 / f64):
 *   y = 0.5 x (1 + tanh(u)), u = k (x + 0.044715 x^3), k = sqrt(2 / pi);
 *   y' = 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u), u' = k (1 + 3 0.044715 x^2).
 * In float it takes the equal form 0.5 (1 + tanh u) = s = 1 / (1 + e^(-2u)), the logistic
 * function: with E = e^(-2|u|) (engine/exp_rule.h's mp_exp_f32, in (0, 1]), s = 1 / (1 + E) for
 * u >= 0 and E / (1 + E) below, s (1 - s) = E / (1 + E)^2 on both sides, so
 *   y = x s,  y' = s + 2 x (u' E / (1 + E)^2),
 * with no cancellation (the tanh form's 1 + t loses every digit for large negative x) and one
 * exponential and one division an element, about 30 operations against the tanh form's 50. Every
 * step is a correctly rounded operation, so the CPU and the GPU (both built without FMA
 * contraction) compute the same bits; the CPU's loops have no call into libm and vectorise.
 * GELU(-inf) is NaN as in the tanh form (-inf times 0), GELU(inf) inf, a NaN stays NaN; the
 * gradient's limits hold to +-inf (1 above, 0 below). In double
 * it is the tanh form with libm's (CPU) and CUDA's tanh, which may differ in the last bits. */
#ifndef MP_GELU_RULE_H
#define MP_GELU_RULE_H

#include <math.h>

#include "engine/exp_rule.h"
#include "engine/hd.h"

#define MP_GELU_K 0.7978845608028654   /* sqrt(2 / pi) */
#define MP_GELU_C 0.044715

/* GELU's u = k (x + 0.044715 x^3) in float, in PyTorch's order of operations. */
MP_HD_INLINE static inline float mp_gelu_u_f32(float x)
{
    return (float)MP_GELU_K * (x + (float)MP_GELU_C * (x * x * x));
}

/* y = GELU(x) in float: x s(2u), the logistic form above. */
MP_HD_INLINE static inline float mp_gelu_f32(float x)
{
    float u = mp_gelu_u_f32(x);
    float e = mp_exp_f32(-2.0f * fabsf(u));
    return x * ((u < 0.0f ? e : 1.0f) / (1.0f + e));
}

/* dy y'(x) in float, the logistic form above. */
MP_HD_INLINE static inline float mp_gelu_grad_f32(float x, float dy)
{
    float u = mp_gelu_u_f32(x);
    float du = (float)MP_GELU_K * (1.0f + 3.0f * (float)MP_GELU_C * (x * x));
    float e = mp_exp_f32(-2.0f * fabsf(u));
    float inv = 1.0f / (1.0f + e);
    float s = (u < 0.0f ? e : 1.0f) * inv;
    /* E = 0 already where x u' can overflow (|x| > 14 or so); at |x| >= 2^64, where x^2 and
     * so u' are inf, and at +-inf, the term is taken as that limit, 0, not inf times 0 */
    float term = e > 0.0f ? 2.0f * x * (du * (e * inv * inv)) : 0.0f;
    return dy * (s + term);
}

/* GELU in double, the tanh form: mp_gelu_f64(x) and mp_gelu_grad_f64(x, dy) = dy y'(x). */
MP_HD_INLINE static inline double mp_gelu_f64(double x)
{
    double inner = MP_GELU_K * (x + MP_GELU_C * (x * x * x));
    return 0.5 * x * (1.0 + tanh(inner));
}

MP_HD_INLINE static inline double mp_gelu_grad_f64(double x, double dy)
{
    double x2 = x * x;
    double t = tanh(MP_GELU_K * (x + MP_GELU_C * (x2 * x)));
    double dinner = MP_GELU_K * (1.0 + 3.0 * MP_GELU_C * x2);
    return dy * (0.5 * (1.0 + t) + 0.5 * x * ((1.0 - t * t) * dinner));
}

#endif
