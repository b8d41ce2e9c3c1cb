/* Element types and exact conversions between them.
 * Half values are stored as 16-bit words and rounded exactly as a GPU stores them: round to
 * nearest even, overflow to inf, subnormals kept, NaN stays NaN (quiet). FP64 exists for the
 * reference backend's finite-difference gradient checks. */
#ifndef MP_DTYPE_H
#define MP_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/hd.h"

typedef enum mp_dtype { MP_F32 = 0, MP_F16 = 1, MP_BF16 = 2, MP_F64 = 3 } mp_dtype;

/* Bytes per element of `dt`. */
size_t mp_dtype_size(mp_dtype dt);

/* The largest finite value of `dt` (65504 for fp16). */
double mp_dtype_max(mp_dtype dt);

/* The config name of `dt`: "fp32", "fp16", "bf16", "fp64". Static storage. */
const char *mp_dtype_name(mp_dtype dt);

/* Parses a config name into *dt. Returns 0 on success, -1 for an unknown name. */
int mp_dtype_parse(const char *name, mp_dtype *dt);

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

/* Converts n elements from src (of type st) to dst (of type dt), rounding once.
 * src and dst must not overlap unless they are the same buffer with the same dtype. */
void mp_convert(void *dst, mp_dtype dt, const void *src, mp_dtype st, size_t n);

/* io[i] = in[i] + io[i] for n elements of the half type dt (MP_F16 or MP_BF16), added in FP32
 * and rounded once, as tensor cores accumulate and store: gradient sums over ranks. Bit-exact
 * with the element-wise functions above except that a NaN result may carry another NaN payload
 * (IEEE 754 leaves payload propagation open; what matters downstream is that it is a NaN). */
void mp_half_add(uint16_t *io, const uint16_t *in, size_t n, mp_dtype dt);

/* Reads element i of buf (of type dt) as a double; writes v rounded to dt into element i
 * (engine/cast_rule.h's mp_elem_load_f64 / mp_elem_store_f64, which the GPU kernels share). */
double mp_load(const void *buf, mp_dtype dt, size_t i);
void mp_store(void *buf, mp_dtype dt, size_t i, double v);

#endif
