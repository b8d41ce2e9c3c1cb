/* Bit-exact half conversions (no _Float16 needed, so clang builds too). */
#include "engine/dtype.h"

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
    /* The common pairs get their own loops (they run every step); the rest go element by
     * element through double. Half <- FP64 rounds through FP32 (tests only). */
    if (st == MP_F32 && dt == MP_F16) {
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = mp_f32_to_f16(((const float *)src)[i]);
    } else if (st == MP_F16 && dt == MP_F32) {
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = mp_f16_to_f32(((const uint16_t *)src)[i]);
    } else if (st == MP_F32 && dt == MP_BF16) {
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = mp_f32_to_bf16(((const float *)src)[i]);
    } else if (st == MP_BF16 && dt == MP_F32) {
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = mp_bf16_to_f32(((const uint16_t *)src)[i]);
    } else {
        for (size_t i = 0; i < n; i++)
            mp_store(dst, dt, i, mp_load(src, st, i));
    }
}
