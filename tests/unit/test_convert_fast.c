/* mp_convert's bulk paths (F16C on x86-64 when the CPU has it, vectorised bf16 loops) against
 * the element-wise functions of dtype.h that define the semantics: every one of the 65,536
 * fp16 and bf16 patterns, and 2^24 random floats plus boundary cases (every half value, the
 * midpoints between neighbours and the floats either side of them, overflow and subnormal
 * edges, NaN payloads), converted in chunks of odd lengths from unaligned starts so that the
 * vector tails and the NaN fallbacks run. Results must match bit for bit, NaNs included. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "engine/rng.h"
#include "tests/util/test_floats.h"

/* Chunk lengths cycled through by convert_chunked: below, at and past the vector width. */
static const size_t chunk_lens[] = {1, 7, 8, 9, 15, 16, 17, 31, 1000, 1023, 4097, 65537};

/* Converts n elements in consecutive chunks of the lengths above (so chunk starts land at
 * every alignment), writing no element outside [0, n). */
static void convert_chunked(void *dst, mp_dtype dt, const void *src, mp_dtype st, size_t n)
{
    size_t ds = mp_dtype_size(dt), ss = mp_dtype_size(st);
    for (size_t i = 0, k = 0; i < n; k++) {
        size_t len = chunk_lens[k % (sizeof chunk_lens / sizeof chunk_lens[0])];
        if (len > n - i)
            len = n - i;
        mp_convert((char *)dst + i * ds, dt, (const char *)src + i * ss, st, len);
        i += len;
    }
}

static void expect_f16(const float *src, const uint16_t *got, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t want = mp_f32_to_f16(src[i]);
        if (got[i] != want)
            fail_msg("f32 0x%08x -> fp16 0x%04x in bulk, 0x%04x element-wise (index %zu)",
                     mp_f32_bits(src[i]), got[i], want, i);
    }
}

static void expect_bf16(const float *src, const uint16_t *got, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t want = mp_f32_to_bf16(src[i]);
        if (got[i] != want)
            fail_msg("f32 0x%08x -> bf16 0x%04x in bulk, 0x%04x element-wise (index %zu)",
                     mp_f32_bits(src[i]), got[i], want, i);
    }
}

/* Every half and bf16 pattern, widened in bulk, at every chunking and from a shifted start. */
static void test_half_patterns_to_f32(void **state)
{
    (void)state;
    enum { N = 65536, PAD = 3 };
    uint16_t *h = mp_alloc((N + PAD) * sizeof *h, MP_MEM_WORKSPACE);
    float *f = mp_alloc((N + PAD + 1) * sizeof *f, MP_MEM_WORKSPACE);
    for (int shift = 0; shift <= PAD; shift++) {
        for (uint32_t i = 0; i < N; i++)
            h[shift + i] = (uint16_t)(i * 40503u); /* a permutation: NaNs scattered */
        for (int dt = 0; dt < 2; dt++) {
            mp_dtype st = dt ? MP_BF16 : MP_F16;
            f[N + shift] = 42.0f;
            if (shift & 1)
                convert_chunked(f + shift, MP_F32, h + shift, st, N);
            else
                mp_convert(f + shift, MP_F32, h + shift, st, N);
            assert_true(f[N + shift] == 42.0f);
            for (uint32_t i = 0; i < N; i++) {
                uint16_t x = h[shift + i];
                float want = dt ? mp_bf16_to_f32(x) : mp_f16_to_f32(x);
                if (mp_f32_bits(f[shift + i]) != mp_f32_bits(want))
                    fail_msg("%s 0x%04x -> 0x%08x in bulk, 0x%08x element-wise", mp_dtype_name(st),
                             x, mp_f32_bits(f[shift + i]), mp_f32_bits(want));
            }
        }
    }
    mp_free(h);
    mp_free(f);
}

/* Narrowing of the boundary cases and 2^24 random floats to fp16 and bf16. */
static void test_f32_to_half(void **state)
{
    (void)state;
    size_t nr = (size_t)1 << 24, cap = nr + 65536 * 7 + 64;
    float *src = mp_alloc(cap * sizeof *src, MP_MEM_WORKSPACE);
    uint16_t *dst = mp_alloc((cap + 1) * sizeof *dst, MP_MEM_WORKSPACE);
    size_t nb = mp_test_boundary_floats(src);
    mp_test_random_floats(src + nb, nr, 2024);
    size_t n = nb + nr;
    for (int dt = 0; dt < 2; dt++) {
        mp_dtype d = dt ? MP_BF16 : MP_F16;
        dst[n] = 0x5a5a;
        mp_convert(dst, d, src, MP_F32, n);
        (dt ? expect_bf16 : expect_f16)(src, dst, n);
        memset(dst, 0, n * sizeof *dst);
        convert_chunked(dst, d, src, MP_F32, n);
        (dt ? expect_bf16 : expect_f16)(src, dst, n);
        /* shifted by one element: every vector sees different neighbours and alignment */
        convert_chunked(dst + 1, d, src + 1, MP_F32, n - 1);
        (dt ? expect_bf16 : expect_f16)(src + 1, dst + 1, n - 1);
        assert_int_equal(dst[n], 0x5a5a);
    }
    mp_free(src);
    mp_free(dst);
}

/* A NaN in any lane of a vector, every other lane finite: the NaN keeps its payload and the
 * finite lanes are rounded as usual. */
static void test_nan_in_every_lane(void **state)
{
    (void)state;
    static const uint32_t nans[] = {0x7f800001u, 0xffc00000u, 0x7fa5a5a5u, 0x7fffe000u};
    static const uint16_t hnans[] = {0x7c01u, 0xfe00u, 0x7d55u, 0xffffu};
    float src[24], f[24];
    uint16_t h[24], hs[24];
    for (int k = 0; k < 4; k++)
        for (int lane = 0; lane < 24; lane++) {
            for (int i = 0; i < 24; i++) {
                src[i] = (float)(i * 1000 + 1) / 3.0f;
                hs[i] = (uint16_t)(0x3c00 + i * 37);
            }
            src[lane] = mp_bits_f32(nans[k]);
            hs[lane] = hnans[k];
            for (int dt = 0; dt < 2; dt++) {
                mp_dtype d = dt ? MP_BF16 : MP_F16;
                mp_convert(h, d, src, MP_F32, 24);
                (dt ? expect_bf16 : expect_f16)(src, h, 24);
                mp_convert(f, MP_F32, hs, d, 24);
                for (int i = 0; i < 24; i++) {
                    float want = dt ? mp_bf16_to_f32(hs[i]) : mp_f16_to_f32(hs[i]);
                    assert_int_equal(mp_f32_bits(f[i]), mp_f32_bits(want));
                }
            }
        }
}

/* The FP32 <-> FP64 loops agree with mp_load/mp_store, and n = 0 writes nothing. */
static void test_other_pairs_and_empty(void **state)
{
    (void)state;
    double d[5] = {1.0 / 3, -1e300, 1e-300, NAN, -0.0}, back[5];
    float f[5];
    uint16_t h[5];
    mp_convert(f, MP_F32, d, MP_F64, 5);
    for (int i = 0; i < 5; i++) {
        float want;
        mp_store(&want, MP_F32, 0, d[i]);
        assert_int_equal(mp_f32_bits(f[i]), mp_f32_bits(want));
    }
    mp_convert(back, MP_F64, f, MP_F32, 5);
    for (int i = 0; i < 5; i++)
        assert_memory_equal(&back[i], &(double){mp_load(f, MP_F32, (size_t)i)}, sizeof(double));
    mp_convert(h, MP_F16, d, MP_F64, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(h[i], mp_f32_to_f16((float)d[i]));
    uint16_t guard = 0x1234;
    float fguard = 5.0f;
    mp_convert(&guard, MP_F16, f, MP_F32, 0);
    mp_convert(&fguard, MP_F32, h, MP_F16, 0);
    mp_convert(&guard, MP_BF16, f, MP_F32, 0);
    assert_int_equal(guard, 0x1234);
    assert_true(fguard == 5.0f);
}

/* mp_half_add (the gradient sums over ranks) against the element-wise definition: random
 * pairs of every kind of half value (finite, subnormal, inf, NaN, sums that overflow), in
 * lengths that leave vector tails, bit for bit except for the payload of NaN results. */
static void test_half_add(void **state)
{
    (void)state;
    const mp_dtype types[2] = {MP_F16, MP_BF16};
    mp_rng rng;
    mp_rng_seed(&rng, 77, 0);
    const size_t n = 1 << 18;
    uint16_t *a = mp_alloc(n * 2, MP_MEM_WORKSPACE), *b = mp_alloc(n * 2, MP_MEM_WORKSPACE);
    uint16_t *want = mp_alloc(n * 2, MP_MEM_WORKSPACE);
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < n; i++) {
            a[i] = (uint16_t)mp_rng_next(&rng);
            /* half the pairs close in magnitude (overflowing sums, exact cancellation) */
            b[i] = i % 2 ? (uint16_t)mp_rng_next(&rng) : (uint16_t)(a[i] ^ (i % 4 ? 0x8000u : 1u));
            float x = types[t] == MP_F16 ? mp_f16_to_f32(a[i]) : mp_bf16_to_f32(a[i]);
            float y = types[t] == MP_F16 ? mp_f16_to_f32(b[i]) : mp_bf16_to_f32(b[i]);
            want[i] = types[t] == MP_F16 ? mp_f32_to_f16(x + y) : mp_f32_to_bf16(x + y);
        }
        for (size_t at = 0, k = 0; at < n; k++) {
            size_t len = chunk_lens[k % (sizeof chunk_lens / sizeof chunk_lens[0])];
            len = len < n - at ? len : n - at;
            mp_half_add(b + at, a + at, len, types[t]);
            at += len;
        }
        /* A NaN result may carry any payload (IEEE leaves propagation open, compilers swap the
         * operands of a commutative add, F16C quiets differently): any NaN will do there. */
        for (size_t i = 0; i < n; i++)
            if (b[i] != want[i] && !(isnan(mp_load(want, types[t], i)) &&
                                     isnan(mp_load(b, types[t], i))))
                fail_msg("%s: element %zu: 0x%04x + ... = 0x%04x, want 0x%04x",
                         mp_dtype_name(types[t]), i, a[i], b[i], want[i]);
    }
    mp_free(a);
    mp_free(b);
    mp_free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_patterns_to_f32),
        cmocka_unit_test(test_f32_to_half),
        cmocka_unit_test(test_nan_in_every_lane),
        cmocka_unit_test(test_other_pairs_and_empty),
        cmocka_unit_test(test_half_add),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
