/* Bit-exact half conversions (no _Float16 needed, so clang builds too). */
#include "engine/dtype.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} mp_dtypes[] = {
    [MP_F32] = {"fp32", 4}, [MP_F16] = {"fp16", 2}, [MP_BF16] = {"bf16", 2}, [MP_F64] = {"fp64", 8}};

size_t mp_dtype_size(mp_dtype dt) { return mp_dtypes[dt].size; }

const char *mp_dtype_name(mp_dtype dt) { return mp_dtypes[dt].name; }

int mp_dtype_parse(const char *name, mp_dtype *dt)
{
    for (int i = 0; i < (int)(sizeof mp_dtypes / sizeof mp_dtypes[0]); i++)
        if (strcmp(name, mp_dtypes[i].name) == 0) {
            *dt = (mp_dtype)i;
            return 0;
        }
    return -1;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t mp_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x47800000u) /* >= 65536 (and inf): inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        /* Below 2^-14: the FPU's own round-to-nearest-even aligns the bits when 0.5f is added,
         * since 0.5f's ulp (2^-24) is the half subnormal spacing. */
        float a = bits_f32(ax) + 0.5f;
        return (uint16_t)(sign | (f32_bits(a) - 0x3f000000u));
    }
    uint32_t odd = (ax >> 13) & 1u;
    ax += 0xc8000000u /* rebias exponent: (15 - 127) << 23 */ + 0xfffu + odd;
    return (uint16_t)(sign | (ax >> 13));
}

float mp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f)
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        float v = ldexpf((float)mant, -24);
        return bits_f32(sign | f32_bits(v));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t mp_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float mp_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

double mp_load(const void *buf, mp_dtype dt, size_t i)
{
    switch (dt) {
    case MP_F32: return ((const float *)buf)[i];
    case MP_F64: return ((const double *)buf)[i];
    case MP_F16: return mp_f16_to_f32(((const uint16_t *)buf)[i]);
    case MP_BF16: return mp_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
    return 0.0;
}

void mp_store(void *buf, mp_dtype dt, size_t i, double v)
{
    switch (dt) {
    case MP_F32: ((float *)buf)[i] = (float)v; break;
    case MP_F64: ((double *)buf)[i] = v; break;
    case MP_F16: ((uint16_t *)buf)[i] = mp_f32_to_f16((float)v); break;
    case MP_BF16: ((uint16_t *)buf)[i] = mp_f32_to_bf16((float)v); break;
    }
}

void mp_convert(void *dst, mp_dtype dt, const void *src, mp_dtype st, size_t n)
{
    if (dt == st) {
        if (dst != src)
            memcpy(dst, src, n * mp_dtype_size(dt));
        return;
    }
    /* Half <- FP64 goes through FP32 like a GPU's __double2half would not; it is only used by
     * tests, where values are FP32-representable. */
    for (size_t i = 0; i < n; i++)
        mp_store(dst, dt, i, mp_load(src, st, i));
}
