/* The unscale-and-check rule (engine/check_rule.h) on its edge cases: an element is non-finite
 * when its unscaled value is inf or NaN (a finite gradient that overflows when unscaled
 * included), the fill ignores NaN and sees inf, and splitting the elements among threads as the
 * CUDA kernel's grid-stride loop does and combining the partial results (sum, or, max, and the
 * fill as an integer MAX on its bits) gives the serial pass's flag and fill exactly and its sum
 * of squares up to rounding. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/check_rule.h"
#include "engine/rng.h"

enum { N = 3001 };

static mp_check_f32 serial(const float *g, int64_t n, float m)
{
    mp_check_f32 c = {0.0, 0.0f, false};
    for (int64_t i = 0; i < n; i++)
        mp_check_f32_elem(&c, g[i], m);
    return c;
}

static void test_element_edges(void **state)
{
    (void)state;
    const struct {
        float g, m;
        bool bad;
        float amax;
    } cases[] = {
        {1.5f, 2.0f, false, 1.5f},     {-0.0f, 1.0f, false, 0.0f},
        {INFINITY, 0.5f, true, INFINITY}, {-INFINITY, 1.0f, true, INFINITY},
        {NAN, 1.0f, true, 0.0f},       {3e38f, 4.0f, true, 3e38f}, /* overflows when unscaled */
        {1e-45f, 1e-3f, false, 1e-45f}, {-65504.0f, 0.0f, false, 65504.0f},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mp_check_f32 c = serial(&cases[k].g, 1, cases[k].m);
        assert_int_equal(c.bad, cases[k].bad);
        assert_true(c.amax == cases[k].amax);
        double v = (double)(cases[k].g * cases[k].m);
        if (!cases[k].bad)
            assert_true(c.sumsq == v * v);
    }
    mp_check_f64 d = {0.0, 0.0, false};
    mp_check_f64_elem(&d, 1e300, 1e10); /* inf only in FP64's own range */
    assert_true(d.bad && d.amax == 1e300);
    mp_check_f64 e = {0.0, 0.0, false};
    mp_check_f64_elem(&e, 3e38, 4.0); /* beyond FP32, finite in FP64 */
    assert_false(e.bad);
    assert_true(e.sumsq == (3e38 * 4.0) * (3e38 * 4.0));
}

static void test_mult_and_fill(void **state)
{
    (void)state;
    mp_amp_state st;
    memset(&st, 0, sizeof st);
    st.scaler.scale = 1024.0;
    assert_true(mp_check_mult(0.5, &st) == 0.5 / 1024.0);
    assert_true(mp_check_mult(0.5, NULL) == 0.5);
    assert_true(mp_check_fill(32752.0, 65504.0) == 0.5);
    assert_true(mp_check_fill(INFINITY, 65504.0) == INFINITY);
    assert_true(mp_check_fill(7.0, 0.0) == 0.0); /* FP32 gradients: no half type to fill */
}

/* The fill's combine on the GPU: atomicMax of the bits of non-negative doubles. */
static uint64_t bits(double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
}

static void test_threads_combine_as_serial(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 61, 0);
    static float g[N];
    for (int pattern = 0; pattern < 4; pattern++) {
        for (int64_t i = 0; i < N; i++)
            g[i] = (float)(8 * mp_rng_uniform(&r) - 4);
        if (pattern == 1)
            g[N / 2] = NAN;
        if (pattern == 2)
            g[17] = -INFINITY;
        if (pattern == 3)
            g[N - 1] = 3e38f;
        const float m = 0.75f;
        const double limit = 65504.0;
        mp_check_f32 want = serial(g, N, m);
        for (int threads = 1; threads <= 300; threads += 37) {
            double sumsq = 0.0;
            bool bad = false;
            uint64_t fill = bits(0.0);
            for (int t = 0; t < threads; t++) {
                mp_check_f32 c = {0.0, 0.0f, false};
                for (int64_t i = t; i < N; i += threads)
                    mp_check_f32_elem(&c, g[i], m);
                sumsq += c.sumsq;
                bad = bad || c.bad;
                uint64_t f = bits(mp_check_fill(c.amax, limit));
                fill = f > fill ? f : fill;
            }
            assert_int_equal(bad, want.bad);
            assert_true(fill == bits(mp_check_fill(want.amax, limit)));
            if (!want.bad)
                assert_true(fabs(sumsq - want.sumsq) <= 1e-12 * want.sumsq);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_element_edges),
        cmocka_unit_test(test_mult_and_fill),
        cmocka_unit_test(test_threads_combine_as_serial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
