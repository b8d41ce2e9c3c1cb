/* The unscale-and-check's arithmetic (the amp_check and grad_stats ops), written once for every
 * backend (MP_HD): each gradient element g, as stored, is unscaled as v = g * m in the
 * accumulator type (FP32; FP64 for FP64 gradients) with m = mult / loss scale rounded to it;
 * the element is non-finite when v is inf or NaN; the sum of squares adds v * v in FP64; the
 * fill is the largest |g| (NaN ignored) as a fraction of the half type's largest finite value.
 * How elements are split among threads and partial results combined is the backend's own (the
 * CPU in 8 interleaved partial sums added pairwise, engine/backend_cpu/optim.c; the GPU in a
 * tree), so sumsq may differ in its last bits between backends while every flag and the fill
 * agree exactly. */
#ifndef MP_CHECK_RULE_H
#define MP_CHECK_RULE_H

#include <math.h>

#include "engine/amp_state.h"
#include "engine/hd.h"

/* The multiplier of a pass: mult / the loss scale read from st (amp_check), or mult itself
 * (st NULL: grad_stats, whose caller passes the multiplier). */
MP_HD static inline double mp_check_mult(double mult, const mp_amp_state *st)
{
    return st ? mult / st->scaler.scale : mult;
}

/* The fill of the largest |gradient| amax against the half type's largest finite value
 * (limit > 0), else 0 (the gradients stay in FP32 or FP64). */
MP_HD static inline double mp_check_fill(double amax, double limit)
{
    return limit > 0.0 ? amax / limit : 0.0;
}

/* Defines, for accumulator type ACC with absolute value ABS:
 *   mp_check_SFX: a partial result: sumsq (FP64), amax (the largest |g|, NaN ignored), bad (0 or
 *     1: a non-finite element seen);
 *   mp_check_SFX_add(sumsq, amax, bad, g, m): adds element g, unscaled by m, to a partial result
 *     held in three variables (a kernel keeps several partials as arrays, which vectorise);
 *   mp_check_SFX_elem(c, g, m): the same on *c. */
#define MP_CHECK_RULES(ACC, SFX, ABS)                                                       \
    typedef struct mp_check_##SFX {                                                         \
        double sumsq;                                                                       \
        ACC amax;                                                                           \
        int bad;                                                                            \
    } mp_check_##SFX;                                                                       \
                                                                                            \
    MP_HD static inline void mp_check_##SFX##_add(double *sumsq, ACC *amax, int *bad, ACC g, \
                                                  ACC m)                                    \
    {                                                                                       \
        ACC v = g * m, a = ABS(g);                                                          \
        *bad |= !isfinite(v);                                                               \
        *sumsq += (double)v * (double)v;                                                    \
        *amax = a > *amax ? a : *amax;                                                      \
    }                                                                                       \
                                                                                            \
    MP_HD static inline void mp_check_##SFX##_elem(mp_check_##SFX *c, ACC g, ACC m)         \
    {                                                                                       \
        mp_check_##SFX##_add(&c->sumsq, &c->amax, &c->bad, g, m);                          \
    }

MP_CHECK_RULES(float, f32, fabsf)
MP_CHECK_RULES(double, f64, fabs)

#endif
