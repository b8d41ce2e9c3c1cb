/* The exponential in FP32 written once for every backend (MP_HD), so that the softmaxes of
 * attention (engine/attn_geom.h, engine/attn_flash.h) and GELU (engine/gelu_rule.h) give the
 * same bits on the CPU and the GPU. */
#ifndef MP_EXP_RULE_H
#define MP_EXP_RULE_H

#include <math.h>
#include <stdint.h>

#include "engine/half.h"
#include "engine/hd.h"

/* e^x in FP32 for x <= 0 (the softmax's s - max, GELU's -2|u|), within 1 ulp of the exact
 * value, with only additions, multiplications and bit moves, so that every backend computes the
 * same bits (no FMA: the builds forbid contraction) and the CPU's loops over a row vectorise (the
 * selects are on integers: a float comparison under -ftrapping-math keeps GCC from vectorising):
 * x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite; n rounded by adding 1.5 * 2^23, with no
 * float-to-int conversion), e^r by Cephes' degree-7 polynomial, times 2^n made from n's bits.
 * Below -87 (e^x < 2^-125), -inf included, it returns 0; a NaN stays NaN; x > 88 is outside its
 * domain. */
MP_HD static inline float mp_exp_f32(float x)
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

/* e^x in FP64 (the FP64 reference paths: the C library's exp). */
MP_HD static inline double mp_exp_f64(double x) { return exp(x); }

#endif
