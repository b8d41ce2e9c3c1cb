/* Batch normalisation: FP64 finite-difference checks of dx, dweight and dbias through the layer
 * in training mode, the running statistics after one and two steps against values worked out
 * by hand (unbiased variance, momentum), evaluation with the running statistics, a naive FP64
 * reference over more channels than one block, FP32/fp16/bf16 inputs against FP64 with
 * tolerances from the dtype's epsilon, backward with dx over dy giving the same bits, the
 * layer's eps handed to backward as to forward (cuDNN asks for the same value in both), and the
 * layer's declarations and errors. */
#include "tests/util/test_util.h"
#include "tests/util/test_fd.h"

#include <math.h>
#include <string.h>

#include "engine/layer.h"
#include "engine/rng.h"

#define EPS 1e-6
#define RTOL 1e-6
#define ATOL 1e-9
#define BN_EPS 1e-5

static const mp_ops *ops;

static double *f64(const mp_tensor *t) { return t->data; }

/* Binds the layer's parameters (random weight in [0.5, 1.5), bias in [-1, 1)) and buffers
 * (their declared initial values), all of dtype dt. */
static void bind_state(mp_layer *l, mp_dtype dt, mp_rng *r)
{
    for (int j = 0; j < l->nparams; j++) {
        double lo = j == 0 ? 0.5 : -1.0;
        l->w[j] = mp_test_rand(dt, l->param_ndim[j], l->param_shape[j], r, lo, lo + 1.0);
        l->dw[j] = mp_test_rand(dt, l->param_ndim[j], l->param_shape[j], NULL, 0, 0);
    }
    for (int j = 0; j < l->nbuffers; j++) {
        l->buf[j] = mp_test_rand(dt, 1, &l->buffer_numel[j], NULL, 0, 0);
        for (int64_t i = 0; i < l->buffer_numel[j]; i++)
            mp_store(l->buf[j].data, dt, (size_t)i, l->buffer_init[j]);
    }
}

static void free_state(mp_layer *l)
{
    for (int j = 0; j < l->nparams; j++) {
        mp_tensor_free(&l->w[j]);
        mp_tensor_free(&l->dw[j]);
    }
    for (int j = 0; j < l->nbuffers; j++)
        mp_tensor_free(&l->buf[j]);
}

static void gradcheck(const int64_t in[3], int64_t n, uint64_t seed)
{
    mp_layer l;
    assert_int_equal(mp_layer_batchnorm_init(&l, ops, "bn", in, BN_EPS, 0.1), MP_OK);
    mp_rng rng;
    mp_rng_seed(&rng, seed, 0);
    bind_state(&l, MP_F64, &rng);
    int64_t s[4] = {n, in[0], in[1], in[2]};
    mp_tensor x = mp_test_rand(MP_F64, 4, s, &rng, -2, 3), y = mp_test_rand(MP_F64, 4, s, NULL, 0,
                               0);
    mp_tensor r = mp_test_rand(MP_F64, 4, s, &rng, -1, 1), dx = mp_test_rand(MP_F64, 4, s, NULL, 0,
                               0);
    mp_test_layer_loss(&l, &x, &y, &r);
    assert_int_equal(l.cls->backward(&l, &x, &y, &r, &dx), MP_OK);
    mp_test_layer_fd_check(&l, &x, &y, &r, &x, &dx, EPS, ATOL, RTOL);
    mp_test_layer_fd_check(&l, &x, &y, &r, &l.w[0], &l.dw[0], EPS, ATOL, RTOL);
    mp_test_layer_fd_check(&l, &x, &y, &r, &l.w[1], &l.dw[1], EPS, ATOL, RTOL);
    /* Without dx the parameter gradients are the same. */
    double dw0[8], db0[8];
    memcpy(dw0, l.dw[0].data, (size_t)in[2] * sizeof(double));
    memcpy(db0, l.dw[1].data, (size_t)in[2] * sizeof(double));
    memset(l.dw[0].data, 0, (size_t)in[2] * sizeof(double));
    memset(l.dw[1].data, 0, (size_t)in[2] * sizeof(double));
    mp_test_layer_loss(&l, &x, &y, &r);
    assert_int_equal(l.cls->backward(&l, &x, &y, &r, NULL), MP_OK);
    assert_close(f64(&l.dw[0]), dw0, (size_t)in[2], 0, 0);
    assert_close(f64(&l.dw[1]), db0, (size_t)in[2], 0, 0);
    mp_tensor *all[] = {&x, &y, &r, &dx};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
    free_state(&l);
}

static void test_gradcheck_images(void **state)
{
    (void)state;
    int64_t in[3] = {2, 2, 3};
    gradcheck(in, 3, 1);
}

static void test_gradcheck_features(void **state)
{
    (void)state;
    int64_t in[3] = {1, 1, 4}; /* BatchNorm1d after a linear layer */
    gradcheck(in, 5, 2);
}

/* Channel 0 holds 1, 2, 3, 6 (mean 3, squared deviations 4 + 1 + 0 + 9 = 14); channel 1 holds
 * 0, 0, 0, 4 (mean 1, squared deviations 1 + 1 + 1 + 9 = 12). M = 4, so the biased variances
 * are 14/4 and 12/4, the unbiased ones 14/3 and 12/3. The second step doubles x. */
static void test_running_stats_by_hand(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {1, 2, 2};
    assert_int_equal(mp_layer_batchnorm_init(&l, ops, "bn", in, BN_EPS, 0.1), MP_OK);
    bind_state(&l, MP_F64, NULL);
    double gamma[2] = {2.0, 0.5}, beta[2] = {1.0, -1.0};
    memcpy(l.w[0].data, gamma, sizeof gamma);
    memcpy(l.w[1].data, beta, sizeof beta);
    /* (N, H, W, C) = (2, 1, 2, 2), channels innermost. */
    double xv[8] = {1, 0, 2, 0, 3, 0, 6, 4}, yv[8];
    int64_t s[4] = {2, 1, 2, 2};
    mp_tensor x = mp_tensor_view(xv, MP_F64, 4, s), y = mp_tensor_view(yv, MP_F64, 4, s);

    assert_int_equal(l.cls->forward(&l, &x, &y, true), MP_OK);
    double rm1[2] = {0.1 * 3, 0.1 * 1};
    double rv1[2] = {0.9 + 0.1 * 14.0 / 3, 0.9 + 0.1 * 12.0 / 3};
    assert_close(f64(&l.buf[0]), rm1, 2, 0, 1e-15);
    assert_close(f64(&l.buf[1]), rv1, 2, 0, 1e-15);
    double mean[2] = {3, 1}, invstd[2] = {1 / sqrt(3.5 + BN_EPS), 1 / sqrt(3.0 + BN_EPS)};
    assert_close(f64(&l.buf[2]), mean, 2, 0, 1e-15);
    assert_close(f64(&l.buf[3]), invstd, 2, 0, 1e-15);
    double want[8];
    for (int i = 0; i < 8; i++)
        want[i] = (xv[i] - mean[i % 2]) * invstd[i % 2] * gamma[i % 2] + beta[i % 2];
    assert_close(yv, want, 8, 1e-15, 1e-14);

    for (int i = 0; i < 8; i++)
        xv[i] *= 2;
    assert_int_equal(l.cls->forward(&l, &x, &y, true), MP_OK);
    double rm2[2] = {0.9 * rm1[0] + 0.1 * 6, 0.9 * rm1[1] + 0.1 * 2};
    double rv2[2] = {0.9 * rv1[0] + 0.1 * 56.0 / 3, 0.9 * rv1[1] + 0.1 * 48.0 / 3};
    assert_close(f64(&l.buf[0]), rm2, 2, 0, 1e-15);
    assert_close(f64(&l.buf[1]), rv2, 2, 0, 1e-15);
    free_state(&l);
}

/* Evaluation normalises with the running statistics, leaves them and save_* alone. */
static void test_eval_uses_running_stats(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {1, 2, 2};
    assert_int_equal(mp_layer_batchnorm_init(&l, ops, "bn", in, BN_EPS, 0.1), MP_OK);
    bind_state(&l, MP_F64, NULL);
    double gamma[2] = {2.0, 0.5}, beta[2] = {1.0, -1.0}, rm[2] = {0.5, -2.0}, rv[2] = {4.0, 0.25};
    memcpy(l.w[0].data, gamma, sizeof gamma);
    memcpy(l.w[1].data, beta, sizeof beta);
    memcpy(l.buf[0].data, rm, sizeof rm);
    memcpy(l.buf[1].data, rv, sizeof rv);
    for (int j = 2; j < 4; j++)
        f64(&l.buf[j])[0] = f64(&l.buf[j])[1] = 7.0;
    double xv[8] = {1, 0, 2, 0, 3, 0, 6, 4}, yv[8], want[8];
    int64_t s[4] = {2, 1, 2, 2};
    mp_tensor x = mp_tensor_view(xv, MP_F64, 4, s), y = mp_tensor_view(yv, MP_F64, 4, s);
    assert_int_equal(l.cls->forward(&l, &x, &y, false), MP_OK);
    for (int i = 0; i < 8; i++)
        want[i] = (xv[i] - rm[i % 2]) / sqrt(rv[i % 2] + BN_EPS) * gamma[i % 2] + beta[i % 2];
    assert_close(yv, want, 8, 1e-15, 1e-14);
    assert_close(f64(&l.buf[0]), rm, 2, 0, 0);
    assert_close(f64(&l.buf[1]), rv, 2, 0, 0);
    double seven[2] = {7.0, 7.0};
    assert_close(f64(&l.buf[2]), seven, 2, 0, 0);
    assert_close(f64(&l.buf[3]), seven, 2, 0, 0);
    /* A single sample is fine in evaluation. */
    mp_tensor x1 = mp_tensor_batch(&x, 1), y1 = mp_tensor_batch(&y, 1);
    assert_int_equal(l.cls->forward(&l, &x1, &y1, false), MP_OK);
    free_state(&l);
}

/* Per channel, the obvious loops: y, batch mean and biased variance, and the closed-form
 * gradients, all in FP64. */
static void naive_bn(const double *x, const double *dy, int64_t M, int64_t C, const double *g,
                     const double *b, double *y, double *mean, double *var, double *dx,
                     double *dg, double *db)
{
    for (int64_t c = 0; c < C; c++) {
        double s = 0, q = 0, sdy = 0, sdyx = 0;
        for (int64_t m = 0; m < M; m++)
            s += x[m * C + c];
        mean[c] = s / (double)M;
        for (int64_t m = 0; m < M; m++)
            q += (x[m * C + c] - mean[c]) * (x[m * C + c] - mean[c]);
        var[c] = q / (double)M;
        double is = 1 / sqrt(var[c] + BN_EPS);
        for (int64_t m = 0; m < M; m++) {
            double xh = (x[m * C + c] - mean[c]) * is;
            y[m * C + c] = xh * g[c] + b[c];
            sdy += dy[m * C + c];
            sdyx += dy[m * C + c] * xh;
        }
        dg[c] = sdyx;
        db[c] = sdy;
        for (int64_t m = 0; m < M; m++) {
            double xh = (x[m * C + c] - mean[c]) * is;
            dx[m * C + c] = g[c] * is / (double)M * ((double)M * dy[m * C + c] - sdy - xh * sdyx);
        }
    }
}

/* One training forward and backward of dtype dt (x, dy, y, dx in dt; parameters and buffers
 * FP32, or FP64 for dt = FP64) on (2, 2, 3, C = 70): more channels than one block. */
typedef struct bn_run {
    double y[840], dx[840], dg[70], db[70], rm[70], rv[70];
} bn_run;

enum { RUN_N = 2, RUN_H = 2, RUN_W = 3, RUN_C = 70, RUN_M = RUN_N * RUN_H * RUN_W };

static void run_bn(mp_dtype dt, const double *xv, const double *dyv, const double *g,
                   const double *b, bn_run *out)
{
    mp_dtype pt = dt == MP_F64 ? MP_F64 : MP_F32;
    mp_layer l;
    int64_t in[3] = {RUN_H, RUN_W, RUN_C};
    assert_int_equal(mp_layer_batchnorm_init(&l, ops, "bn", in, BN_EPS, 0.25), MP_OK);
    bind_state(&l, pt, NULL);
    for (int c = 0; c < RUN_C; c++) {
        mp_store(l.w[0].data, pt, (size_t)c, g[c]);
        mp_store(l.w[1].data, pt, (size_t)c, b[c]);
    }
    int64_t s[4] = {RUN_N, RUN_H, RUN_W, RUN_C};
    mp_tensor x = mp_test_rand(dt, 4, s, NULL, 0, 0), dy = mp_test_rand(dt, 4, s, NULL, 0, 0);
    mp_tensor y = mp_test_rand(dt, 4, s, NULL, 0, 0), dx = mp_test_rand(dt, 4, s, NULL, 0, 0);
    for (int i = 0; i < RUN_M * RUN_C; i++) {
        mp_store(x.data, dt, (size_t)i, xv[i]);
        mp_store(dy.data, dt, (size_t)i, dyv[i]);
    }
    assert_int_equal(l.cls->forward(&l, &x, &y, true), MP_OK);
    assert_int_equal(l.cls->backward(&l, &x, &y, &dy, &dx), MP_OK);
    for (int i = 0; i < RUN_M * RUN_C; i++) {
        out->y[i] = mp_load(y.data, dt, (size_t)i);
        out->dx[i] = mp_load(dx.data, dt, (size_t)i);
    }
    for (int c = 0; c < RUN_C; c++) {
        out->dg[c] = mp_load(l.dw[0].data, pt, (size_t)c);
        out->db[c] = mp_load(l.dw[1].data, pt, (size_t)c);
        out->rm[c] = mp_load(l.buf[0].data, pt, (size_t)c);
        out->rv[c] = mp_load(l.buf[1].data, pt, (size_t)c);
    }
    /* Backward again with dx over dy's memory (the class allows it; mp_seq_backward does it)
     * gives the same bits. */
    assert_true(l.cls->inplace_backward);
    mp_tensor dz = mp_test_rand(dt, 4, s, NULL, 0, 0);
    memcpy(dz.data, dy.data, (size_t)(RUN_M * RUN_C) * mp_dtype_size(dt));
    assert_int_equal(l.cls->backward(&l, &x, &y, &dz, &dz), MP_OK);
    assert_memory_equal(dz.data, dx.data, (size_t)(RUN_M * RUN_C) * mp_dtype_size(dt));
    for (int c = 0; c < RUN_C; c++) {
        assert_true(mp_load(l.dw[0].data, pt, (size_t)c) == out->dg[c]);
        assert_true(mp_load(l.dw[1].data, pt, (size_t)c) == out->db[c]);
    }
    mp_tensor *all[] = {&x, &dy, &y, &dx, &dz};
    for (int i = 0; i < 5; i++)
        mp_tensor_free(all[i]);
    free_state(&l);
}

static void test_dtypes_against_fp64(void **state)
{
    (void)state;
    static double xv[RUN_M * RUN_C], dyv[RUN_M * RUN_C], g[RUN_C], b[RUN_C];
    static bn_run ref, got;
    mp_rng r;
    mp_rng_seed(&r, 11, 0);
    for (int c = 0; c < RUN_C; c++) {
        g[c] = 0.5 + mp_rng_uniform(&r);
        b[c] = 2 * mp_rng_uniform(&r) - 1;
    }
    const mp_dtype dts[] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    for (int d = 0; d < 4; d++) {
        mp_dtype dt = dts[d];
        /* Multiples of 1/16 in [-2, 11) and of 1/128 in [-1, 1): exact in every dtype, so
         * every run sees the same values; channel c is offset by c / 8 so the mean matters. */
        for (int i = 0; i < RUN_M * RUN_C; i++) {
            xv[i] = round(16 * (4 * mp_rng_uniform(&r) - 2 + (i % RUN_C) / 8.0)) / 16;
            dyv[i] = round(128 * (2 * mp_rng_uniform(&r) - 1)) / 128;
        }
        run_bn(MP_F64, xv, dyv, g, b, &ref);
        if (dt == MP_F64) {
            /* The FP64 op against the naive loops; running stats after one step from 0 and 1. */
            static double y[RUN_M * RUN_C], dx[RUN_M * RUN_C];
            double mean[RUN_C], var[RUN_C], dg[RUN_C], db[RUN_C], rm[RUN_C], rv[RUN_C];
            naive_bn(xv, dyv, RUN_M, RUN_C, g, b, y, mean, var, dx, dg, db);
            for (int c = 0; c < RUN_C; c++) {
                rm[c] = 0.25 * mean[c];
                rv[c] = 0.75 + 0.25 * var[c] * RUN_M / (RUN_M - 1);
            }
            assert_close(ref.y, y, RUN_M * RUN_C, 1e-13, 1e-13);
            assert_close(ref.dx, dx, RUN_M * RUN_C, 1e-13, 1e-12);
            assert_close(ref.dg, dg, RUN_C, 1e-13, 1e-13);
            assert_close(ref.db, db, RUN_C, 1e-13, 1e-13);
            assert_close(ref.rm, rm, RUN_C, 1e-14, 1e-14);
            assert_close(ref.rv, rv, RUN_C, 1e-14, 1e-14);
            continue;
        }
        run_bn(dt, xv, dyv, g, b, &got);
        /* FP32 arithmetic (sums of M terms of size <= 4) and one rounding to dt. */
        double e = mp_test_eps(dt), acc = 64 * 0x1p-24, sum = RUN_M * 8 * 0x1p-24;
        assert_close(got.y, ref.y, RUN_M * RUN_C, acc, e);
        assert_close(got.dx, ref.dx, RUN_M * RUN_C, acc, e);
        assert_close(got.dg, ref.dg, RUN_C, sum, 4 * 0x1p-24);
        assert_close(got.db, ref.db, RUN_C, sum, 4 * 0x1p-24);
        assert_close(got.rm, ref.rm, RUN_C, acc, 4 * 0x1p-24);
        assert_close(got.rv, ref.rv, RUN_C, acc, 4 * 0x1p-24);
    }
}

/* The CPU ops with batchnorm_backward wrapped to record the mp_bn_args it is given. */
static mp_ops recording_ops;
static mp_bn_args backward_args;
static int backward_calls;

static mp_status recording_backward(const mp_bn_args *a, const mp_tensor *x, const mp_tensor *y,
                                    const mp_tensor *dy, const mp_tensor *gamma,
                                    const mp_tensor *save_mean, const mp_tensor *save_invstd,
                                    mp_tensor *dx, mp_tensor *dgamma, mp_tensor *dbeta)
{
    backward_args = *a;
    backward_calls++;
    return ops->batchnorm_backward(a, x, y, dy, gamma, save_mean, save_invstd, dx, dgamma,
                                   dbeta);
}

/* Backward gets the layer's own eps and momentum (not a fixed eps), and its gradients are the
 * same whatever eps it is told: the arithmetic reads eps through save_invstd only. A backward
 * with eps <= 0 is refused, as the GPU refuses it. */
static void test_backward_gets_layer_eps(void **state)
{
    (void)state;
    recording_ops = *ops;
    recording_ops.batchnorm_backward = recording_backward;
    mp_layer l;
    int64_t in[3] = {2, 2, 3};
    const double eps = 1e-3, momentum = 0.3;
    assert_int_equal(mp_layer_batchnorm_init(&l, &recording_ops, "bn", in, eps, momentum), MP_OK);
    mp_rng rng;
    mp_rng_seed(&rng, 5, 0);
    bind_state(&l, MP_F64, &rng);
    int64_t s[4] = {3, 2, 2, 3};
    mp_tensor x = mp_test_rand(MP_F64, 4, s, &rng, -2, 3), y = mp_test_rand(MP_F64, 4, s, NULL, 0,
                               0);
    mp_tensor dy = mp_test_rand(MP_F64, 4, s, &rng, -1, 1), dx = mp_test_rand(MP_F64, 4, s, NULL,
                                0, 0);
    mp_tensor dx2 = mp_test_rand(MP_F64, 4, s, NULL, 0, 0);
    backward_calls = 0;
    assert_int_equal(l.cls->forward(&l, &x, &y, true), MP_OK);
    assert_int_equal(l.cls->backward(&l, &x, &y, &dy, &dx), MP_OK);
    assert_int_equal(backward_calls, 1);
    assert_true(backward_args.eps == eps && backward_args.momentum == momentum);
    double dg[3], db[3];
    memcpy(dg, l.dw[0].data, sizeof dg);
    memcpy(db, l.dw[1].data, sizeof db);
    const mp_bn_args other = {.eps = 0.5, .momentum = 0.0};
    assert_int_equal(ops->batchnorm_backward(&other, &x, NULL, &dy, &l.w[0], &l.buf[2],
                                             &l.buf[3], &dx2, &l.dw[0], &l.dw[1]),
                     MP_OK);
    assert_close(f64(&dx2), f64(&dx), (size_t)mp_tensor_numel(&dx), 0, 0);
    assert_close(f64(&l.dw[0]), dg, 3, 0, 0);
    assert_close(f64(&l.dw[1]), db, 3, 0, 0);
    const mp_bn_args zero = {.eps = 0.0, .momentum = momentum};
    assert_int_equal(ops->batchnorm_backward(&zero, &x, NULL, &dy, &l.w[0], &l.buf[2],
                                             &l.buf[3], &dx2, &l.dw[0], &l.dw[1]),
                     MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "batchnorm_backward"));
    mp_tensor *all[] = {&x, &y, &dy, &dx, &dx2};
    for (int i = 0; i < 5; i++)
        mp_tensor_free(all[i]);
    free_state(&l);
}

static void test_layer_declarations(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {4, 4, 6};
    assert_int_equal(mp_layer_batchnorm_init(&l, NULL, "block1.bn1", in, 1e-5, 0.1), MP_OK);
    assert_string_equal(l.cls->type, "batchnorm");
    assert_memory_equal(l.out_shape, in, sizeof in);
    assert_int_equal(l.nparams, 2);
    assert_string_equal(l.param_suffix[0], "weight");
    assert_string_equal(l.param_suffix[1], "bias");
    for (int j = 0; j < 2; j++) {
        assert_int_equal(l.param_ndim[j], 1);
        assert_int_equal(l.param_shape[j][0], 6);
        assert_true(l.param_norm[j]);
    }
    assert_int_equal(l.param_init[0], MP_INIT_ONES);
    assert_int_equal(l.param_init[1], MP_INIT_ZEROS);
    assert_int_equal(l.nbuffers, 4);
    const char *names[4] = {"running_mean", "running_var", "save_mean", "save_invstd"};
    const bool persistent[4] = {true, true, false, false};
    const double init[4] = {0, 1, 0, 0};
    for (int j = 0; j < 4; j++) {
        assert_string_equal(l.buffer_suffix[j], names[j]);
        assert_int_equal(l.buffer_numel[j], 6);
        assert_int_equal(l.buffer_persistent[j], persistent[j]);
        assert_true(l.buffer_init[j] == init[j]);
    }
    assert_true(l.bn.eps == 1e-5 && l.bn.momentum == 0.1);

    assert_int_equal(mp_layer_batchnorm_init(&l, NULL, "bnz", in, 0.0, 0.1), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "bnz"));
    assert_int_equal(mp_layer_batchnorm_init(&l, NULL, "bnm", in, 1e-5, 1.5), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "bnm"));
    int64_t empty[3] = {4, 0, 6};
    assert_int_equal(mp_layer_batchnorm_init(&l, NULL, "bne", empty, 1e-5, 0.1), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "bne"));
}

/* One value per channel cannot be normalised in training (PyTorch raises too); the op rejects
 * channel counts that do not match x's last dimension. */
static void test_errors(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {1, 1, 3};
    assert_int_equal(mp_layer_batchnorm_init(&l, ops, "bn7", in, BN_EPS, 0.1), MP_OK);
    bind_state(&l, MP_F64, NULL);
    double xv[3] = {1, 2, 3}, yv[3];
    int64_t s[4] = {1, 1, 1, 3};
    mp_tensor x = mp_tensor_view(xv, MP_F64, 4, s), y = mp_tensor_view(yv, MP_F64, 4, s);
    assert_int_equal(l.cls->forward(&l, &x, &y, true), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "bn7"));
    assert_int_equal(l.cls->forward(&l, &x, &y, false), MP_OK);
    int64_t s2[4] = {3, 1, 1, 1};
    mp_tensor x2 = mp_tensor_view(xv, MP_F64, 4, s2), y2 = mp_tensor_view(yv, MP_F64, 4, s2);
    assert_int_equal(ops->batchnorm_forward(&l.bn, false, &x2, &l.w[0], &l.w[1], &l.buf[0],
                                            &l.buf[1], NULL, NULL, &y2),
                     MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "batchnorm_forward"));
    free_state(&l);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck_images),
        cmocka_unit_test(test_gradcheck_features),
        cmocka_unit_test(test_running_stats_by_hand),
        cmocka_unit_test(test_eval_uses_running_stats),
        cmocka_unit_test(test_dtypes_against_fp64),
        cmocka_unit_test(test_backward_gets_layer_eps),
        cmocka_unit_test(test_layer_declarations),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
