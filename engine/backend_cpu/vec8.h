/* Eight stored values of an FP32, fp16 or bf16 tensor as a vector of eight floats in registers,
 * and back: a kernel widens its operands where it uses them instead of converting a tile into a
 * buffer first. Each function gives the bits of engine/dtype.h's element-wise functions (so of
 * mp_convert's) for every input, NaNs included: widening is exact, narrowing rounds to nearest
 * even, and a NaN keeps its sign and top payload bits and becomes quiet. The one exception: the
 * F16C load quiets a signalling fp16 NaN, which any arithmetic on the value does anyway (the
 * kernels only do arithmetic on what they load). tests/unit/test_vec8.c checks every half and a
 * sweep of floats against those functions, at every level this CPU has. Like every FP32
 * operation of the engine, they assume MXCSR as a program starts (round to nearest even, no
 * flush to zero).
 * Two sets: the portable one (mp_v8_load / mp_v8_store: the GCC and clang vector extension,
 * branch-free; two 128-bit halves of SSE2 in a baseline x86-64 build) and, where isa.h compiles
 * the levels, ones for its levels that use the CPU's conversion instructions: F16C for fp16 at
 * every level from AVX2 up, AVX512-BF16's VCVTNEPS2BF16 for bf16 stores. A kernel
 * compiled for level ISA (MP_ISA_TARGET_<ISA>) calls MP_V8_LOAD_<ISA> and MP_V8_STORE_<ISA>.
 * dt is a constant where these are inlined, so each kernel gets one copy per dtype from one
 * source. */
#ifndef MP_BACKEND_CPU_VEC8_H
#define MP_BACKEND_CPU_VEC8_H

#include <stdint.h>
#include <string.h>

#include "engine/backend_cpu/isa.h"
#include "engine/cast_rule.h"
#include "engine/dtype.h"

typedef float mp_v8f __attribute__((vector_size(32)));
typedef uint32_t mp_v8u __attribute__((vector_size(32)));
typedef int32_t mp_v8i __attribute__((vector_size(32)));
typedef uint16_t mp_v8h __attribute__((vector_size(16)));

#define MP_V8_INLINE static inline __attribute__((always_inline))

/* a where mask (all ones or all zeros per element) is set, else b. */
MP_V8_INLINE mp_v8u mp_v8u_pick(mp_v8u mask, mp_v8u a, mp_v8u b)
{
    return (mask & a) | (~mask & b);
}

/* fp16 bits (in the low 16 of each element) -> FP32 bits: mp_f16_to_f32. */
MP_V8_INLINE mp_v8u mp_v8_f16_widen(mp_v8u h)
{
    const mp_v8u sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    const mp_v8u normal = sign | ((exp + 112u) << 23) | (mant << 13);
    const mp_v8u special = sign | 0x7f800000u | (mant << 13);
    /* a subnormal's value is mant 2^-24, exact in FP32 */
    const mp_v8f sub = __builtin_convertvector((mp_v8i)mant, mp_v8f) * 0x1p-24f;
    const mp_v8u zero_exp = (mp_v8u)(exp == 0u), max_exp = (mp_v8u)(exp == 0x1fu);
    return mp_v8u_pick(max_exp, special, mp_v8u_pick(zero_exp, sign | (mp_v8u)sub, normal));
}

/* FP32 -> fp16 bits (in the low 16 of each element), rounded to nearest even: mp_f32_to_f16. */
MP_V8_INLINE mp_v8u mp_v8_f16_narrow(mp_v8f f)
{
    const mp_v8u x = (mp_v8u)f, sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    const mp_v8u nan = sign | 0x7e00u | ((ax >> 13) & 0x3ffu), inf = sign | 0x7c00u;
    /* below 2^-14: adding 0.5f rounds the bits into place (0.5f's ulp is the half spacing) */
    const mp_v8f small_sum = (mp_v8f)ax + 0.5f;
    const mp_v8u small = sign | ((mp_v8u)small_sum - 0x3f000000u);
    const mp_v8u normal = sign | ((ax + 0xc8000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13);
    const mp_v8u is_nan = (mp_v8u)(ax > 0x7f800000u), is_inf = (mp_v8u)(ax >= 0x47800000u);
    const mp_v8u is_small = (mp_v8u)(ax < 0x38800000u);
    return mp_v8u_pick(is_nan, nan,
                       mp_v8u_pick(is_inf, inf, mp_v8u_pick(is_small, small, normal)));
}

/* FP32 -> bf16 bits (in the low 16 of each element), rounded to nearest even: mp_f32_to_bf16. */
MP_V8_INLINE mp_v8u mp_v8_bf16_narrow(mp_v8f f)
{
    const mp_v8u x = (mp_v8u)f, is_nan = (mp_v8u)((x & 0x7fffffffu) > 0x7f800000u);
    const mp_v8u inc = (0x7fffu + ((x >> 16) & 1u)) & ~is_nan;
    return ((x + inc) >> 16) | (is_nan & 0x40u);
}

/* Elements i .. i + 7 of p (dtype dt: MP_F32, MP_F16 or MP_BF16) as FP32. */
MP_V8_INLINE mp_v8f mp_v8_load(mp_dtype dt, const void *p, int64_t i)
{
    if (dt == MP_F32) {
        mp_v8f v;
        memcpy(&v, (const float *)p + i, sizeof v);
        return v;
    }
    mp_v8h h;
    memcpy(&h, (const uint16_t *)p + i, sizeof h);
    const mp_v8u u = __builtin_convertvector(h, mp_v8u);
    return dt == MP_BF16 ? (mp_v8f)(u << 16) : (mp_v8f)mp_v8_f16_widen(u);
}

/* Stores v into elements i .. i + 7 of p (dtype dt: MP_F32, MP_F16 or MP_BF16), rounded. */
MP_V8_INLINE void mp_v8_store(mp_dtype dt, void *p, int64_t i, mp_v8f v)
{
    if (dt == MP_F32) {
        memcpy((float *)p + i, &v, sizeof v);
        return;
    }
    const mp_v8u u = dt == MP_BF16 ? mp_v8_bf16_narrow(v) : mp_v8_f16_narrow(v);
    const mp_v8h h = __builtin_convertvector(u, mp_v8h);
    memcpy((uint16_t *)p + i, &h, sizeof h);
}

/* The levels' loads and stores (see the top of this file). */
#define MP_V8_LOAD_BASE mp_v8_load
#define MP_V8_STORE_BASE mp_v8_store

#if MP_ISA_DISPATCH
#include <immintrin.h>

/* F16C and AVX2: fp16 loads convert with VCVTPH2PS, bf16 ones zero-extend and shift. */
__attribute__((target("avx2,f16c"))) MP_V8_INLINE mp_v8f mp_v8_load_f16c(mp_dtype dt,
                                                                          const void *p, int64_t i)
{
    mp_v8f r;
    if (dt == MP_F32) {
        memcpy(&r, (const float *)p + i, sizeof r);
        return r;
    }
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    const __m256i bf = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    const __m256 v = dt == MP_F16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(bf);
    memcpy(&r, &v, sizeof r);
    return r;
}

/* F16C and AVX2: a vector with no NaN is rounded by VCVTPS2PH (fp16) or by the rounding
 * increment alone (bf16: no NaN test per element); one holding a NaN is stored element by
 * element by engine/cast_rule.h's mp_elem_store_f32 (VCVTPS2PH keeps other payload bits; the
 * increment can round a NaN with a small payload to infinity, or carry into the sign bit). */
__attribute__((target("avx2,f16c"))) MP_V8_INLINE void mp_v8_store_f16c(mp_dtype dt, void *p,
                                                                         int64_t i, mp_v8f v)
{
    __m256 f;
    memcpy(&f, &v, sizeof f);
    if (dt == MP_F32) {
        memcpy((float *)p + i, &v, sizeof v);
        return;
    }
    if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q))) {
        float e[8]; /* element by element: no vector crosses into code compiled without AVX */
        memcpy(e, &v, sizeof e);
        for (int j = 0; j < 8; j++)
            mp_elem_store_f32(p, dt, i + j, e[j]);
        return;
    }
    __m128i h;
    if (dt == MP_F16) {
        h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
    } else {
        const __m256i x = _mm256_castps_si256(f);
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
        const __m256i r = _mm256_srli_epi32(
            _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), odd), 16);
        h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
    }
    _mm_storeu_si128((__m128i *)((uint16_t *)p + i), h);
}

/* AVX512-BF16: bf16 stores round with VCVTNEPS2BF16 (which ignores MXCSR) unless the vector holds
 * a NaN or a subnormal (the instruction flushes subnormals), which go through mp_v8_store_f16c;
 * other dtypes too. The two are told by integer compares of the bits (VFPCLASSPS would take a
 * subnormal for zero under MXCSR.DAZ). */
__attribute__((target("avx2,f16c,avx512f,avx512vl,avx512bf16"))) MP_V8_INLINE void
mp_v8_store_bf16ne(mp_dtype dt, void *p, int64_t i, mp_v8f v)
{
    __m256 f;
    memcpy(&f, &v, sizeof f);
    const __m256i mag = _mm256_and_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x7fffffff));
    const __mmask8 nan = _mm256_cmpgt_epu32_mask(mag, _mm256_set1_epi32(0x7f800000));
    /* subnormal: 0 < magnitude < 2^-126, i.e. magnitude - 1 < 0x007fffff unsigned */
    const __mmask8 sub = _mm256_cmplt_epu32_mask(_mm256_sub_epi32(mag, _mm256_set1_epi32(1)),
                                                 _mm256_set1_epi32(0x007fffff));
    if (dt != MP_BF16 || (nan | sub)) {
        mp_v8_store_f16c(dt, p, i, v);
        return;
    }
    const __m128bh h = _mm256_cvtneps_pbh(f);
    memcpy((uint16_t *)p + i, &h, sizeof h);
}

#define MP_V8_LOAD_AVX2 mp_v8_load_f16c
#define MP_V8_STORE_AVX2 mp_v8_store_f16c
#define MP_V8_LOAD_AVX512 mp_v8_load_f16c
#define MP_V8_STORE_AVX512 mp_v8_store_f16c
#define MP_V8_LOAD_AVX512BF16 mp_v8_load_f16c
#define MP_V8_STORE_AVX512BF16 mp_v8_store_bf16ne
#endif

#endif
