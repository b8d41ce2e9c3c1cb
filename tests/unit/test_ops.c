/* CPU ops in FP32, fp16 and bf16 against the same ops in FP64 on the same (rounded) inputs,
 * with tolerances from each dtype's epsilon; SGD against torch.optim.SGD's update rule written
 * out by hand; gemm_bias and linear_backward against the ops they stand for; model building
 * errors and the flat parameter views. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/model.h"
#include "engine/optim.h"
#include "engine/rng.h"

static const mp_ops *ops;

/* A tensor of dtype dt with random values in [-1, 1), and its exact FP64 copy. */
static void random_pair(mp_dtype dt, int ndim, const int64_t *shape, mp_rng *r, mp_tensor *t,
                        mp_tensor *t64)
{
    *t = mp_tensor_alloc(dt, ndim, shape, MP_MEM_WORKSPACE);
    *t64 = mp_tensor_alloc(MP_F64, ndim, shape, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(t); i++) {
        mp_store(t->data, dt, (size_t)i, 2 * mp_rng_uniform(r) - 1);
        ((double *)t64->data)[i] = mp_load(t->data, dt, (size_t)i);
    }
}

static void as_f64(const mp_tensor *t, double *out)
{
    for (int64_t i = 0; i < mp_tensor_numel(t); i++)
        out[i] = mp_load(t->data, t->dtype, (size_t)i);
}

static void check_gemm(mp_dtype dt, bool ta, bool tb)
{
    mp_rng r;
    mp_rng_seed(&r, 21, (uint64_t)dt * 4 + ta * 2 + tb);
    int64_t m = 7, n = 5, k = 33;
    int64_t as[2] = {ta ? k : m, ta ? m : k}, bs[2] = {tb ? n : k, tb ? k : n}, cs[2] = {m, n};
    mp_tensor a, a64, b, b64, c, c64;
    random_pair(dt, 2, as, &r, &a, &a64);
    random_pair(dt, 2, bs, &r, &b, &b64);
    random_pair(dt, 2, cs, &r, &c, &c64);
    assert_int_equal(ops->gemm(ta, tb, 0.5, &a, &b, 2.0, &c), MP_OK);
    assert_int_equal(ops->gemm(ta, tb, 0.5, &a64, &b64, 2.0, &c64), MP_OK);
    double got[35];
    as_f64(&c, got);
    /* FP32 accumulation over k terms of size <= 1, then one rounding to dt. */
    double atol = (double)k * 4 * 0x1p-24;
    assert_close(got, (double *)c64.data, 35, atol, mp_test_eps(dt));
    mp_tensor *all[] = {&a, &a64, &b, &b64, &c, &c64};
    for (int i = 0; i < 6; i++)
        mp_tensor_free(all[i]);
}

static void test_gemm_all_dtypes(void **state)
{
    (void)state;
    mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16};
    for (int d = 0; d < 3; d++)
        for (int t = 0; t < 4; t++)
            check_gemm(dts[d], t & 1, t & 2);
}

static void test_gemm_shape_mismatch(void **state)
{
    (void)state;
    float a[6], b[6], c[4];
    int64_t s23[2] = {2, 3}, s22[2] = {2, 2};
    mp_tensor ta = mp_tensor_view(a, MP_F32, 2, s23), tb = mp_tensor_view(b, MP_F32, 2, s23);
    mp_tensor tc = mp_tensor_view(c, MP_F32, 2, s22);
    assert_int_equal(ops->gemm(false, false, 1, &ta, &tb, 0, &tc), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "gemm"));
}

/* gemm_bias into half c rounds twice, as gemm then bias_add: the FP32 product (gemm into an FP32
 * c) rounded to c's dtype, plus the bias in FP32, rounded again (rounding once would differ in
 * many of these 48 x 300 elements; rows longer than the CPU's chunks of 256). */
static void test_gemm_bias_rounds_twice(void **state)
{
    (void)state;
    mp_dtype dts[] = {MP_F16, MP_BF16};
    for (int d = 0; d < 2; d++) {
        mp_rng r;
        mp_rng_seed(&r, 23, (uint64_t)d);
        int64_t m = 48, n = 300, k = 65, as[2] = {m, k}, ws[2] = {n, k}, cs[2] = {m, n};
        mp_tensor a, a64, w, w64, b, b64;
        random_pair(dts[d], 2, as, &r, &a, &a64);
        random_pair(dts[d], 2, ws, &r, &w, &w64);
        random_pair(dts[d], 1, &n, &r, &b, &b64);
        mp_tensor c = mp_tensor_alloc(dts[d], 2, cs, MP_MEM_WORKSPACE);
        mp_tensor p = mp_tensor_alloc(MP_F32, 2, cs, MP_MEM_WORKSPACE);
        mp_tensor want = mp_tensor_alloc(dts[d], 2, cs, MP_MEM_WORKSPACE);
        assert_int_equal(ops->gemm_bias(false, true, &a, &w, &b, &c), MP_OK);
        assert_int_equal(ops->gemm(false, true, 1.0, &a, &w, 0.0, &p), MP_OK);
        for (int64_t i = 0; i < m * n; i++) {
            mp_store(want.data, dts[d], (size_t)i, ((float *)p.data)[i]);
            float rounded = (float)mp_load(want.data, dts[d], (size_t)i);
            mp_store(want.data, dts[d], (size_t)i,
                     rounded + (float)mp_load(b.data, dts[d], (size_t)(i % n)));
        }
        assert_memory_equal(c.data, want.data, (size_t)(m * n) * mp_dtype_size(dts[d]));
        mp_tensor *all[] = {&a, &a64, &w, &w64, &b, &b64, &c, &p, &want};
        for (int i = 0; i < 9; i++)
            mp_tensor_free(all[i]);
    }
}

/* linear_backward gives the bits of its three ops called one by one, with and without db and
 * dx, in every dtype (the CPU widens a half dy once for the GEMMs that would widen it, or
 * not at all where its bf16 GEMMs take it as it is: gemm_dnnl.c). */
static void test_linear_backward_is_its_ops(void **state)
{
    (void)state;
    mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16};
    for (int d = 0; d < 3; d++)
        for (int parts = 0; parts < 4; parts++) {
            mp_rng r;
            mp_rng_seed(&r, 24, (uint64_t)(d * 4 + parts));
            int64_t N = 70, in = 33, out = 45;
            int64_t xs[2] = {N, in}, ws[2] = {out, in}, ys[2] = {N, out};
            mp_tensor x, x64, w, w64, dy, dy64, t[6];
            random_pair(dts[d], 2, xs, &r, &x, &x64);
            random_pair(dts[d], 2, ws, &r, &w, &w64);
            random_pair(dts[d], 2, ys, &r, &dy, &dy64);
            for (int i = 0; i < 6; i += 3) {
                t[i] = mp_tensor_alloc(dts[d], 2, ws, MP_MEM_WORKSPACE);
                t[i + 1] = mp_tensor_alloc(dts[d], 1, &out, MP_MEM_WORKSPACE);
                t[i + 2] = mp_tensor_alloc(dts[d], 2, xs, MP_MEM_WORKSPACE);
            }
            bool db = parts & 1, dx = parts & 2;
            assert_int_equal(ops->linear_backward(&x, &w, &dy, &t[0], db ? &t[1] : NULL,
                                                  dx ? &t[2] : NULL),
                             MP_OK);
            assert_int_equal(ops->gemm(true, false, 1.0, &dy, &x, 0.0, &t[3]), MP_OK);
            if (db)
                assert_int_equal(ops->bias_grad(&dy, &t[4]), MP_OK);
            if (dx)
                assert_int_equal(ops->gemm(false, false, 1.0, &dy, &w, 0.0, &t[5]), MP_OK);
            for (int i = 0; i < 3; i++)
                assert_memory_equal(t[i].data, t[i + 3].data, mp_tensor_bytes(&t[i]));
            mp_tensor *all[] = {&x, &x64, &w, &w64, &dy, &dy64};
            for (int i = 0; i < 6; i++)
                mp_tensor_free(all[i]);
            for (int i = 0; i < 6; i++)
                mp_tensor_free(&t[i]);
        }
}

static void test_xent_all_dtypes(void **state)
{
    (void)state;
    mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16};
    int32_t labels[4] = {3, 0, 1, 2};
    for (int d = 0; d < 3; d++) {
        mp_rng r;
        mp_rng_seed(&r, 31, (uint64_t)d);
        int64_t s[2] = {4, 6};
        mp_tensor z, z64, g, g64;
        random_pair(dts[d], 2, s, &r, &z, &z64);
        random_pair(dts[d], 2, s, &r, &g, &g64);
        mp_xent_result a, b;
        assert_int_equal(ops->softmax_xent(&z, labels, 0.1, 4.0, NULL, &a, &g), MP_OK);
        assert_int_equal(ops->softmax_xent(&z64, labels, 0.1, 4.0, NULL, &b, &g64), MP_OK);
        assert_close(&a.loss, &b.loss, 1, 1e-6, 1e-6); /* the loss stays FP32 for every dtype */
        assert_int_equal(a.correct, b.correct);
        double got[24];
        as_f64(&g, got);
        assert_close(got, (double *)g64.data, 24, 1e-6, mp_test_eps(dts[d]));
        mp_tensor *all[] = {&z, &z64, &g, &g64};
        for (int i = 0; i < 4; i++)
            mp_tensor_free(all[i]);
    }
}

/* Parameters of one FP64 group, for optimizer tests. */
static void f64_params(mp_params *params, double *p, double *g, int64_t n)
{
    int64_t s[1] = {n};
    memset(params, 0, sizeof *params);
    params->groups[0].total = n;
    params->groups[0].n = n;
    params->groups[0].model = mp_tensor_view(p, MP_F64, 1, s);
    params->groups[0].master = params->groups[0].model;
    params->groups[0].grad = mp_tensor_view(g, MP_F64, 1, s);
}

/* torch.optim.SGD, written out: d = g + wd p; b = first ? d : mom b + (1 - damp) d;
 * d = nesterov ? d + mom b : b; p -= lr d; with the gradient multiplier applied first. */
static void test_sgd_matches_pytorch_rule(void **state)
{
    (void)state;
    const double lr = 0.1, mom = 0.9, wd = 0.01, gs = 0.25;
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        double damp = nesterov ? 0.0 : 0.25;
        double p[3] = {1.0, -2.0, 0.5}, g[3] = {0.3, -0.1, 2.0}, ref[3], buf[3];
        memcpy(ref, p, sizeof p);
        mp_params params;
        f64_params(&params, p, g, 3);
        mp_optimizer o;
        mp_optim_args h = {.kind = MP_OPTIM_SGD, .momentum = mom, .dampening = damp,
                           .weight_decay = wd, .nesterov = nesterov};
        mp_optimizer_init(&o, ops, &params, &h);
        for (int step = 0; step < 3; step++) {
            for (int i = 0; i < 3; i++) {
                double d = g[i] * gs + wd * ref[i];
                buf[i] = step == 0 ? d : mom * buf[i] + (1 - damp) * d;
                d = nesterov ? d + mom * buf[i] : buf[i];
                ref[i] -= lr * d;
            }
            assert_int_equal(mp_optimizer_step(&o, &params, lr, gs), MP_OK);
            assert_close(p, ref, 3, 0, 1e-15);
        }
        mp_optimizer_free(&o);
    }
}

/* torch.optim.Adam and AdamW, written out with bias correction:
 * m = b1 m + (1 - b1) d; v = b2 v + (1 - b2) d^2;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), with d = g + wd p (Adam) or
 * p -= lr wd p first and d = g (AdamW). */
static void test_adam_matches_pytorch_rule(void **state)
{
    (void)state;
    const double lr = 0.01, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int kind = MP_OPTIM_ADAM; kind <= MP_OPTIM_ADAMW; kind++) {
        double p[3] = {1.0, -2.0, 0.5}, g[3] = {0.3, -0.1, 2.0}, ref[3], m[3] = {0}, v[3] = {0};
        memcpy(ref, p, sizeof p);
        mp_params params;
        f64_params(&params, p, g, 3);
        mp_optimizer o;
        mp_optim_args h = {.kind = (mp_optim_kind)kind, .weight_decay = wd, .beta1 = b1,
                           .beta2 = b2, .eps = eps};
        mp_optimizer_init(&o, ops, &params, &h);
        for (int t = 1; t <= 4; t++) {
            for (int i = 0; i < 3; i++) {
                double d = g[i];
                if (kind == MP_OPTIM_ADAMW)
                    ref[i] -= lr * wd * ref[i];
                else
                    d += wd * ref[i];
                m[i] = b1 * m[i] + (1 - b1) * d;
                v[i] = b2 * v[i] + (1 - b2) * d * d;
                ref[i] -= lr / (1 - pow(b1, t)) * m[i] / (sqrt(v[i]) / sqrt(1 - pow(b2, t)) + eps);
            }
            assert_int_equal(mp_optimizer_step(&o, &params, lr, 1.0), MP_OK);
            assert_close(p, ref, 3, 0, 1e-13);
        }
        mp_optimizer_free(&o);
    }
}

/* O2's step: FP32 masters updated from half gradients, the half model rewritten from them. */
static void test_master_weights_step(void **state)
{
    (void)state;
    mp_layer_spec specs[1] = {{.type = "linear", .out = 3}};
    int64_t in[3] = {1, 1, 4};
    for (int h = 0; h < 2; h++) {
        mp_dtype half = h ? MP_BF16 : MP_F16;
        mp_amp_policy amp = mp_amp_resolve(MP_O2, half, true, true, 0.0, false);
        mp_model m;
        assert_int_equal(mp_model_build(&m, ops, specs, 1, in, 3, 2, &amp), MP_OK);
        mp_param_group *g = &m.params.groups[MP_GROUP_WEIGHTS];
        assert_int_equal(g->model.dtype, half);
        assert_int_equal(g->grad.dtype, half);
        assert_int_equal(g->master.dtype, MP_F32);
        assert_ptr_not_equal(g->master.data, g->model.data);
        mp_model_init(&m, 3);
        for (int64_t i = 0; i < g->total; i++)
            mp_store(g->grad.data, half, (size_t)i, 1.0 + (double)i);
        float before[32];
        memcpy(before, g->master.data, (size_t)g->total * sizeof(float));
        mp_optimizer o;
        mp_optim_args hp = {.kind = MP_OPTIM_SGD};
        mp_optimizer_init(&o, ops, &m.params, &hp);
        assert_int_equal(mp_optimizer_step(&o, &m.params, 0.5, 1.0 / 1024), MP_OK);
        for (int64_t i = 0; i < 15; i++) {
            float want = before[i] - 0.5f * ((1.0f + (float)i) / 1024.0f);
            float got = ((float *)g->master.data)[i];
            assert_true(got == want);
            assert_int_equal(((uint16_t *)g->model.data)[i],
                             half == MP_F16 ? mp_f32_to_f16(want) : mp_f32_to_bf16(want));
        }
        mp_optimizer_free(&o);
        mp_model_free(&m);
    }
}

static void test_model_build_and_views(void **state)
{
    (void)state;
    mp_layer_spec specs[8];
    int64_t hidden[2] = {16, 8};
    int n = mp_model_mlp_specs(specs, hidden, 2, 10);
    assert_int_equal(n, 5);
    mp_model m;
    int64_t in[3] = {4, 4, 1};
    assert_int_equal(mp_model_build(&m, ops, specs, n, in, 10, 32, NULL), MP_OK);
    assert_int_equal(m.params.count, 6);
    const mp_param_group *wg = &m.params.groups[MP_GROUP_WEIGHTS];
    int w2 = mp_params_find(&m.params, "fc2.weight");
    assert_true(w2 >= 0);
    assert_int_equal(m.params.views[w2].shape[0], 8);
    assert_int_equal(m.params.views[w2].shape[1], 16);
    assert_int_equal(mp_params_numel(&m.params), 16 * 16 + 16 + 8 * 16 + 8 + 10 * 8 + 10);
    /* Every view lies inside the flat buffer, 16-element aligned, without overlap. */
    for (int i = 0; i < m.params.count; i++) {
        const mp_param_view *v = &m.params.views[i];
        assert_int_equal(v->offset % 16, 0);
        assert_true(v->offset + v->numel <= wg->total);
        if (i > 0)
            assert_true(m.params.views[i - 1].offset + m.params.views[i - 1].numel <= v->offset);
    }
    assert_true(mp_mem_current(MP_MEM_WEIGHTS) >= wg->total * 4);
    mp_model_init(&m, 1);
    float *w = wg->model.data;
    double bound = 1.0 / sqrt(16.0), mx = 0;
    for (int64_t i = 0; i < m.params.views[0].numel; i++)
        mx = fmax(mx, fabs(w[i]));
    assert_true(mx > 0.9 / 4 && mx <= bound);
    mp_model_free(&m);

    specs[n - 1].out = 7; /* last layer does not match the classes */
    assert_int_equal(mp_model_build(&m, ops, specs, n, in, 10, 32, NULL), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "fc3"));
    mp_model_free(&m);
    snprintf(specs[1].type, sizeof specs[1].type, "conv9");
    assert_int_equal(mp_model_build(&m, ops, specs, n, in, 10, 32, NULL), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "conv9"));
    mp_model_free(&m);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_all_dtypes),
        cmocka_unit_test(test_gemm_shape_mismatch),
        cmocka_unit_test(test_gemm_bias_rounds_twice),
        cmocka_unit_test(test_linear_backward_is_its_ops),
        cmocka_unit_test(test_xent_all_dtypes),
        cmocka_unit_test(test_sgd_matches_pytorch_rule),
        cmocka_unit_test(test_adam_matches_pytorch_rule),
        cmocka_unit_test(test_master_weights_step),
        cmocka_unit_test(test_model_build_and_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
