/* GELU's arithmetic, tanh form (PyTorch's approximate='tanh'), written once for every backend
 * (MP_HD) in the accumulator type ACC (float for FP32 and half data, double for FP64: suffix
 * f32 / f64), in PyTorch's order of operations:
 *   y = 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi);
 *   y' = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 0.044715 x^2), t = tanh(k (x + 0.044715 x^3)).
 * The CPU and the GPU agree up to their tanh's last bits (libm's and CUDA's differ by an ulp or
 * two); everything else is the same sequence of correctly rounded operations (no FMA
 * contraction in either build). */
#ifndef MP_GELU_RULE_H
#define MP_GELU_RULE_H

#include <math.h>

#include "engine/hd.h"

#define MP_GELU_K 0.7978845608028654   /* sqrt(2 / pi) */
#define MP_GELU_C 0.044715

/* Defines mp_gelu_SFX(x) (the forward value) and mp_gelu_grad_SFX(x, dy) (dy * y'(x)) for
 * accumulator type ACC with its tanh TANH. */
#define MP_GELU_RULES(ACC, SFX, TANH)                                                        \
    MP_HD static inline ACC mp_gelu_##SFX(ACC x)                                            \
    {                                                                                       \
        ACC inner = (ACC)MP_GELU_K * (x + (ACC)MP_GELU_C * (x * x * x));                     \
        return (ACC)0.5 * x * ((ACC)1 + TANH(inner));                                       \
    }                                                                                       \
    MP_HD static inline ACC mp_gelu_grad_##SFX(ACC x, ACC dy)                               \
    {                                                                                       \
        ACC x2 = x * x;                                                                     \
        ACC t = TANH((ACC)MP_GELU_K * (x + (ACC)MP_GELU_C * (x2 * x)));                      \
        ACC right = (ACC)1 + t;                                                             \
        ACC dinner = (ACC)MP_GELU_K * ((ACC)1 + (ACC)3 * (ACC)MP_GELU_C * x2);               \
        ACC dright = ((ACC)1 - t * t) * dinner;                                             \
        return dy * ((ACC)0.5 * right + (ACC)0.5 * x * dright);                             \
    }

MP_GELU_RULES(float, f32, tanhf)
MP_GELU_RULES(double, f64, tanh)

#endif
