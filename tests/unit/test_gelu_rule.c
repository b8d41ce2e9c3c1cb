/* engine/gelu_rule.h's float GELU: forward and gradient within a few ulp of the same formulas
 * evaluated in double from the rule's own u (the float u's rounding is the input's conditioning,
 * PyTorch's too), over a sweep of every 97th float in [0, 12] and their negatives; the specials
 * (0, -0, +-inf, NaN, large negative x) as the tanh form gives them; and the CPU's GELU ops give,
 * element for element, the bits of the rule's scalar functions (the loop may be vectorised, the
 * bits may not change), which are the bits the GPU's kernels compute from the same header. */
#include "tests/util/test_util.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/gelu_rule.h"
#include "engine/ops.h"

/* The size of one unit in the last place of float f, at least 2^-100: an error smaller than
 * that counts as none (for x < -9.3 e^(-2|u|) leaves the exponential's range, which rounds it to
 * 0, and GELU and its gradient with it, a hundred binades below any activation's scale). */
static double ulp_of(double f)
{
    int e;
    frexp(f, &e);
    double u = ldexp(1.0, e - 24);
    return u > 0x1p-100 ? u : 0x1p-100;
}

/* The sweep's largest error of the forward (fwd) and the gradient (grad) in ulp, and where. */
typedef struct worst {
    double fwd, grad;
    float fwd_at, grad_at;
} worst;

/* Checks x against the double reference and updates w. The gradient's error is counted in ulp
 * of its larger term (s or the x u' part), as the two may cancel near x = -0.75. The bounds come
 * from the operations: the forward's exponential (1 ulp) and three roundings (1.5) make 2.5 ulp
 * of the exact value, up to 4 counted in the result's binade; the gradient's u' (five
 * roundings), exponential and five more products and quotients make about 6, bound 8. */
static void check_one(float x, worst *w)
{
    double u = (double)mp_gelu_u_f32(x), du = MP_GELU_K * (1.0 + 3.0 * MP_GELU_C * x * x);
    double e = exp(-2.0 * fabs(u)), s = (u < 0 ? e : 1.0) / (1.0 + e);
    double y = (double)x * s, t2 = 2.0 * x * du * e / ((1.0 + e) * (1.0 + e));
    double fe = fabs((double)mp_gelu_f32(x) - y) / ulp_of(y);
    double ge = fabs((double)mp_gelu_grad_f32(x, 1.0f) - (s + t2)) /
                ulp_of(fabs(s) > fabs(t2) ? s : t2);
    if (!(fe <= w->fwd)) { /* a NaN counts */
        w->fwd = fe;
        w->fwd_at = x;
    }
    if (!(ge <= w->grad)) {
        w->grad = ge;
        w->grad_at = x;
    }
}

static void test_gelu_ulps(void **state)
{
    (void)state;
    worst w = {0};
    for (uint32_t bits = 0; bits <= 0x41400000u; bits += 97) /* [0, 12] */
        for (int sign = 0; sign < 2; sign++)
            check_one(sign ? -mp_bits_f32(bits) : mp_bits_f32(bits), &w);
    print_message("GELU in float: forward within %.2f ulp (at %.9g), gradient %.2f (at %.9g)\n",
                  w.fwd, (double)w.fwd_at, w.grad, (double)w.grad_at);
    if (w.fwd > 4 || w.grad > 8)
        fail_msg("GELU in float is %.2f ulp off at %.9g (gradient %.2f at %.9g)", w.fwd,
                 (double)w.fwd_at, w.grad, (double)w.grad_at);
}

static void test_gelu_special(void **state)
{
    (void)state;
    assert_true(mp_gelu_f32(0.0f) == 0.0f && !signbit(mp_gelu_f32(0.0f)));
    assert_true(mp_gelu_f32(-0.0f) == 0.0f && signbit(mp_gelu_f32(-0.0f)));
    assert_true(mp_gelu_f32(INFINITY) == INFINITY);
    assert_true(isnan(mp_gelu_f32(-INFINITY))); /* -inf (1 + tanh(-inf)) = -inf 0 */
    assert_true(isnan(mp_gelu_f32(NAN)) && isnan(mp_gelu_grad_f32(NAN, 1.0f)));
    assert_true(mp_gelu_f32(-20.0f) == 0.0f && signbit(mp_gelu_f32(-20.0f)));
    assert_true(mp_gelu_f32(20.0f) == 20.0f && mp_gelu_grad_f32(20.0f, 3.0f) == 3.0f);
    assert_true(mp_gelu_grad_f32(-20.0f, 3.0f) == 0.0f);
    assert_true(mp_gelu_grad_f32(0.0f, 3.0f) == 1.5f);
    /* x u' overflows float; u' E / (1 + E)^2 is 0; from 2^64 on u' is inf, at the end x too */
    const float huge[5] = {1e13f, 1e18f, 1.9e19f, FLT_MAX, INFINITY};
    for (int i = 0; i < 4; i++) {
        assert_true(mp_gelu_f32(huge[i]) == huge[i] && mp_gelu_grad_f32(huge[i], 3.0f) == 3.0f);
        assert_true(mp_gelu_f32(-huge[i]) == 0.0f && mp_gelu_grad_f32(-huge[i], 3.0f) == 0.0f);
    }
    assert_true(mp_gelu_grad_f32(huge[4], 3.0f) == 3.0f);
    assert_true(mp_gelu_grad_f32(-huge[4], 3.0f) == 0.0f);
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
        cmocka_unit_test(test_gelu_ulps),
        cmocka_unit_test(test_gelu_special),
        cmocka_unit_test(test_ops_match_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
