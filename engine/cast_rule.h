/* Element loads and stores by runtime dtype, written once for every backend (MP_HD): element i
 * of a buffer of dtype dt widened to the accumulator type (float; double for FP64 work), and a
 * value rounded once into it with engine/dtype.h's conversions (round to nearest even, overflow
 * to inf, subnormals kept, NaN stays a quiet NaN with its top payload bits). Every CUDA kernel
 * loads and stores elements through these; on the CPU they are mp_load / mp_store, and the bulk
 * paths (mp_convert) and the CPU kernels' typed loads give the same bits.
 * On the device, fp16 uses the conversion instructions (cvt.f32.f16, cvt.rn.f16.f32, without
 * -ftz or --use_fast_math, which the build never sets): for every non-NaN value they give
 * exactly mp_f16_to_f32's and mp_f32_to_f16's bits (IEEE round to nearest even, subnormals
 * kept), and a NaN goes through the portable function so that its payload is the CPU's too. bf16
 * uses the portable functions everywhere: a shift one way and an add the other, as cheap as the
 * instruction. */
#ifndef MP_CAST_RULE_H
#define MP_CAST_RULE_H

#include <math.h>
#include <stdint.h>

#include "engine/half.h"
#include "engine/hd.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

/* Element i of p (of dtype dt) as a float (an FP64 element rounded to float). */
MP_HD static inline float mp_elem_load_f32(const void *p, mp_dtype dt, int64_t i)
{
    switch (dt) {
    case MP_F16: {
        uint16_t h = ((const uint16_t *)p)[i];
#ifdef __CUDA_ARCH__
        if ((h & 0x7fffu) <= 0x7c00u)
            return __half2float(__ushort_as_half(h));
#endif
        return mp_f16_to_f32(h);
    }
    case MP_BF16: return mp_bf16_to_f32(((const uint16_t *)p)[i]);
    case MP_F64: return (float)((const double *)p)[i];
    case MP_F32: break;
    }
    return ((const float *)p)[i];
}

/* Stores v rounded to dt into element i of p. */
MP_HD static inline void mp_elem_store_f32(void *p, mp_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case MP_F16:
#ifdef __CUDA_ARCH__
        if (!isnan(v)) {
            ((uint16_t *)p)[i] = __half_as_ushort(__float2half_rn(v));
            return;
        }
#endif
        ((uint16_t *)p)[i] = mp_f32_to_f16(v);
        return;
    case MP_BF16: ((uint16_t *)p)[i] = mp_f32_to_bf16(v); return;
    case MP_F64: ((double *)p)[i] = v; return;
    case MP_F32: break;
    }
    ((float *)p)[i] = v;
}

/* Copies element i of src into element i of dst, both of dtype dt, bit for bit. */
MP_HD static inline void mp_elem_copy(void *dst, const void *src, mp_dtype dt, int64_t i)
{
    switch (dt) {
    case MP_F16:
    case MP_BF16: ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i]; return;
    case MP_F64: ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i]; return;
    case MP_F32: break;
    }
    ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
}

/* Element i of p (of dtype dt) as a double: exact for every dtype. */
MP_HD static inline double mp_elem_load_f64(const void *p, mp_dtype dt, int64_t i)
{
    return dt == MP_F64 ? ((const double *)p)[i] : (double)mp_elem_load_f32(p, dt, i);
}

/* Stores v rounded to dt into element i of p (through float for FP32 and the half types, as
 * mp_store always has). */
MP_HD static inline void mp_elem_store_f64(void *p, mp_dtype dt, int64_t i, double v)
{
    if (dt == MP_F64)
        ((double *)p)[i] = v;
    else
        mp_elem_store_f32(p, dt, i, (float)v);
}

#endif
