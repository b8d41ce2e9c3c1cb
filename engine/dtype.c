/* Bit-exact half conversions (no _Float16 needed, so clang builds too). The element-wise
 * functions in dtype.h define the semantics; mp_convert's bulk paths give identical bits.
 * On x86-64 the F32<->F16 bulk paths use the F16C instructions when the CPU has them (chosen
 * at run time, so the build needs no -mf16c): their round-to-nearest-even results equal the
 * portable ones for every non-NaN input, and any group of 8 holding a NaN goes through the
 * portable functions, so NaN payloads match too. The bf16 paths are branch-free loops over
 * fixed groups of 8 that the compiler vectorises (for AVX2 too: MP_VECTOR_CLONES). */
#include "engine/dtype.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "engine/cast_rule.h"
#include "engine/cpu_features.h"
#include "engine/vector_clones.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MP_HAVE_F16C 1
#endif

static const struct {
    const char *name;
    size_t size;
    double max;      /* the largest finite value */
    double overflow; /* the largest plus half its last place: where rounding reaches inf */
} mp_dtypes[] = {[MP_F32] = {"fp32", 4, 0x1.fffffep+127, 0x1.ffffffp+127},
                 [MP_F16] = {"fp16", 2, 65504.0, 65520.0},
                 [MP_BF16] = {"bf16", 2, 0x1.fep+127, 0x1.ffp+127},
                 [MP_F64] = {"fp64", 8, 0x1.fffffffffffffp+1023, INFINITY}};

size_t mp_dtype_size(mp_dtype dt) { return mp_dtypes[dt].size; }

double mp_dtype_max(mp_dtype dt) { return mp_dtypes[dt].max; }

double mp_dtype_overflow(mp_dtype dt) { return mp_dtypes[dt].overflow; }

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
    return mp_elem_load_f64(buf, dt, (int64_t)i);
}

void mp_store(void *buf, mp_dtype dt, size_t i, double v)
{
    mp_elem_store_f64(buf, dt, (int64_t)i, v);
}

static void f32_to_f16_soft(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = mp_f32_to_f16(src[i]);
}

static void f16_to_f32_soft(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = mp_f16_to_f32(src[i]);
}

#ifdef MP_HAVE_F16C
/* Whether the CPU has F16C and the OS saves AVX state. */
static bool have_f16c(void) { return (mp_cpu_features() & MP_CPU_F16C) != 0; }

__attribute__((target("f16c,avx"))) static void f32_to_f16_f16c(uint16_t *dst, const float *src,
                                                                 size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)))
            f32_to_f16_soft(dst + i, src + i, 8);
        else
            _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    f32_to_f16_soft(dst + i, src + i, n - i);
    _mm256_zeroupper(); /* no AVX-to-SSE transition penalty in the caller's SSE code */
}

__attribute__((target("f16c,avx"))) static void f16_to_f32_f16c(float *dst, const uint16_t *src,
                                                                 size_t n)
{
    const __m128i mag = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(h, mag), inf)))
            f16_to_f32_soft(dst + i, src + i, 8);
        else
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    f16_to_f32_soft(dst + i, src + i, n - i);
    _mm256_zeroupper();
}
#endif

/* mp_f32_to_bf16 without a branch, so that groups of 8 vectorise: a NaN gets no rounding
 * increment and the quiet bit instead. */
static inline uint16_t f32_to_bf16_select(float f)
{
    uint32_t x = mp_f32_bits(f);
    uint32_t nan = (uint32_t)-(uint32_t)((x & 0x7fffffffu) > 0x7f800000u);
    uint32_t inc = (0x7fffu + ((x >> 16) & 1u)) & ~nan;
    return (uint16_t)(((x + inc) >> 16) | (nan & 0x40u));
}

MP_VECTOR_CLONES
static void f32_to_bf16_bulk(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t k = 0; k < 16; k++)
            dst[i + k] = f32_to_bf16_select(src[i + k]);
    for (; i < n; i++)
        dst[i] = mp_f32_to_bf16(src[i]);
}

MP_VECTOR_CLONES
static void bf16_to_f32_bulk(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t k = 0; k < 16; k++)
            dst[i + k] = mp_bf16_to_f32(src[i + k]);
    for (; i < n; i++)
        dst[i] = mp_bf16_to_f32(src[i]);
}

static void half_add_soft(uint16_t *io, const uint16_t *in, size_t n, mp_dtype dt)
{
    if (dt == MP_F16)
        for (size_t i = 0; i < n; i++)
            io[i] = mp_f32_to_f16(mp_f16_to_f32(in[i]) + mp_f16_to_f32(io[i]));
    else
        for (size_t i = 0; i < n; i++)
            io[i] = mp_f32_to_bf16(mp_bf16_to_f32(in[i]) + mp_bf16_to_f32(io[i]));
}

#ifdef MP_HAVE_F16C
/* Fused fp16 add, 16 at a time: F16C converts inf and NaN like the soft path (a NaN's payload
 * may differ, which mp_half_add allows). */
__attribute__((target("f16c,avx"))) static void f16_add_f16c(uint16_t *io, const uint16_t *in,
                                                             size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t k = 0; k < 16; k += 8) {
            __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i + k)));
            __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(io + i + k)));
            _mm_storeu_si128((__m128i *)(io + i + k),
                             _mm256_cvtps_ph(_mm256_add_ps(b, a), _MM_FROUND_TO_NEAREST_INT));
        }
    half_add_soft(io + i, in + i, n - i, MP_F16);
    _mm256_zeroupper();
}

/* Fused bf16 add, 8 at a time, with the branch-free rounding of f32_to_bf16_select. */
__attribute__((target("avx2"))) static void bf16_add_avx2(uint16_t *io, const uint16_t *in,
                                                          size_t n)
{
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(in + i)));
        __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(io + i)));
        __m256 s = _mm256_add_ps(_mm256_castsi256_ps(_mm256_slli_epi32(b, 16)),
                                 _mm256_castsi256_ps(_mm256_slli_epi32(a, 16)));
        __m256i x = _mm256_castps_si256(s);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
        __m256i inc = _mm256_andnot_si256(
            nan, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(x, 16), one)));
        __m256i r = _mm256_or_si256(_mm256_srli_epi32(_mm256_add_epi32(x, inc), 16),
                                    _mm256_and_si256(nan, quiet));
        __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(io + i), packed);
    }
    half_add_soft(io + i, in + i, n - i, MP_BF16);
    _mm256_zeroupper();
}
#endif

void mp_half_add(uint16_t *io, const uint16_t *in, size_t n, mp_dtype dt)
{
#ifdef MP_HAVE_F16C
    if (dt == MP_F16 && have_f16c()) {
        f16_add_f16c(io, in, n);
        return;
    }
    if (dt == MP_BF16 && (mp_cpu_features() & MP_CPU_AVX2)) {
        bf16_add_avx2(io, in, n);
        return;
    }
#endif
    half_add_soft(io, in, n, dt);
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
#ifdef MP_HAVE_F16C
        if (have_f16c()) {
            f32_to_f16_f16c(dst, src, n);
            return;
        }
#endif
        f32_to_f16_soft(dst, src, n);
    } else if (st == MP_F16 && dt == MP_F32) {
#ifdef MP_HAVE_F16C
        if (have_f16c()) {
            f16_to_f32_f16c(dst, src, n);
            return;
        }
#endif
        f16_to_f32_soft(dst, src, n);
    } else if (st == MP_F32 && dt == MP_BF16) {
        f32_to_bf16_bulk(dst, src, n);
    } else if (st == MP_BF16 && dt == MP_F32) {
        bf16_to_f32_bulk(dst, src, n);
    } else if (st == MP_F64 && dt == MP_F32) {
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = (float)((const double *)src)[i];
    } else if (st == MP_F32 && dt == MP_F64) {
        for (size_t i = 0; i < n; i++)
            ((double *)dst)[i] = ((const float *)src)[i];
    } else {
        for (size_t i = 0; i < n; i++)
            mp_store(dst, dt, i, mp_load(src, st, i));
    }
}
