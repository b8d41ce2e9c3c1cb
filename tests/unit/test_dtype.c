/* Half conversions against independent references: every one of the 65,536 fp16 bit patterns
 * against the binary16 definition (a formula in double) and, where the compiler has _Float16
 * (GCC 12, clang 15 on x86-64), gcc's _Float16 (libgcc's soft-float conversions) too;
 * float->fp16 rounding over ties, subnormals and random floats against a nearest-value search
 * (and _Float16 where there is one), and float->bf16 rounding against a nearest-value search. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/dtype.h"
#include "engine/rng.h"

#ifdef __FLT16_MAX__
__extension__ typedef _Float16 ref_half;
#endif

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of fp16 bits u by the binary16 definition: sign, 5-bit exponent biased by 15,
 * 10-bit fraction (subnormals at exponent 0; infinities and NaN at 31). Exact in double. */
static double f16_value(uint16_t u)
{
    int e = (u >> 10) & 0x1f, m = u & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return u & 0x8000 ? -v : v;
}

/* f rounded to fp16, nearest with ties to the even pattern, by a search of the finite values
 * (0x7e00 for a NaN; from 65520, halfway past the largest finite 65504, infinity). The
 * differences are exact in double. Checked against _Float16 where the compiler has it. */
static uint16_t ref_f32_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0, h;
    double a = fabs((double)f);
    if (isnan(f))
        h = 0x7e00;
    else if (a >= 65520.0)
        h = sign | 0x7c00;
    else {
        unsigned lo = 0, hi = 0x7bff; /* the largest pattern whose value is at most a */
        while (lo < hi) {
            unsigned mid = (lo + hi + 1) / 2;
            if (f16_value((uint16_t)mid) <= a)
                lo = mid;
            else
                hi = mid - 1;
        }
        if (lo < 0x7bff) {
            double below = a - f16_value((uint16_t)lo), above = f16_value((uint16_t)(lo + 1)) - a;
            lo += above < below || (above == below && (lo & 1));
        }
        h = (uint16_t)(sign | lo);
    }
#ifdef __FLT16_MAX__
    ref_half r = (ref_half)f;
    uint16_t u;
    memcpy(&u, &r, 2);
    if (!isnan(f) && u != h)
        fail_msg("the search gives fp16 0x%04x for f32 0x%08x, _Float16 0x%04x", h, fbits(f), u);
#endif
    return h;
}

static float ref_f16_to_f32(uint16_t u)
{
    float v = (float)f16_value(u);
#ifdef __FLT16_MAX__
    ref_half r;
    memcpy(&r, &u, 2);
    float w = (float)r;
    if (!(isnan(v) && isnan(w)) && memcmp(&v, &w, 4) != 0)
        fail_msg("fp16 0x%04x: the definition gives %.9g, _Float16 %.9g", u, (double)v, (double)w);
#endif
    return v;
}

static void check_f32_to_f16(float f)
{
    uint16_t got = mp_f32_to_f16(f), want = ref_f32_to_f16(f);
    if (isnan(f)) {
        if ((got & 0x7c00) != 0x7c00 || (got & 0x3ff) == 0)
            fail_msg("NaN 0x%08x converted to non-NaN 0x%04x", fbits(f), got);
        return;
    }
    if (got != want)
        fail_msg("f32 0x%08x (%.9g) -> fp16 0x%04x, want 0x%04x", fbits(f), (double)f, got, want);
}

static void test_f16_to_f32_all_patterns(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float got = mp_f16_to_f32((uint16_t)h), want = ref_f16_to_f32((uint16_t)h);
        if (isnan(want)) {
            assert_true(isnan(got));
            continue;
        }
        if (fbits(got) != fbits(want))
            fail_msg("fp16 0x%04x -> %.9g, want %.9g", h, (double)got, (double)want);
    }
}

static void test_f32_to_f16_every_value_and_midpoint(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = ref_f16_to_f32((uint16_t)h);
        check_f32_to_f16(v);
        if (isnan(v) || isinf(v))
            continue;
        /* The exact midpoint to the next pattern up in magnitude, and floats either side of it. */
        uint16_t next = (uint16_t)(h + 1);
        if ((next & 0x7fff) > 0x7c00)
            continue;
        float up = ref_f16_to_f32(next);
        double mid = ((double)v + (double)up) / 2;
        float m = (float)mid;
        assert_true((double)m == mid || isinf(up));
        check_f32_to_f16(m);
        check_f32_to_f16(nextafterf(m, 0.0f));
        check_f32_to_f16(nextafterf(m, INFINITY * (m < 0 ? -1 : 1)));
    }
}

static void test_f32_to_f16_special_values(void **state)
{
    (void)state;
    assert_int_equal(mp_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(mp_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(mp_f32_to_f16(65520.0f), 0x7c00); /* ties to even rounds up to inf */
    assert_int_equal(mp_f32_to_f16(1e10f), 0x7c00);
    assert_int_equal(mp_f32_to_f16(-INFINITY), 0xfc00);
    assert_int_equal(mp_f32_to_f16(0x1p-24f), 0x0001); /* smallest subnormal kept */
    assert_int_equal(mp_f32_to_f16(0x1p-25f), 0x0000); /* half of it ties to even: zero */
    assert_int_equal(mp_f32_to_f16(0x1.8p-25f), 0x0001);
    assert_int_equal(mp_f32_to_f16(-0.0f), 0x8000);
    check_f32_to_f16(NAN);
}

static void test_f32_to_f16_random(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 7, 0);
    for (int i = 0; i < 4000000; i++) {
        uint32_t u = (uint32_t)mp_rng_next(&r);
        if (i & 1) /* concentrate half of the samples on the fp16 range, subnormals included */
            u = (u & 0x80001fffu) | ((0x33000000u + (u & 0x0fffe000u) % 0x14800000u) & 0x7fffe000u);
        check_f32_to_f16(bitsf(u));
    }
}

/* The nearest bf16 to f by search, ties to the even pattern, overflow past max + ulp/2 to inf. */
static uint16_t ref_f32_to_bf16(float f)
{
    uint32_t u = fbits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double vlo = mp_bf16_to_f32(lo);
    double vhi = (hi & 0x7f80) == 0x7f80 ? copysign(0x1p128, f) : (double)mp_bf16_to_f32(hi);
    double dlo = fabs((double)f - vlo), dhi = fabs(vhi - (double)f);
    if (dlo < dhi)
        return lo;
    if (dhi < dlo)
        return hi;
    return (lo & 1) ? hi : lo;
}

static void test_bf16_round_trip_and_random(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = mp_bf16_to_f32((uint16_t)h);
        assert_int_equal(fbits(v), h << 16);
        if (!isnan(v))
            assert_int_equal(mp_f32_to_bf16(v), h);
        else
            assert_true(isnan(mp_bf16_to_f32(mp_f32_to_bf16(v))));
        /* exact ties below every pattern */
        uint32_t tie = (h << 16) | 0x8000u;
        if (!isnan(bitsf(tie)) && !isinf(bitsf(tie)))
            assert_int_equal(mp_f32_to_bf16(bitsf(tie)), ref_f32_to_bf16(bitsf(tie)));
    }
    mp_rng r;
    mp_rng_seed(&r, 11, 0);
    for (int i = 0; i < 4000000; i++) {
        float f = bitsf((uint32_t)mp_rng_next(&r));
        if (isnan(f)) {
            assert_true(isnan(mp_bf16_to_f32(mp_f32_to_bf16(f))));
            continue;
        }
        uint16_t got = mp_f32_to_bf16(f), want = ref_f32_to_bf16(f);
        if (got != want)
            fail_msg("f32 0x%08x -> bf16 0x%04x, want 0x%04x", fbits(f), got, want);
    }
    assert_int_equal(mp_f32_to_bf16(3.4028235e38f), 0x7f80); /* FLT_MAX rounds up to inf */
    assert_int_equal(mp_f32_to_bf16(0x1p-133f), 0x0001);      /* subnormal kept */
}

/* mp_dtype_overflow: the least magnitude mp_convert rounds to inf, for both signs; the float
 * just below it converts to the largest finite value. */
static void test_overflow_threshold(void **state)
{
    (void)state;
    const mp_dtype dts[] = {MP_F16, MP_BF16, MP_F32};
    const mp_dtype from[] = {MP_F32, MP_F32, MP_F64};
    for (int k = 0; k < 3; k++) {
        double lim = mp_dtype_overflow(dts[k]);
        double below = from[k] == MP_F32 ? (double)nextafterf((float)lim, 0.0f)
                                         : nextafter(lim, 0.0);
        for (int sign = -1; sign <= 1; sign += 2) {
            double v[2] = {sign * lim, sign * below};
            unsigned char src[16], dst[16];
            for (int i = 0; i < 2; i++)
                mp_store(src, from[k], (size_t)i, v[i]);
            mp_convert(dst, dts[k], src, from[k], 2);
            assert_true(isinf(mp_load(dst, dts[k], 0)));
            assert_true(mp_load(dst, dts[k], 1) == sign * mp_dtype_max(dts[k]));
        }
    }
    assert_true(isinf(mp_dtype_overflow(MP_F64)));
}

static void test_convert_and_names(void **state)
{
    (void)state;
    float src[4] = {1.0f, -2.5f, 65520.0f, 0x1p-30f};
    uint16_t h[4];
    float back[4];
    mp_convert(h, MP_F16, src, MP_F32, 4);
    mp_convert(back, MP_F32, h, MP_F16, 4);
    assert_true(back[0] == 1.0f && back[1] == -2.5f && isinf(back[2]) && back[3] == 0.0f);
    mp_dtype dt;
    assert_int_equal(mp_dtype_parse("bf16", &dt), 0);
    assert_int_equal(dt, MP_BF16);
    assert_int_equal(mp_dtype_parse("half", &dt), -1);
    assert_string_equal(mp_dtype_name(MP_F16), "fp16");
    assert_int_equal(mp_dtype_size(MP_F64), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_to_f32_all_patterns),
        cmocka_unit_test(test_f32_to_f16_every_value_and_midpoint),
        cmocka_unit_test(test_f32_to_f16_special_values),
        cmocka_unit_test(test_f32_to_f16_random),
        cmocka_unit_test(test_bf16_round_trip_and_random),
        cmocka_unit_test(test_overflow_threshold),
        cmocka_unit_test(test_convert_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
