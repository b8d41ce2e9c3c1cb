/* The CPU kernels compiled for AVX2 as well as for the baseline (engine/vector_clones.h) give
 * the baseline's bits. tests/CMakeLists.txt compiles second copies of the sources that use the
 * clones into this test, with the clones turned off and their ops renamed mp_isa_*: the
 * library's op table (the AVX2 copies where the CPU has AVX2) and those baseline copies run on
 * the same inputs and every output is compared byte for byte. BatchNorm: FP32, fp16, bf16 and
 * FP64 (half inputs with FP32 and with half per-channel tensors), training and evaluation
 * forward and backward (with and without dx), over channel counts inside, at and across the
 * vector widths and row counts from one lane to many chunks of engine/bn_rule.h. The rest, in
 * every dtype on lengths that leave vector tails: bias add and its gradient, ReLU forward and
 * backward, scale, add, dropout forward and backward, max and average pooling forward and
 * backward (with NaN in some windows), the optimizer step (Adam with a half copy, SGD with
 * momentum, Nesterov, plain SGD) and the gradient statistics. The bf16 bulk conversions, the
 * other cloned loops, are checked against the element-wise definitions in test_convert_fast.
 * Skipped, saying why, where the build makes no AVX2 copies or the CPU has no AVX2. On a CPU
 * with AVX2 the library's own baseline copies never run; they are the same code as the copies
 * compiled here. The sabotage that shows the test can fail: compile the copy of optim.c with
 * "-mfma;-ffp-contract=fast" (a COMPILE_OPTIONS property in tests/CMakeLists.txt), and the
 * optimizer outputs differ. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/vector_clones.h"
#include "engine/rng.h"
#include "engine/tensor.h"

/* The baseline copies (mp_isa_* under the names the test is compiled with). */
static const mp_ops base = {.batchnorm_forward = mp_cpu_batchnorm_forward,
                            .batchnorm_backward = mp_cpu_batchnorm_backward,
                            .bias_add = mp_cpu_bias_add,
                            .bias_grad = mp_cpu_bias_grad,
                            .relu_forward = mp_cpu_relu_forward,
                            .relu_backward = mp_cpu_relu_backward,
                            .scale = mp_cpu_scale,
                            .add = mp_cpu_add,
                            .dropout_forward = mp_cpu_dropout_forward,
                            .dropout_backward = mp_cpu_dropout_backward,
                            .pool_forward = mp_cpu_pool_forward,
                            .pool_backward = mp_cpu_pool_backward,
                            .optim_step = mp_cpu_optim_step,
                            .grad_stats = mp_cpu_grad_stats};

/* Whether the library runs AVX2 copies here (else both sides are the same baseline code). */
static bool have_avx2(void)
{
    if (!MP_VECTOR_CLONES_ON) {
        print_message("this build makes no AVX2 copies (engine/vector_clones.h)\n");
        return false;
    }
    if (!__builtin_cpu_supports("avx2")) {
        print_message("the CPU has no AVX2: the library runs its baseline copies\n");
        return false;
    }
    return true;
}

static void same(const mp_tensor *a, const mp_tensor *b, const char *what, mp_dtype dt,
                 int64_t M, int64_t C)
{
    assert_int_equal(mp_tensor_bytes(a), mp_tensor_bytes(b));
    if (memcmp(a->data, b->data, (size_t)mp_tensor_bytes(a)) != 0)
        fail_msg("%s differs between the AVX2 and the baseline BatchNorm (%s, M %lld, C %lld)",
                 what, mp_dtype_name(dt), (long long)M, (long long)C);
}

/* Both copies on x (M rows of C channels) of dtype dt with per-channel tensors of dtype pt. */
static void compare(mp_dtype dt, mp_dtype pt, int64_t M, int64_t C, mp_rng *r)
{
    const mp_ops *lib = mp_backend_cpu();
    const mp_bn_args a = {.eps = 1e-5, .momentum = 0.1};
    int64_t s[2] = {M, C}, cs[1] = {C};
    mp_tensor x = mp_test_rand(dt, 2, s, r, -3, 5), dy = mp_test_rand(dt, 2, s, r, -1, 1);
    mp_tensor g = mp_test_rand(pt, 1, cs, r, 0.5, 1.5), b = mp_test_rand(pt, 1, cs, r, -1, 1);
    mp_tensor rm0 = mp_test_rand(pt, 1, cs, r, -0.1, 0.1);
    mp_tensor rv0 = mp_test_rand(pt, 1, cs, r, 0.9, 1.1);
    mp_tensor t[2][11]; /* y, rm, rv, sm, si, dx, dg, db, dg without dx, db, y in evaluation */
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 11; i++)
            t[k][i] = i == 0 || i == 5 || i == 10 ? mp_test_rand(dt, 2, s, NULL, 0, 0)
                                                 : mp_test_rand(pt, 1, cs, NULL, 0, 0);
        memcpy(t[k][1].data, rm0.data, (size_t)mp_tensor_bytes(&rm0));
        memcpy(t[k][2].data, rv0.data, (size_t)mp_tensor_bytes(&rv0));
    }
    mp_tensor *l = t[0], *i = t[1];
    const mp_ops *both[2] = {lib, &base};
    for (int k = 0; k < 2; k++) {
        const mp_ops *o = both[k];
        mp_tensor *u = t[k];
        assert_int_equal(o->batchnorm_forward(&a, true, &x, &g, &b, &u[1], &u[2], &u[3], &u[4],
                                              &u[0]),
                         MP_OK);
        assert_int_equal(o->batchnorm_backward(&a, &x, &dy, &g, &u[3], &u[4], &u[5], &u[6], &u[7]),
                         MP_OK);
        assert_int_equal(o->batchnorm_backward(&a, &x, &dy, &g, &u[3], &u[4], NULL, &u[8], &u[9]),
                         MP_OK);
        assert_int_equal(o->batchnorm_forward(&a, false, &x, &g, &b, &u[1], &u[2], NULL, NULL,
                                              &u[10]),
                         MP_OK);
    }
    static const char *what[11] = {"y",  "running mean", "running var", "saved mean",
                                   "saved invstd", "dx", "dgamma", "dbeta", "dgamma (no dx)",
                                   "dbeta (no dx)", "y (evaluation)"};
    for (int k = 0; k < 11; k++) {
        same(&l[k], &i[k], what[k], dt, M, C);
        mp_tensor_free(&l[k]);
        mp_tensor_free(&i[k]);
    }
    mp_tensor *in[] = {&x, &dy, &g, &b, &rm0, &rv0};
    for (int k = 0; k < 6; k++)
        mp_tensor_free(in[k]);
}

static void test_batchnorm_avx2_is_baseline(void **state)
{
    (void)state;
    if (!have_avx2())
        skip();
    mp_backend_cpu_threads(2);
    mp_rng r;
    mp_rng_seed(&r, 2027, 0);
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const int64_t Cs[] = {1, 3, 8, 16, 17, 32, 64, 67}, Ms[] = {2, 7, 64, 65, 1000, 36001};
    for (int d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof Cs / sizeof *Cs; c++)
            for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++) {
                if (Ms[m] * Cs[c] > 600000)
                    continue;
                compare(dts[d], dts[d] == MP_F64 ? MP_F64 : MP_F32, Ms[m], Cs[c], &r);
                if (dts[d] == MP_F16 || dts[d] == MP_BF16)
                    compare(dts[d], dts[d], Ms[m], Cs[c], &r);
            }
    mp_backend_cpu_threads(1);
}

/* The outputs of one run of the other cloned ops, in a fixed order. */
typedef struct outputs {
    mp_tensor t[40];
    double sumsq[4];
    int n, ns;
} outputs;

static mp_tensor *keep(outputs *o, mp_tensor t)
{
    assert_true(o->n < 40);
    o->t[o->n] = t;
    return &o->t[o->n++];
}

/* Every other cloned op of `ops` on inputs drawn from one seed, of dtype dt, N H W C = 3 x 11 x
 * 13 x C (C = 37: no vector width divides a row). */
static void run_ops(const mp_ops *ops, mp_dtype dt, outputs *o)
{
    enum { C = 37 };
    mp_rng r;
    mp_rng_seed(&r, 2028, 0);
    memset(o, 0, sizeof *o);
    int64_t s[4] = {3, 11, 13, C}, rows[2] = {3 * 11 * 13, C}, cs[1] = {C};
    mp_tensor x = mp_test_rand(dt, 4, s, &r, -2, 2), dy = mp_test_rand(dt, 4, s, &r, -1, 1);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i += 331) /* NaN in some pooling windows */
        mp_store(x.data, dt, (size_t)i, NAN);
    mp_tensor *y = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->relu_forward(&x, y), MP_OK);
    mp_tensor *dx = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->relu_backward(y, &dy, dx), MP_OK);
    mp_tensor *sum = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->add(&x, &dy, sum), MP_OK);
    assert_int_equal(ops->scale(sum, 0.37), MP_OK);
    mp_tensor *d = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->dropout_forward(0.3, 77, 5, &x, d), MP_OK);
    mp_tensor *dd = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->dropout_backward(0.3, 77, 5, &dy, dd), MP_OK);
    mp_tensor bias = mp_test_rand(dt, 1, cs, &r, -1, 1);
    mp_tensor *yb = keep(o, mp_test_rand(dt, 2, rows, &r, -2, 2));
    assert_int_equal(ops->bias_add(yb, &bias), MP_OK);
    mp_tensor *db = keep(o, mp_test_rand(dt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->bias_grad(yb, db), MP_OK);
    const mp_pool_desc pools[3] = {{{2, 2}, {2, 2}, {0, 0}, true},
                                   {{3, 3}, {2, 2}, {1, 1}, true},
                                   {{3, 3}, {2, 2}, {1, 1}, false}};
    for (int k = 0; k < 3; k++) {
        const mp_pool_desc *pd = &pools[k];
        int64_t P = (11 + 2 * pd->pad[0] - pd->window[0]) / pd->stride[0] + 1;
        int64_t Q = (13 + 2 * pd->pad[1] - pd->window[1]) / pd->stride[1] + 1;
        int64_t ps[4] = {3, P, Q, C};
        mp_tensor *py = keep(o, mp_test_rand(dt, 4, ps, NULL, 0, 0));
        assert_int_equal(ops->pool_forward(pd, &x, py), MP_OK);
        mp_tensor pdy = mp_test_rand(dt, 4, ps, &r, -1, 1);
        mp_tensor *pdx = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
        assert_int_equal(ops->pool_backward(pd, &x, py, &pdy, pdx), MP_OK);
        mp_tensor_free(&pdy);
    }
    mp_dtype pt = dt == MP_F64 ? MP_F64 : MP_F32;
    int64_t n[1] = {10007};
    mp_tensor gr = mp_test_rand(dt, 1, n, &r, -1, 1);
    for (int k = 0; k < 4; k++) {
        mp_optim_args a = {.kind = k ? MP_OPTIM_SGD : MP_OPTIM_ADAM, .lr = 0.01,
                           .weight_decay = 1e-4, .momentum = k == 3 ? 0 : 0.9,
                           .nesterov = k == 2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                           .step = 3, .grad_scale = 0.5};
        mp_tensor *w = keep(o, mp_test_rand(pt, 1, n, &r, -1, 1));
        mp_tensor *copy = dt == pt ? NULL : keep(o, mp_test_rand(dt, 1, n, NULL, 0, 0));
        mp_tensor *m1 = k == 3 ? NULL : keep(o, mp_test_rand(pt, 1, n, &r, -0.1, 0.1));
        mp_tensor *m2 = k ? NULL : keep(o, mp_test_rand(pt, 1, n, &r, 0, 0.01));
        assert_int_equal(ops->optim_step(&a, NULL, w, copy, &gr, m1, m2), MP_OK);
    }
    bool bad = false;
    assert_int_equal(ops->grad_stats(&gr, 0.25, &o->sumsq[o->ns++], &bad), MP_OK);
    assert_false(bad);
    assert_int_equal(ops->grad_stats(&x, 1.0, &o->sumsq[o->ns++], &bad), MP_OK);
    assert_true(bad);
    mp_tensor *in[] = {&x, &dy, &bias, &gr};
    for (int k = 0; k < 4; k++)
        mp_tensor_free(in[k]);
}

static void test_other_ops_avx2_are_baseline(void **state)
{
    (void)state;
    if (!have_avx2())
        skip();
    mp_backend_cpu_threads(2);
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    for (int d = 0; d < 4; d++) {
        outputs l, i;
        run_ops(mp_backend_cpu(), dts[d], &l);
        run_ops(&base, dts[d], &i);
        assert_int_equal(l.n, i.n);
        for (int k = 0; k < l.n; k++) {
            assert_int_equal(mp_tensor_bytes(&l.t[k]), mp_tensor_bytes(&i.t[k]));
            if (memcmp(l.t[k].data, i.t[k].data, (size_t)mp_tensor_bytes(&l.t[k])) != 0)
                fail_msg("%s: output %d differs between the AVX2 and the baseline ops",
                         mp_dtype_name(dts[d]), k);
            mp_tensor_free(&l.t[k]);
            mp_tensor_free(&i.t[k]);
        }
        for (int k = 0; k < l.ns; k++)
            if (memcmp(&l.sumsq[k], &i.sumsq[k], sizeof l.sumsq[k]) != 0)
                fail_msg("%s: gradient statistics %d differ between the AVX2 and the baseline",
                         mp_dtype_name(dts[d]), k);
    }
    mp_backend_cpu_threads(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_batchnorm_avx2_is_baseline),
                                       cmocka_unit_test(test_other_ops_avx2_are_baseline)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
