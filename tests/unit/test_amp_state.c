/* The device-state path of the CPU reference (mp_amp_state, docs/ARCHITECTURE.md §2): amp_check
 * equals grad_stats at mult / scale, optim_step with a state equals the host-driven step with the
 * multiplier and step count the state implies (clipping included), a step with found_inf set
 * leaves every buffer bitwise unchanged, and amp_update is mp_scaler_update plus the step count,
 * the cleared flags and the first data error kept. The CUDA backend is held to these same
 * results by tests/gpu. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/check_rule.h"
#include "engine/ops.h"
#include "engine/rng.h"

enum { N = 1000 };

static const mp_ops *ops;

static mp_tensor random_tensor(mp_dtype dt, mp_rng *r, double lo, double hi)
{
    int64_t shape[1] = {N};
    mp_tensor t = mp_tensor_alloc(dt, 1, shape, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < N; i++)
        mp_store(t.data, dt, (size_t)i, lo + (hi - lo) * mp_rng_uniform(r));
    return t;
}

static mp_tensor clone(const mp_tensor *t)
{
    mp_tensor c = mp_tensor_alloc(t->dtype, t->ndim, t->shape, MP_MEM_WORKSPACE);
    memcpy(c.data, t->data, (size_t)mp_tensor_bytes(t));
    return c;
}

static mp_amp_state state(double scale, int64_t steps)
{
    mp_amp_state st;
    memset(&st, 0, sizeof st);
    st.scaler.scale = scale;
    st.scaler.hysteresis_left = 1;
    st.steps = steps;
    return st;
}

/* The CPU's sum of squares, bit for bit: element e into partial sum e mod 8, in element order
 * (across the pass's 1024-element blocks), the partials added ((0 + 1) + (2 + 3)) + ((4 + 5) +
 * (6 + 7)), each element by check_rule.h's rule; the same from the half types, widened. */
static void test_cpu_sumsq_order(void **unused)
{
    (void)unused;
    mp_rng r;
    mp_rng_seed(&r, 8, 0);
    mp_dtype dts[] = {MP_F32, MP_BF16, MP_F16};
    const int64_t n = 2 * 1024 + 13, shape[1] = {n}; /* two whole blocks and a tail */
    for (int d = 0; d < 3; d++) {
        mp_tensor g = mp_tensor_alloc(dts[d], 1, shape, MP_MEM_WORKSPACE);
        for (int64_t e = 0; e < n; e++) /* magnitudes 2^-12 .. 2^12: the order shows in the sum */
            mp_store(g.data, dts[d], (size_t)e,
                     (e % 2 ? -1 : 1) * exp2(24 * mp_rng_uniform(&r) - 12));
        mp_check_f32 lane[8];
        memset(lane, 0, sizeof lane);
        const float m = (float)(0.5 / 1024.0);
        for (int64_t e = 0; e < n; e++)
            mp_check_f32_elem(&lane[e % 8], (float)mp_load(g.data, dts[d], (size_t)e), m);
        double want = ((lane[0].sumsq + lane[1].sumsq) + (lane[2].sumsq + lane[3].sumsq)) +
                      ((lane[4].sumsq + lane[5].sumsq) + (lane[6].sumsq + lane[7].sumsq));
        double s = 0.0;
        bool bad = false;
        assert_int_equal(ops->grad_stats(&g, 0.5 / 1024.0, &s, &bad), MP_OK);
        assert_true(s == want);
        mp_tensor_free(&g);
    }
}

static void test_check_equals_grad_stats(void **unused)
{
    (void)unused;
    mp_rng r;
    mp_rng_seed(&r, 5, 0);
    mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16};
    for (int d = 0; d < 3; d++) {
        mp_tensor g = random_tensor(dts[d], &r, -4, 4);
        mp_amp_state st = state(1024.0, 0);
        double s = 0.0;
        bool bad = false;
        assert_int_equal(ops->amp_check(&g, 0.5, 0.0, &st), MP_OK);
        assert_int_equal(ops->grad_stats(&g, 0.5 / 1024.0, &s, &bad), MP_OK);
        assert_true(s > 0.0);
        assert_true(st.sumsq == s);
        assert_false(st.found_inf);
        assert_true(st.fill == 0.0); /* limit 0: no half type to fill */
        double amax = 0.0;
        for (int64_t i = 0; i < mp_tensor_numel(&g); i++)
            amax = fmax(amax, fabs(mp_load(g.data, g.dtype, (size_t)i)));
        st.fill = 1e-9;
        assert_int_equal(ops->amp_check(&g, 0.5, 65504.0, &st), MP_OK);
        assert_true(amax > 2.0 && st.fill == amax / 65504.0); /* raised to max|g| / limit */
        assert_int_equal(ops->amp_check(&g, 0.5, 1e9, &st), MP_OK);
        assert_true(st.fill == amax / 65504.0); /* never lowered */
        mp_store(g.data, g.dtype, 17, INFINITY);
        assert_int_equal(ops->amp_check(&g, 0.5, 0.0, &st), MP_OK);
        assert_true(st.found_inf != 0);
        mp_tensor_free(&g);
    }
}

/* One step of `a` on fresh copies, host-driven (st NULL) or from `st`. */
static void step(const mp_optim_args *a, const mp_amp_state *st, mp_tensor *w, mp_tensor *copy,
                 const mp_tensor *g, mp_tensor *s1, mp_tensor *s2)
{
    assert_int_equal(ops->optim_step(a, st, w, copy, g, s1, s2), MP_OK);
}

static void check_state_step(mp_optim_kind kind, double momentum, bool nesterov, double clip)
{
    mp_rng r;
    mp_rng_seed(&r, 6, (uint64_t)kind * 8 + (uint64_t)nesterov);
    mp_tensor w = random_tensor(MP_F32, &r, -1, 1), g = random_tensor(MP_F16, &r, -512, 512);
    mp_tensor copy = mp_tensor_alloc(MP_F16, 1, w.shape, MP_MEM_WORKSPACE);
    mp_tensor s1 = random_tensor(MP_F32, &r, -0.1, 0.1), s2 = random_tensor(MP_F32, &r, 0, 0.01);
    bool adam = kind != MP_OPTIM_SGD, mom = adam || momentum != 0.0;
    mp_optim_args a = {.kind = kind, .lr = 0.01, .weight_decay = 1e-4, .momentum = momentum,
                       .nesterov = nesterov, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                       .grad_scale = 0.5, .max_norm = clip};
    mp_amp_state st = state(256.0, 6);
    assert_int_equal(ops->amp_check(&g, a.grad_scale, 0.0, &st), MP_OK);
    double inv = a.grad_scale / st.scaler.scale, norm = sqrt(st.sumsq), coef = 1.0;
    if (clip > 0.0 && norm > clip)
        coef = clip / (norm + 1e-6);
    if (clip > 0.0)
        assert_true(coef < 1.0); /* the clipping branch is taken */
    mp_tensor w2 = clone(&w), c2 = clone(&copy), s12 = clone(&s1), s22 = clone(&s2);
    step(&a, &st, &w, &copy, &g, mom ? &s1 : NULL, adam ? &s2 : NULL);
    mp_optim_args h = a;
    h.grad_scale = inv * coef;
    h.step = st.steps + 1;
    step(&h, NULL, &w2, &c2, &g, mom ? &s12 : NULL, adam ? &s22 : NULL);
    assert_memory_equal(w.data, w2.data, (size_t)mp_tensor_bytes(&w));
    assert_memory_equal(copy.data, c2.data, (size_t)mp_tensor_bytes(&copy));
    assert_memory_equal(s1.data, s12.data, (size_t)mp_tensor_bytes(&s1));
    assert_memory_equal(s2.data, s22.data, (size_t)mp_tensor_bytes(&s2));
    /* An overflowed step touches nothing. */
    st.found_inf = 1;
    step(&a, &st, &w, &copy, &g, mom ? &s1 : NULL, adam ? &s2 : NULL);
    assert_memory_equal(w.data, w2.data, (size_t)mp_tensor_bytes(&w));
    assert_memory_equal(copy.data, c2.data, (size_t)mp_tensor_bytes(&copy));
    assert_memory_equal(s1.data, s12.data, (size_t)mp_tensor_bytes(&s1));
    assert_memory_equal(s2.data, s22.data, (size_t)mp_tensor_bytes(&s2));
    mp_tensor *all[] = {&w, &g, &copy, &s1, &s2, &w2, &c2, &s12, &s22};
    for (int i = 0; i < 9; i++)
        mp_tensor_free(all[i]);
}

static void test_state_step_equals_host_step(void **unused)
{
    (void)unused;
    check_state_step(MP_OPTIM_SGD, 0.0, false, 0.0);
    check_state_step(MP_OPTIM_SGD, 0.9, false, 0.0);
    check_state_step(MP_OPTIM_SGD, 0.9, true, 0.0);
    check_state_step(MP_OPTIM_ADAM, 0.0, false, 0.0);
    check_state_step(MP_OPTIM_ADAMW, 0.0, false, 0.0);
    check_state_step(MP_OPTIM_SGD, 0.9, false, 1e-3);
    check_state_step(MP_OPTIM_ADAMW, 0.0, false, 1e-3);
}

static void test_update_is_scaler_update(void **unused)
{
    (void)unused;
    mp_scaler_config c = {.dynamic = true, .init_scale = 1024, .growth_factor = 2,
                          .backoff_factor = 0.5, .growth_interval = 3, .hysteresis = 2,
                          .min_scale = 1, .max_scale = 4096, .max_consecutive_skips = 0,
                          .margin = 1};
    mp_amp_state st = state(0, 0);
    st.scaler = mp_scaler_init(&c);
    mp_scaler_state ref = mp_scaler_init(&c);
    int64_t steps = 0;
    double lo = ref.scale, hi = ref.scale;
    const int pattern[] = {0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0};
    /* the fill of each step: 0.9 at step 9 halves the scale (margin 1) */
    const double st_fill[] = {0.1, 0.2, 0.1, 0.3, 0.1, 0.1, 0.1, 0.1,
                              0.9, 0.1, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1};
    for (size_t i = 0; i < sizeof pattern / sizeof pattern[0]; i++) {
        st.found_inf = pattern[i];
        st.sumsq = 3.0;
        st.fill = st_fill[i];
        st.stop = (double)i;
        double used = st.scaler.scale;
        assert_int_equal(ops->amp_update(&c, &st), MP_OK);
        assert_true(st.step_scale == used); /* the scale the step used, for the log */
        assert_true(st.stop == (double)i);  /* the stop request is the agreement's, kept */
        mp_scaler_update(&ref, &c, pattern[i] != 0, st_fill[i]);
        steps += !pattern[i];
        assert_memory_equal(&st.scaler, &ref, sizeof ref);
        assert_int_equal(st.steps, steps);
        assert_true(st.found_inf == 0.0);
        assert_true(st.sumsq == 0.0);
        assert_true(st.fill == 0.0);
        lo = fmin(lo, ref.scale);
        hi = fmax(hi, ref.scale);
    }
    assert_true(lo < c.init_scale && hi > c.init_scale); /* growth and backoff both happened */
    assert_int_equal(st.diverged, 0);                     /* no limit: never diverged */
    c.max_consecutive_skips = 2; /* two skips in a row, then a good step: still diverged */
    const int skips[] = {1, 1, 0, 0};
    for (size_t i = 0; i < 4; i++) {
        st.found_inf = skips[i];
        assert_int_equal(ops->amp_update(&c, &st), MP_OK);
        assert_int_equal(st.diverged, i == 0 ? 0 : 2);
    }
}

/* A rank's data error word (engine/amp_state.h): the code and rank come back exactly, a MAX
 * prefers the worse code, then the lower rank; amp_update keeps the first step's word and
 * clears the pending one. */
static void test_data_error(void **unused)
{
    (void)unused;
    const int cases[][2] = {{3, 0}, {1, 2147483647}, {6, 12345}, {3, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int code = -1, rank = -1;
        mp_amp_data_error_of(mp_amp_data_error(cases[i][0], cases[i][1]), &code, &rank);
        assert_int_equal(code, cases[i][0]);
        assert_int_equal(rank, cases[i][1]);
    }
    assert_true(mp_amp_data_error(3, 0) > mp_amp_data_error(3, 1));
    assert_true(mp_amp_data_error(3, 2147483647) > mp_amp_data_error(1, 0));
    assert_true(mp_amp_data_error(1, 2147483647) > 0.0);
    mp_scaler_config c = {.dynamic = true, .init_scale = 1024, .growth_factor = 2,
                          .backoff_factor = 0.5, .growth_interval = 3, .hysteresis = 2,
                          .min_scale = 1, .max_scale = 4096, .margin = 1};
    mp_amp_state st = state(0, 0);
    st.scaler = mp_scaler_init(&c);
    assert_int_equal(ops->amp_update(&c, &st), MP_OK); /* none pending: none kept */
    assert_true(st.data_error == 0.0);
    const double first = mp_amp_data_error(3, 1), later = mp_amp_data_error(3, 0);
    st.data_pending = first;
    assert_int_equal(ops->amp_update(&c, &st), MP_OK);
    assert_true(st.data_error == first && st.data_pending == 0.0);
    st.data_pending = later; /* a lower rank's, a step later: the first step's stays */
    assert_int_equal(ops->amp_update(&c, &st), MP_OK);
    assert_true(st.data_error == first && st.data_pending == 0.0);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_equals_grad_stats),
        cmocka_unit_test(test_cpu_sumsq_order),
        cmocka_unit_test(test_state_step_equals_host_step),
        cmocka_unit_test(test_update_is_scaler_update),
        cmocka_unit_test(test_data_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
