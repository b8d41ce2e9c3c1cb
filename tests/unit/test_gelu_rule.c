/* engine/gelu_rule.h's float tanh and GELU: mp_tanh_f32 within 2 ulp of tanh (correctly rounded
 * from double) over a sweep of every 97th float in [0, 10] and their negatives, exact at 0, +-1
 * beyond the clamp and at infinities, NaN kept; and the CPU's GELU ops give, element for
 * element, the bits of the rule's scalar functions (the loop may be vectorised, the bits may
 * not change), which are the bits the GPU's kernels compute from the same header. */
#include "tests/util/test_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/gelu_rule.h"
#include "engine/ops.h"

/* The distance in units in the last place between floats a and b of one sign. */
static int64_t ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static void test_tanh_ulps(void **state)
{
    (void)state;
    int64_t worst = 0;
    float at = 0;
    for (uint32_t bits = 0; bits <= 0x41200000u; bits += 97) {
        float x = mp_bits_f32(bits);
        for (int sign = 0; sign < 2; sign++, x = -x) {
            float got = mp_tanh_f32(x), want = (float)tanh((double)x);
            if ((got < 0) != (want < 0) && want != 0)
                fail_msg("tanh(%.9g): %.9g has the wrong sign (want %.9g)", (double)x,
                         (double)got, (double)want);
            int64_t d = ulps(got, want);
            if (d > worst) {
                worst = d;
                at = x;
            }
        }
    }
    if (worst > 2)
        fail_msg("mp_tanh_f32 is %lld ulp from tanh at %.9g", (long long)worst, (double)at);
    print_message("mp_tanh_f32: at most %lld ulp from tanh (at %.9g)\n", (long long)worst,
                  (double)at);
}

static void test_tanh_special(void **state)
{
    (void)state;
    assert_true(mp_tanh_f32(0.0f) == 0.0f && !signbit(mp_tanh_f32(0.0f)));
    assert_true(mp_tanh_f32(-0.0f) == 0.0f && signbit(mp_tanh_f32(-0.0f)));
    const float big[] = {9.5f, 20.0f, 1e30f, INFINITY};
    for (int i = 0; i < 4; i++) {
        assert_true(mp_tanh_f32(big[i]) == 1.0f);
        assert_true(mp_tanh_f32(-big[i]) == -1.0f);
    }
    assert_true(isnan(mp_tanh_f32(NAN)));
    assert_true(mp_tanh_f32(1e-30f) == 1e-30f); /* tanh x = x below an ulp's reach */
}

/* The CPU's gelu_forward and gelu_backward against the rule's scalar functions, bit for bit,
 * on FP32 values spread over [-12, 12] with the specials. */
static void test_ops_match_rule(void **state)
{
    (void)state;
    const mp_ops *ops = mp_backend_cpu();
    enum { N = 4099 };
    int64_t shape[1] = {N};
    mp_tensor x = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_WORKSPACE);
    mp_tensor y = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_WORKSPACE);
    mp_tensor dy = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_WORKSPACE);
    mp_tensor dx = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_WORKSPACE);
    float *xv = x.data, *yv = y.data, *dyv = dy.data, *dxv = dx.data;
    for (int i = 0; i < N; i++) {
        xv[i] = -12.0f + 24.0f * (float)i / (N - 1);
        dyv[i] = 0.25f + (float)(i % 7);
    }
    xv[0] = INFINITY;
    xv[1] = -INFINITY;
    xv[2] = NAN;
    xv[3] = -0.0f;
    assert_int_equal(ops->gelu_forward(&x, &y), MP_OK);
    assert_int_equal(ops->gelu_backward(&x, &dy, &dx), MP_OK);
    for (int i = 0; i < N; i++) {
        float fy = mp_gelu_f32(xv[i]), fd = mp_gelu_grad_f32(xv[i], dyv[i]);
        if (memcmp(&fy, &yv[i], 4) != 0 || memcmp(&fd, &dxv[i], 4) != 0)
            fail_msg("x = %.9g: the op gives (%.9g, %.9g), the rule (%.9g, %.9g)",
                     (double)xv[i], (double)yv[i], (double)dxv[i], (double)fy, (double)fd);
    }
    mp_tensor *all[] = {&x, &y, &dy, &dx};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tanh_ulps),
        cmocka_unit_test(test_tanh_special),
        cmocka_unit_test(test_ops_match_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
