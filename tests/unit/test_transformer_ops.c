/* The transformer ops of the CPU reference: FP64 finite-difference checks of layernorm_backward
 * (dx, dgamma, dbeta), gelu_backward and embedding_backward (repeated and unused ids,
 * accumulate); forward values against direct FP64 formulas, and FP32, fp16 and bf16 against
 * FP64; LayerNorm's statistics in FP32 for fp16 data (rows whose sum overflows fp16 and whose
 * variance a one-pass formula would lose); the embedding's refusal of ids that are not integers
 * in [0, V), with nothing written; embedding_backward's sums in increasing row order, bitwise, on
 * every call; shapes the ops refuse. L = sum(w * y) for a fixed random w makes dy = w. */
#include "tests/util/test_util.h"
#include "tests/util/test_fd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops.h"
#include "engine/rng.h"

#define H 1e-6 /* the finite-difference step */
#define RTOL 1e-6
#define ATOL 1e-8
#define LN_EPS 1e-5

static const mp_ops *ops;

static double *f64(const mp_tensor *t) { return t->data; }

/* The elements of t as doubles (malloc'd). */
static double *values(const mp_tensor *t)
{
    int64_t n = mp_tensor_numel(t);
    double *v = malloc(((size_t)n + 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = mp_load(t->data, t->dtype, (size_t)i);
    return v;
}

/* The operands of one op's loss L = sum(w * y): in[0..2] its inputs, y its output. */
typedef struct fd_set {
    mp_tensor in[3], y, w;
    double (*loss)(struct fd_set *s);
} fd_set;

static double set_loss(void *arg)
{
    fd_set *s = arg;
    return s->loss(s);
}

/* Central differences of s->loss by each element of v (FP64) against grad. */
static void check_fd(fd_set *s, mp_tensor *v, const mp_tensor *grad)
{
    int64_t n = mp_tensor_numel(v);
    double *num = malloc(((size_t)n + 1) * sizeof *num);
    assert_non_null(num);
    mp_test_fd(f64(v), n, H, set_loss, s, num);
    assert_close(f64(grad), num, (size_t)n, ATOL, RTOL);
    free(num);
}

static void free_set(fd_set *s)
{
    for (int i = 0; i < 3; i++)
        mp_tensor_free(&s->in[i]);
    mp_tensor_free(&s->y);
    mp_tensor_free(&s->w);
}

/* in = (x, gamma, beta) */
static double ln_loss(fd_set *s)
{
    assert_int_equal(ops->layernorm_forward(LN_EPS, &s->in[0], &s->in[1], &s->in[2], &s->y),
                     MP_OK);
    return mp_test_dot64(&s->y, &s->w);
}

static void ln_gradcheck(int64_t rows, int64_t C, uint64_t seed)
{
    mp_rng r;
    mp_rng_seed(&r, seed, 0);
    const int64_t xs[3] = {rows, 1, C};
    fd_set s = {.loss = ln_loss};
    s.in[0] = mp_test_rand(MP_F64, 3, xs, &r, -2, 3);
    s.in[1] = mp_test_rand(MP_F64, 1, &C, &r, 0.5, 1.5);
    s.in[2] = mp_test_rand(MP_F64, 1, &C, &r, -1, 1);
    s.y = mp_test_rand(MP_F64, 3, xs, NULL, 0, 0);
    s.w = mp_test_rand(MP_F64, 3, xs, &r, -1, 1);
    mp_tensor dx = mp_test_rand(MP_F64, 3, xs, NULL, 0, 0), dg = mp_test_rand(MP_F64, 1, &C, NULL,
                                0, 0);
    mp_tensor db = mp_test_rand(MP_F64, 1, &C, NULL, 0, 0);
    assert_int_equal(ops->layernorm_backward(LN_EPS, &s.in[0], &s.w, &s.in[1], &dx, &dg, &db),
                     MP_OK);
    check_fd(&s, &s.in[0], &dx);
    check_fd(&s, &s.in[1], &dg);
    check_fd(&s, &s.in[2], &db);
    /* without dx: the same parameter gradients, bit for bit, written over what was there */
    mp_tensor dg2 = mp_test_rand(MP_F64, 1, &C, &r, 5, 6), db2 = mp_test_rand(MP_F64, 1, &C, &r, 5,
                                 6);
    assert_int_equal(ops->layernorm_backward(LN_EPS, &s.in[0], &s.w, &s.in[1], NULL, &dg2,
                                             &db2),
                     MP_OK);
    assert_memory_equal(dg2.data, dg.data, (size_t)C * sizeof(double));
    assert_memory_equal(db2.data, db.data, (size_t)C * sizeof(double));
    mp_tensor *all[] = {&dx, &dg, &db, &dg2, &db2};
    for (int i = 0; i < 5; i++)
        mp_tensor_free(all[i]);
    free_set(&s);
}

static void test_layernorm_gradcheck(void **state)
{
    (void)state;
    ln_gradcheck(3, 5, 1);
    ln_gradcheck(1, 11, 2);
    ln_gradcheck(4, 2, 3);
}

/* in = (x) */
static double gelu_loss(fd_set *s)
{
    assert_int_equal(ops->gelu_forward(&s->in[0], &s->y), MP_OK);
    return mp_test_dot64(&s->y, &s->w);
}

static void test_gelu_gradcheck(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 4, 0);
    int64_t n = 41;
    fd_set s = {.loss = gelu_loss};
    s.in[0] = mp_test_rand(MP_F64, 1, &n, NULL, 0, 0);
    for (int64_t i = 0; i < n; i++) /* -6 .. 6 and a little off the grid */
        f64(&s.in[0])[i] = -6 + 12 * (double)i / (double)(n - 1) + 0.01 * mp_rng_uniform(&r);
    s.y = mp_test_rand(MP_F64, 1, &n, NULL, 0, 0);
    s.w = mp_test_rand(MP_F64, 1, &n, &r, -1, 1);
    mp_tensor dx = mp_test_rand(MP_F64, 1, &n, NULL, 0, 0);
    assert_int_equal(ops->gelu_backward(&s.in[0], &s.w, &dx), MP_OK);
    check_fd(&s, &s.in[0], &dx);
    /* in place (dx is dy): the same bits */
    mp_tensor g = mp_test_rand(MP_F64, 1, &n, NULL, 0, 0);
    memcpy(g.data, s.w.data, (size_t)n * sizeof(double));
    assert_int_equal(ops->gelu_backward(&s.in[0], &g, &g), MP_OK);
    assert_memory_equal(g.data, dx.data, (size_t)n * sizeof(double));
    mp_tensor_free(&g);
    mp_tensor_free(&dx);
    free_set(&s);
}

/* in = (ids, table) */
static double emb_loss(fd_set *s)
{
    assert_int_equal(ops->embedding_forward(&s->in[0], &s->in[1], &s->y), MP_OK);
    return mp_test_dot64(&s->y, &s->w);
}

/* ids 3 0 3 1 3 4 0 over V = 6: 3 three times, 0 twice, 2 and 5 never. */
static void test_embedding_gradcheck(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 5, 0);
    const double idv[7] = {3, 0, 3, 1, 3, 4, 0};
    const int64_t R = 7, V = 6, D = 3, ts[2] = {V, D}, ys[2] = {R, D};
    fd_set s = {.loss = emb_loss};
    s.in[0] = mp_test_rand(MP_F32, 1, &R, NULL, 0, 0);
    for (int64_t i = 0; i < R; i++)
        mp_store(s.in[0].data, MP_F32, (size_t)i, idv[i]);
    s.in[1] = mp_test_rand(MP_F64, 2, ts, &r, -1, 1);
    s.y = mp_test_rand(MP_F64, 2, ys, NULL, 0, 0);
    s.w = mp_test_rand(MP_F64, 2, ys, &r, -1, 1);
    mp_tensor dt = mp_test_rand(MP_F64, 2, ts, &r, 5, 6); /* overwritten */
    assert_int_equal(ops->embedding_backward(&s.in[0], &s.w, false, &dt), MP_OK);
    check_fd(&s, &s.in[1], &dt);
    /* accumulate: the old value is the first term, then the rows in increasing r */
    mp_tensor acc = mp_test_rand(MP_F64, 2, ts, &r, -1, 1);
    double want[18];
    memcpy(want, acc.data, sizeof want);
    for (int64_t i = 0; i < R; i++)
        for (int64_t d = 0; d < D; d++)
            want[(int64_t)idv[i] * D + d] += f64(&s.w)[i * D + d];
    assert_int_equal(ops->embedding_backward(&s.in[0], &s.w, true, &acc), MP_OK);
    assert_close(f64(&acc), want, (size_t)(V * D), 0, 0);
    mp_tensor_free(&dt);
    mp_tensor_free(&acc);
    free_set(&s);
}

/* LayerNorm of FP64 data against the formula, term by term. */
static void ln_reference(const double *x, const double *g, const double *b, int64_t rows,
                         int64_t C, double *y)
{
    for (int64_t i = 0; i < rows; i++) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < C; j++)
            mean += x[i * C + j];
        mean /= (double)C;
        for (int64_t j = 0; j < C; j++)
            var += (x[i * C + j] - mean) * (x[i * C + j] - mean);
        var /= (double)C;
        for (int64_t j = 0; j < C; j++)
            y[i * C + j] = (x[i * C + j] - mean) / sqrt(var + LN_EPS) * g[j] + b[j];
    }
}

/* FP64 to the formula's last bits; FP32, fp16 and bf16 x and y (FP32 or half parameters)
 * within a few roundings of their dtype of the formula on the same stored values. */
static void test_layernorm_forward_values(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 6, 0);
    const int64_t C = 37, shape[2] = {6, C};
    const mp_dtype dts[4] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    for (int k = 0; k < 4; k++)
        for (int half_params = 0; half_params < 2; half_params++) {
            mp_dtype dt = dts[k], pt = half_params ? dt : MP_F32;
            if (half_params && k < 2)
                continue;
            mp_tensor x = mp_test_rand(dt, 2, shape, &r, 1, 4), y = mp_test_rand(dt, 2, shape,
                                       NULL, 0, 0);
            mp_tensor g = mp_test_rand(pt, 1, &C, &r, 0.5, 1.5), b = mp_test_rand(pt, 1, &C, &r,
                                       -1, 1);
            assert_int_equal(ops->layernorm_forward(LN_EPS, &x, &g, &b, &y), MP_OK);
            double *xv = values(&x), *gv = values(&g), *bv = values(&b), *yv = values(&y);
            double want[6 * 37];
            ln_reference(xv, gv, bv, 6, C, want);
            double e = mp_test_eps(dt);
            if (dt == MP_F64)
                assert_close(yv, want, (size_t)(6 * C), 1e-14, 1e-14);
            else
                assert_close(yv, want, (size_t)(6 * C), 64 * mp_test_eps(MP_F32) + 2 * e,
                             2 * e);
            free(xv);
            free(gv);
            free(bv);
            free(yv);
            mp_tensor *all[] = {&x, &y, &g, &b};
            for (int i = 0; i < 4; i++)
                mp_tensor_free(all[i]);
        }
}

/* fp16 rows near 2000 whose sum (128000) overflows fp16 and whose variance (5.25) a one-pass
 * E[x^2] - mean^2 in FP32 would lose (E[x^2] is 4e6, its FP32 ulp 0.25): FP32 statistics in
 * two passes give the formula's values, and the same bits as the same values stored in FP32,
 * forward and backward. */
static void test_layernorm_fp16_statistics(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 7, 0);
    const int64_t C = 64, rows = 2, shape[2] = {rows, C};
    mp_tensor x16 = mp_test_rand(MP_F16, 2, shape, NULL, 0, 0);
    mp_tensor x32 = mp_test_rand(MP_F32, 2, shape, NULL, 0, 0);
    for (int64_t i = 0; i < rows * C; i++) {
        double v = 1996 + (double)(i % 8) + (i >= C ? 40 : 0);
        mp_store(x16.data, MP_F16, (size_t)i, v);
        mp_store(x32.data, MP_F32, (size_t)i, v);
    }
    mp_tensor g = mp_test_rand(MP_F32, 1, &C, &r, 0.5, 1.5), b = mp_test_rand(MP_F32, 1, &C, &r,
                               -1, 1);
    mp_tensor y16 = mp_test_rand(MP_F16, 2, shape, NULL, 0, 0);
    mp_tensor y32 = mp_test_rand(MP_F16, 2, shape, NULL, 0, 0);
    assert_int_equal(ops->layernorm_forward(LN_EPS, &x16, &g, &b, &y16), MP_OK);
    assert_int_equal(ops->layernorm_forward(LN_EPS, &x32, &g, &b, &y32), MP_OK);
    double *xv = values(&x16), *gv = values(&g), *bv = values(&b), *yv = values(&y16);
    double want[2 * 64];
    ln_reference(xv, gv, bv, rows, C, want);
    assert_close(yv, want, (size_t)(rows * C), 1e-3, 2 * mp_test_eps(MP_F16));
    assert_memory_equal(y16.data, y32.data, (size_t)(rows * C) * 2);

    mp_tensor dy = mp_test_rand(MP_F16, 2, shape, &r, -1, 1);
    mp_tensor dx16 = mp_test_rand(MP_F16, 2, shape, NULL, 0, 0);
    mp_tensor dx32 = mp_test_rand(MP_F16, 2, shape, NULL, 0, 0);
    mp_tensor dg16 = mp_test_rand(MP_F32, 1, &C, NULL, 0, 0), dg32 = mp_test_rand(MP_F32, 1, &C,
                                  NULL, 0, 0);
    mp_tensor db16 = mp_test_rand(MP_F32, 1, &C, NULL, 0, 0), db32 = mp_test_rand(MP_F32, 1, &C,
                                  NULL, 0, 0);
    assert_int_equal(ops->layernorm_backward(LN_EPS, &x16, &dy, &g, &dx16, &dg16, &db16), MP_OK);
    assert_int_equal(ops->layernorm_backward(LN_EPS, &x32, &dy, &g, &dx32, &dg32, &db32), MP_OK);
    assert_memory_equal(dx16.data, dx32.data, (size_t)(rows * C) * 2);
    assert_memory_equal(dg16.data, dg32.data, (size_t)C * 4);
    /* dgamma = sum of dy xhat with xhat = (j % 8 - 3.5) / sqrt(5.25 + eps) in both rows */
    double *dyv = values(&dy), *dgv = values(&dg16), dg_want[64];
    for (int64_t j = 0; j < C; j++)
        dg_want[j] = (dyv[j] + dyv[C + j]) * ((double)(j % 8) - 3.5) / sqrt(5.25 + LN_EPS);
    assert_close(dgv, dg_want, (size_t)C, 1e-5, 1e-5);
    free(xv);
    free(gv);
    free(bv);
    free(yv);
    free(dyv);
    free(dgv);
    mp_tensor *all[] = {&x16, &x32, &g, &b, &y16, &y32, &dy, &dx16, &dx32, &dg16, &dg32,
                        &db16, &db32};
    for (int i = 0; i < 13; i++)
        mp_tensor_free(all[i]);
}

/* PyTorch's tanh form, term by term in FP64. */
static double gelu_reference(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

/* FP64 to the formula's last bits and within 5e-4 of the exact (erf) GELU, which the tanh form
 * approximates; FP32, fp16 and bf16 within a few roundings of their dtype; in place the same. */
static void test_gelu_forward_values(void **state)
{
    (void)state;
    const int64_t n = 241;
    const mp_dtype dts[4] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    for (int k = 0; k < 4; k++) {
        mp_dtype dt = dts[k];
        mp_tensor x = mp_test_rand(dt, 1, &n, NULL, 0, 0), y = mp_test_rand(dt, 1, &n, NULL, 0, 0);
        for (int64_t i = 0; i < n; i++)
            mp_store(x.data, dt, (size_t)i, -6 + 0.05 * (double)i);
        assert_int_equal(ops->gelu_forward(&x, &y), MP_OK);
        double *xv = values(&x), *yv = values(&y), want[241], exact[241];
        for (int64_t i = 0; i < n; i++) {
            want[i] = gelu_reference(xv[i]);
            exact[i] = 0.5 * xv[i] * (1 + erf(xv[i] / sqrt(2.0)));
        }
        double e = mp_test_eps(dt);
        if (dt == MP_F64) {
            assert_close(yv, want, (size_t)n, 1e-15, 1e-14);
            assert_close(yv, exact, (size_t)n, 5e-4, 0);
        } else {
            assert_close(yv, want, (size_t)n, 16 * mp_test_eps(MP_F32), 2 * e);
        }
        assert_int_equal(ops->gelu_forward(&x, &x), MP_OK); /* in place */
        assert_memory_equal(x.data, y.data, (size_t)n * mp_dtype_size(dt));
        free(xv);
        free(yv);
        mp_tensor_free(&x);
        mp_tensor_free(&y);
    }
}

/* Rows are table rows rounded once to y's dtype (FP32 -> fp16 here), FP64 rows exactly. */
static void test_embedding_forward_values(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 8, 0);
    const int64_t R = 9, V = 13, D = 5, ts[2] = {V, D}, ys[2] = {R, D};
    mp_tensor ids = mp_test_rand(MP_BF16, 1, &R, NULL, 0, 0);
    for (int64_t i = 0; i < R; i++)
        mp_store(ids.data, MP_BF16, (size_t)i, (double)((i * 5 + 3) % V));
    mp_tensor t32 = mp_test_rand(MP_F32, 2, ts, &r, -100, 100), t64 = mp_test_rand(MP_F64, 2, ts,
                                 &r, -1, 1);
    mp_tensor y16 = mp_test_rand(MP_F16, 2, ys, NULL, 0, 0), y64 = mp_test_rand(MP_F64, 2, ys,
                                 NULL, 0, 0);
    assert_int_equal(ops->embedding_forward(&ids, &t32, &y16), MP_OK);
    assert_int_equal(ops->embedding_forward(&ids, &t64, &y64), MP_OK);
    for (int64_t i = 0; i < R; i++)
        for (int64_t d = 0; d < D; d++) {
            int64_t v = (i * 5 + 3) % V;
            uint16_t h = ((uint16_t *)y16.data)[i * D + d];
            assert_int_equal(h, mp_f32_to_f16(((float *)t32.data)[v * D + d]));
            assert_true(f64(&y64)[i * D + d] == f64(&t64)[v * D + d]);
        }
    mp_tensor *all[] = {&ids, &t32, &t64, &y16, &y64};
    for (int i = 0; i < 5; i++)
        mp_tensor_free(all[i]);
}

/* An id that is not an integer in [0, V) (V itself, -1, 2.5, NaN, inf), in any row and any
 * dtype, fails both directions with MP_EINTERNAL naming the op, and nothing is written. */
static void test_embedding_refuses_bad_ids(void **state)
{
    (void)state;
    const double bad[5] = {5, -1, 2.5, NAN, INFINITY};
    const mp_dtype dts[3] = {MP_F32, MP_F16, MP_F64};
    const int64_t R = 4, V = 5, D = 3, ts[2] = {V, D}, ys[2] = {R, D};
    mp_tensor table = mp_test_rand(MP_F32, 2, ts, NULL, 0, 0), y = mp_test_rand(MP_F32, 2, ys,
                                   NULL, 0, 0);
    mp_tensor dy = mp_test_rand(MP_F32, 2, ys, NULL, 0, 0);
    for (int k = 0; k < 5; k++)
        for (int d = 0; d < 3; d++) {
            mp_tensor ids = mp_test_rand(dts[d], 1, &R, NULL, 0, 0);
            for (int64_t i = 0; i < R; i++)
                mp_store(ids.data, dts[d], (size_t)i, i == (k % 4) ? bad[k] : (double)i);
            for (int64_t i = 0; i < V * D; i++)
                ((float *)table.data)[i] = 7.0f;
            for (int64_t i = 0; i < R * D; i++)
                ((float *)y.data)[i] = ((float *)dy.data)[i] = 3.0f;
            assert_int_equal(ops->embedding_forward(&ids, &table, &y), MP_EINTERNAL);
            assert_non_null(strstr(mp_error_message(), "embedding_forward"));
            for (int64_t i = 0; i < R * D; i++)
                assert_true(((float *)y.data)[i] == 3.0f);
            for (int acc = 0; acc < 2; acc++) {
                assert_int_equal(ops->embedding_backward(&ids, &dy, acc, &table), MP_EINTERNAL);
                assert_non_null(strstr(mp_error_message(), "embedding_backward"));
                for (int64_t i = 0; i < V * D; i++)
                    assert_true(((float *)table.data)[i] == 7.0f);
            }
            mp_error_clear();
            mp_tensor_free(&ids);
        }
    mp_tensor_free(&table);
    mp_tensor_free(&y);
    mp_tensor_free(&dy);
}

/* dtable's rows are FP32 sums in increasing r from 0 (or the old value), rounded once: the same
 * bits as that loop here, on each of two calls. Rows mix magnitudes (1e4 .. 1e-4) so that
 * another order gives other bits; a hand case: 1e8 + 1 - 1e8 is 0 in FP32 in that order. */
static void test_embedding_backward_order(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 9, 0);
    const int64_t R = 1000, V = 7, D = 5, ts[2] = {V, D}, ys[2] = {R, D};
    mp_tensor ids = mp_test_rand(MP_F16, 1, &R, NULL, 0, 0), dy = mp_test_rand(MP_F32, 2, ys, NULL,
                                 0, 0);
    for (int64_t i = 0; i < R; i++)
        mp_store(ids.data, MP_F16, (size_t)i, (double)mp_rng_below(&r, V - 1)); /* V-1 unused */
    for (int64_t i = 0; i < R * D; i++)
        ((float *)dy.data)[i] = (float)((mp_rng_uniform(&r) - 0.5) * pow(10, (double)(i % 9) - 4));
    const mp_dtype dts[2] = {MP_F32, MP_BF16};
    for (int k = 0; k < 2; k++)
        for (int acc = 0; acc < 2; acc++) {
            mp_dtype dt = dts[k];
            mp_tensor a = mp_test_rand(dt, 2, ts, &r, -1, 1), b = mp_test_rand(dt, 2, ts, NULL, 0,
                                       0);
            memcpy(b.data, a.data, (size_t)mp_tensor_bytes(&a));
            float sum[35];
            for (int64_t i = 0; i < V * D; i++)
                sum[i] = acc ? (float)mp_load(a.data, dt, (size_t)i) : 0.0f;
            for (int64_t i = 0; i < R; i++) {
                int64_t v = (int64_t)mp_load(ids.data, MP_F16, (size_t)i);
                for (int64_t d = 0; d < D; d++)
                    sum[v * D + d] += ((float *)dy.data)[i * D + d];
            }
            mp_tensor want = mp_test_rand(dt, 2, ts, NULL, 0, 0);
            mp_convert(want.data, dt, sum, MP_F32, (size_t)(V * D));
            assert_int_equal(ops->embedding_backward(&ids, &dy, acc, &a), MP_OK);
            assert_int_equal(ops->embedding_backward(&ids, &dy, acc, &b), MP_OK);
            assert_memory_equal(a.data, want.data, (size_t)mp_tensor_bytes(&a));
            assert_memory_equal(b.data, want.data, (size_t)mp_tensor_bytes(&a));
            mp_tensor_free(&a);
            mp_tensor_free(&b);
            mp_tensor_free(&want);
        }
    mp_tensor_free(&ids);
    mp_tensor_free(&dy);

    const int64_t R3 = 3, V3 = 3, D3 = 1, ts3[2] = {V3, D3}, ys3[2] = {R3, D3};
    float iv[3] = {2, 2, 2}, gv[3] = {1e8f, 1.0f, -1e8f}, out[3] = {9, 9, 9};
    mp_tensor i3 = mp_tensor_view(iv, MP_F32, 1, &R3), g3 = mp_tensor_view(gv, MP_F32, 2, ys3);
    mp_tensor o3 = mp_tensor_view(out, MP_F32, 2, ts3);
    assert_int_equal(ops->embedding_backward(&i3, &g3, false, &o3), MP_OK);
    assert_true(out[0] == 0.0f && out[1] == 0.0f && out[2] == 0.0f);
}

/* Shapes that do not match are MP_EINTERNAL naming the op. */
static void test_refused_shapes(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 5}, four = 4, five = 5, six = 6, ys[2] = {3, 4};
    mp_tensor x = mp_test_rand(MP_F32, 2, xs, NULL, 0, 0), y = mp_test_rand(MP_F32, 2, xs, NULL, 0,
                               0);
    mp_tensor g4 = mp_test_rand(MP_F32, 1, &four, NULL, 0, 0), g5 = mp_test_rand(MP_F32, 1, &five,
                                NULL, 0, 0);
    mp_tensor g6 = mp_test_rand(MP_F32, 1, &six, NULL, 0, 0), y4 = mp_test_rand(MP_F32, 2, ys,
                                NULL, 0, 0);
    assert_int_equal(ops->layernorm_forward(LN_EPS, &x, &g4, &g4, &y), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "layernorm_forward"));
    assert_int_equal(ops->layernorm_forward(LN_EPS, &x, &g5, &g6, &y), MP_EINTERNAL);
    assert_int_equal(ops->layernorm_forward(LN_EPS, &x, &g5, &g5, &y4), MP_EINTERNAL);
    assert_int_equal(ops->layernorm_forward(-1, &x, &g5, &g5, &y), MP_EINTERNAL);
    assert_int_equal(ops->layernorm_backward(LN_EPS, &x, &y, &g5, &x, &g5, &g6), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "layernorm_backward"));
    assert_int_equal(ops->layernorm_backward(LN_EPS, &x, &y4, &g5, NULL, &g5, &g5),
                     MP_EINTERNAL);
    assert_int_equal(ops->gelu_forward(&x, &y4), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "gelu_forward"));
    assert_int_equal(ops->gelu_backward(&x, &y, &y4), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "gelu_backward"));
    /* ids (5) against a table (3, 5): y must be (5, 5) */
    assert_int_equal(ops->embedding_forward(&g5, &x, &y), MP_EINTERNAL);
    assert_int_equal(ops->embedding_backward(&g5, &y, false, &x), MP_EINTERNAL);
    mp_error_clear();
    mp_tensor *all[] = {&x, &y, &g4, &g5, &g6, &y4};
    for (int i = 0; i < 6; i++)
        mp_tensor_free(all[i]);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_gradcheck),
        cmocka_unit_test(test_gelu_gradcheck),
        cmocka_unit_test(test_embedding_gradcheck),
        cmocka_unit_test(test_layernorm_forward_values),
        cmocka_unit_test(test_layernorm_fp16_statistics),
        cmocka_unit_test(test_gelu_forward_values),
        cmocka_unit_test(test_embedding_forward_values),
        cmocka_unit_test(test_embedding_refuses_bad_ids),
        cmocka_unit_test(test_embedding_backward_order),
        cmocka_unit_test(test_refused_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
