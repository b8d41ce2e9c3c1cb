/* The element types and the bits of one element: the dtype enum and the exact conversions of
 * a single value between binary32 and the half types, inline and MP_HD so that every kernel on
 * half data calls them per element on the CPU and the GPU alike (engine/cast_rule.h). A leaf:
 * the bulk conversions and the rest of the dtype API are in engine/dtype.h. */
#ifndef MP_HALF_H
#define MP_HALF_H

#include <stdint.h>
#include <string.h>

#include "engine/hd.h"

typedef enum mp_dtype { MP_F32 = 0, MP_F16 = 1, MP_BF16 = 2, MP_F64 = 3 } mp_dtype;

/* The bits of a float and back. */
MP_HD static inline uint32_t mp_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

MP_HD static inline float mp_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE binary16 <-> binary32; the float->half direction rounds to nearest even. Inline and
 * MP_HD: every kernel on half data calls them per element, on the CPU and (for NaNs and bf16,
 * engine/cast_rule.h) on the GPU. */
MP_HD static inline uint16_t mp_f32_to_f16(float f)
{
    uint32_t x = mp_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x47800000u) /* >= 65536 (and inf): inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        /* Below 2^-14: the FPU's own round-to-nearest-even aligns the bits when 0.5f is added,
         * since 0.5f's ulp (2^-24) is the half subnormal spacing. */
        float a = mp_bits_f32(ax) + 0.5f;
        return (uint16_t)(sign | (mp_f32_bits(a) - 0x3f000000u));
    }
    uint32_t odd = (ax >> 13) & 1u;
    ax += 0xc8000000u /* rebias exponent: (15 - 127) << 23 */ + 0xfffu + odd;
    return (uint16_t)(sign | (ax >> 13));
}

MP_HD static inline float mp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f)
        return mp_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f; /* exact: a power-of-two scale of a small integer */
        return mp_bits_f32(sign | mp_f32_bits(v));
    }
    return mp_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* bfloat16 <-> binary32; the float->bf16 direction rounds to nearest even. */
MP_HD static inline uint16_t mp_f32_to_bf16(float f)
{
    uint32_t x = mp_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

MP_HD static inline float mp_bf16_to_f32(uint16_t h) { return mp_bits_f32((uint32_t)h << 16); }

#endif
