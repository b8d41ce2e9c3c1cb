/* The softmax cross-entropy row rules (engine/xent_rule.h) on their edge cases: the arg-max of a
 * warp (32 lanes each scanning every 32nd column, combined as the CUDA kernel's shuffles combine
 * them) is the serial scan's, ties, NaN, inf and short rows included; the loss and the gradient
 * of a row against FP64 formulas; a label outside [0, C) gives a zero gradient and raises the
 * state's overflow flag, which amp_check keeps; and the CPU op refuses such a label before it
 * writes anything. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/xent_rule.h"

enum { MAXC = 200, LANES = 32 };

static const mp_ops *ops;

/* The reference arg-max: the first NaN, else the first maximum. */
static int64_t ref_argmax(const float *x, int64_t cols)
{
    int64_t best = 0;
    for (int64_t j = 0; j < cols; j++) {
        if (isnan(x[j]))
            return j;
        if (x[j] > x[best])
            best = j;
    }
    return best;
}

/* The arg-max as the CUDA kernel forms it: lane l scans columns l, l + 32, ...; then, for
 * o = 16, 8, 4, 2, 1, lane l takes lane l + o's candidate when it comes first (a shuffle down
 * past the last lane returns the lane's own value). */
static int64_t warp_argmax(const float *x, int64_t cols)
{
    float v[LANES];
    int64_t j[LANES];
    mp_xent_coef_f32 c = mp_xent_coef_f32_make(0.0, 1.0, cols);
    for (int l = 0; l < LANES; l++) {
        mp_xent_span s = {x, NULL, MP_F32, 0, l, LANES};
        v[l] = -INFINITY;
        j[l] = cols;
        mp_xent_max_f32(&s, &c, &v[l], &j[l]);
    }
    for (int o = LANES / 2; o > 0; o /= 2) {
        float nv[LANES];
        int64_t nj[LANES];
        for (int l = 0; l < LANES; l++) {
            float ov = l + o < LANES ? v[l + o] : v[l];
            int64_t oj = l + o < LANES ? j[l + o] : j[l];
            bool take = mp_xent_before_f32(ov, oj, v[l], j[l]);
            nv[l] = take ? ov : v[l];
            nj[l] = take ? oj : j[l];
        }
        memcpy(v, nv, sizeof v);
        memcpy(j, nj, sizeof j);
    }
    return j[0];
}

static int64_t serial_argmax(const float *x, int64_t cols)
{
    mp_xent_coef_f32 c = mp_xent_coef_f32_make(0.0, 1.0, cols);
    mp_xent_span s = {x, NULL, MP_F32, 0, 0, 1};
    float mx = -INFINITY;
    int64_t best = cols;
    mp_xent_max_f32(&s, &c, &mx, &best);
    return best;
}

static void test_argmax_warp_equals_serial(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 51, 0);
    const int64_t widths[] = {1, 2, 5, 31, 32, 33, 63, 64, 65, 100, MAXC};
    float x[MAXC];
    for (int w = 0; w < 11; w++) {
        int64_t cols = widths[w];
        for (int trial = 0; trial < 400; trial++) {
            int kind = trial % 8;
            for (int64_t j = 0; j < cols; j++) /* few distinct values: ties everywhere */
                x[j] = kind == 0 ? 2.0f : (float)(int)(4 * mp_rng_uniform(&r)) - 2.0f;
            int64_t a = (int64_t)(mp_rng_uniform(&r) * (double)cols);
            int64_t b = (int64_t)(mp_rng_uniform(&r) * (double)cols);
            if (kind == 1)
                x[a] = NAN;
            if (kind == 2)
                x[a] = x[b] = NAN;
            if (kind == 3)
                for (int64_t j = 0; j < cols; j++)
                    x[j] = -INFINITY;
            if (kind == 4)
                x[a] = x[b] = INFINITY;
            if (kind == 5)
                x[a] = -0.0f, x[b] = 0.0f;
            if (kind == 6) {
                x[a] = NAN;
                x[b] = INFINITY;
            }
            int64_t want = ref_argmax(x, cols);
            if (serial_argmax(x, cols) != want || warp_argmax(x, cols) != want)
                fail_msg("cols %lld kind %d: serial %lld, warp %lld, want %lld", (long long)cols,
                         kind, (long long)serial_argmax(x, cols), (long long)warp_argmax(x, cols),
                         (long long)want);
        }
    }
}

/* Loss and gradient of one row against FP64 formulas, and the rows' edge cases. */
static void check_row(const float *x, int64_t cols, int32_t y, double eps, double g)
{
    float dx[MAXC];
    mp_xent_coef_f32 c = mp_xent_coef_f32_make(eps, g, cols);
    mp_xent_span s = {x, dx, MP_F32, 0, 0, 1};
    float mx = -INFINITY, sum = 0.0f, zsum = 0.0f;
    int64_t best = cols;
    mp_xent_max_f32(&s, &c, &mx, &best);
    mp_xent_sums_f32(&s, &c, mx, &sum, &zsum);
    float lse = mp_xent_lse_f32(mx, sum);
    float loss = mp_xent_loss_f32(&c, lse, x[y], zsum);
    mp_xent_grad_f32(&c, &s, lse, y);
    double m = -INFINITY, z = 0.0, e = 0.0;
    for (int64_t j = 0; j < cols; j++)
        m = fmax(m, x[j]);
    for (int64_t j = 0; j < cols; j++)
        e += exp((double)x[j] - m), z += x[j];
    double rlse = m + log(e);
    double rloss = (1 - eps) * (rlse - x[y]) + eps * (rlse - z / (double)cols);
    double tol = 64 * 0x1p-24 * (fabs(rlse) + fabs(rloss) + 1.0);
    if (fabs(loss - rloss) > tol)
        fail_msg("cols %lld: loss %.9g, FP64 %.9g", (long long)cols, (double)loss, rloss);
    /* p = exp(x - lse) inherits lse's FP32 rounding, relative to |lse| */
    double gtol = fabs(g) * 0x1p-24 * (16 + 2 * fabs(rlse)), gsum = 0.0;
    for (int64_t j = 0; j < cols; j++) {
        double p = exp((double)x[j] - rlse), t = (j == y ? 1 - eps : 0) + eps / (double)cols;
        double want = (p - t) * g, got = dx[j];
        if (fabs(got - want) > gtol)
            fail_msg("cols %lld: dx[%lld] %.9g, FP64 %.9g", (long long)cols, (long long)j, got,
                     want);
        gsum += got;
    }
    assert_true(fabs(gsum) <= (double)cols * gtol); /* a row's gradient sums to zero */
}

static void test_row_loss_and_gradient(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 52, 0);
    float x[MAXC];
    const int64_t widths[] = {1, 2, 10, 33, MAXC};
    for (int w = 0; w < 5; w++) {
        int64_t cols = widths[w];
        for (int64_t j = 0; j < cols; j++)
            x[j] = (float)(16 * mp_rng_uniform(&r) - 8);
        int32_t y = (int32_t)(cols - 1);
        check_row(x, cols, y, 0.0, 1.0);
        check_row(x, cols, 0, 0.1, 1024.0 / 128);
        for (int64_t j = 0; j < cols; j++) /* far from 0: the max is subtracted first */
            x[j] += 1e4f;
        check_row(x, cols, y, 0.1, 0.5);
        for (int64_t j = 0; j < cols; j++) /* all equal: loss log C, gradient (1/C - t) g */
            x[j] = -3.0f;
        check_row(x, cols, y, 0.2, 2.0);
    }
    float big[3] = {80.0f, -80.0f, 0.0f}; /* exp(80) overflows FP32: only differences are taken */
    check_row(big, 3, 1, 0.1, 1.0);
}

/* A row whose label is outside [0, C): zero gradient (+0 in every dtype, only the span's own
 * columns), and the step marked overflowed. */
static void test_bad_label_row(void **state)
{
    (void)state;
    const mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    enum { C = 70 };
    const int32_t bad[] = {-1, C, INT32_MIN, INT32_MAX};
    for (int d = 0; d < 4; d++)
        for (int k = 0; k < 4; k++) {
            double x[C], dx[C];
            for (int j = 0; j < C; j++) {
                mp_store(x, dts[d], (size_t)j, j * 0.25 - 3);
                mp_store(dx, dts[d], (size_t)j, 7.0);
            }
            mp_xent_span s = {x, dx, dts[d], 0, 3, 32}; /* lane 3 of a warp */
            if (dts[d] == MP_F64) {
                mp_xent_coef_f64 c = mp_xent_coef_f64_make(0.1, 2.0, C);
                mp_xent_grad_f64(&c, &s, 1.5, bad[k]);
            } else {
                mp_xent_coef_f32 c = mp_xent_coef_f32_make(0.1, 2.0, C);
                mp_xent_grad_f32(&c, &s, 1.5f, bad[k]);
            }
            for (int j = 0; j < C; j++) {
                double v = mp_load(dx, dts[d], (size_t)j);
                if (j % 32 == 3)
                    assert_true(v == 0.0 && !signbit(v));
                else
                    assert_true(v == 7.0);
            }
        }
    assert_false(mp_xent_label_ok(-1, 10) || mp_xent_label_ok(10, 10));
    assert_true(mp_xent_label_ok(0, 10) && mp_xent_label_ok(9, 10));
    mp_amp_state st;
    memset(&st, 0, sizeof st);
    st.scaler.scale = 1024.0;
    mp_xent_bad_label(NULL);
    mp_xent_bad_label(&st);
    assert_true(st.found_inf != 0.0);
    assert_true(st.bad_labels != 0.0); /* for the host's next host point (src/train.c) */
    assert_true(mp_xent_grad_factor(0.5, &st, 4) == 128.0);
    assert_true(mp_xent_grad_factor(0.5, NULL, 4) == 0.125);
    /* amp_check, which runs after the loss, keeps the flag: the step stays skipped */
    int64_t shape[1] = {8};
    mp_tensor g = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_WORKSPACE);
    assert_int_equal(ops->fill(&g, 0.5), MP_OK);
    assert_int_equal(ops->amp_check(&g, 1.0, 65504.0, &st), MP_OK);
    assert_true(st.found_inf != 0.0);
    mp_scaler_config sc = {.dynamic = true, .growth_factor = 2.0, .backoff_factor = 0.5,
                           .growth_interval = 2000, .hysteresis = 1, .min_scale = 1.0,
                           .max_scale = 65536.0, .margin = -1};
    assert_int_equal(ops->amp_update(&sc, &st), MP_OK);
    assert_true(st.found_inf == 0.0 && st.bad_labels != 0.0); /* the flag ends, the mark stays */
    mp_tensor_free(&g);
}

/* The CPU op refuses a bad label before it writes anything, and counts a row whose logits
 * hold a NaN as a hit only when the label is the first NaN. */
static void test_cpu_op_labels(void **state)
{
    (void)state;
    int64_t shape[2] = {3, 4};
    mp_tensor z = mp_tensor_alloc(MP_F32, 2, shape, MP_MEM_WORKSPACE);
    mp_tensor dz = mp_tensor_alloc(MP_F32, 2, shape, MP_MEM_WORKSPACE);
    const float v[12] = {1, 2, 3, 4, 9, NAN, 0, NAN, 5, 5, 1, 1};
    memcpy(z.data, v, sizeof v);
    assert_int_equal(ops->fill(&dz, 7.0), MP_OK);
    int32_t labels[3] = {3, 1, 4};
    mp_xent_result res;
    assert_int_equal(ops->softmax_xent(&z, labels, 0.0, 1.0, NULL, &res, &dz), MP_EINTERNAL);
    for (int i = 0; i < 12; i++)
        assert_true(((float *)dz.data)[i] == 7.0f);
    labels[2] = 0;
    assert_int_equal(ops->softmax_xent(&z, labels, 0.0, 1.0, NULL, &res, &dz), MP_OK);
    assert_int_equal(res.correct, 3); /* 3: the max; 1: the first NaN; 0: the first of a tie */
    labels[1] = 3;
    assert_int_equal(ops->softmax_xent(&z, labels, 0.0, 1.0, NULL, &res, NULL), MP_OK);
    assert_int_equal(res.correct, 2);
    mp_tensor_free(&z);
    mp_tensor_free(&dz);
}

static int setup(void **state)
{
    (void)state;
    ops = mp_backend_cpu();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax_warp_equals_serial),
        cmocka_unit_test(test_row_loss_and_gradient),
        cmocka_unit_test(test_bad_label_row),
        cmocka_unit_test(test_cpu_op_labels),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
