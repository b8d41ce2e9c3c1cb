/* The CPU ops' seeded run and its byte-for-byte comparison (tests/util/test_cpu_ops.h). */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "tests/util/test_cpu_ops.h"

enum { N = 4, H = 16, W = 16 };

mp_tensor *mp_test_keep(mp_test_outputs *o, mp_tensor t)
{
    assert_true(o->n < MP_TEST_OPS_MAX);
    o->t[o->n] = t;
    return &o->t[o->n++];
}

static mp_pool_desc pool(int k, int s, int pad, bool max)
{
    mp_pool_desc d;
    memset(&d, 0, sizeof d);
    d.window[0] = d.window[1] = k;
    d.stride[0] = d.stride[1] = s;
    d.pad[0] = d.pad[1] = pad;
    d.max = max;
    return d;
}

static void element_wise(const mp_ops *ops, mp_dtype dt, int64_t C, mp_rng *r,
                         mp_test_outputs *o)
{
    int64_t s[4] = {N, H, W, C};
    mp_tensor x = mp_test_rand(dt, 4, s, r, -2, 2), b = mp_test_rand(dt, 4, s, r, -2, 2);
    mp_tensor dy = mp_test_rand(dt, 4, s, r, -1, 1);
    mp_tensor *y = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->relu_forward(&x, y), MP_OK);
    mp_tensor *dx = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->relu_backward(y, &dy, dx), MP_OK);
    mp_tensor *g = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->gelu_forward(&x, g), MP_OK);
    mp_tensor *dg = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->gelu_backward(&x, &dy, dg), MP_OK);
    mp_tensor *sum = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->add(&x, &b, sum), MP_OK);
    assert_int_equal(ops->add(sum, &dy, sum), MP_OK); /* in place */
    mp_tensor *sum_relu = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->add_relu(&x, &b, sum_relu), MP_OK);
    assert_int_equal(ops->scale(sum, 0.37), MP_OK);
    mp_tensor *d = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->dropout_forward(0.3, 77, 5, NULL, &x, d), MP_OK);
    mp_tensor *dd = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->dropout_backward(0.3, 77, 5, NULL, &dy, dd), MP_OK);
    int64_t rows[2] = {N * H * W, C}, bs[1] = {C};
    mp_tensor bias = mp_test_rand(dt, 1, bs, r, -1, 1);
    mp_tensor *yb = mp_test_keep(o, mp_test_rand(dt, 2, rows, r, -2, 2));
    assert_int_equal(ops->bias_add(yb, &bias), MP_OK);
    mp_tensor *db = mp_test_keep(o, mp_test_rand(dt, 1, bs, NULL, 0, 0));
    assert_int_equal(ops->bias_grad(yb, db), MP_OK);
    mp_tensor *all[] = {&x, &b, &dy, &bias};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

static void pooling(const mp_ops *ops, mp_dtype dt, int64_t C, mp_rng *r, mp_test_outputs *o)
{
    int64_t s[4] = {N, H, W, C};
    mp_tensor x = mp_test_rand(dt, 4, s, r, -2, 2);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i += 997) /* NaN in some windows */
        mp_store(x.data, dt, (size_t)i, NAN);
    mp_pool_desc ds[3] = {pool(2, 2, 0, true), pool(3, 2, 1, true), pool(3, 2, 1, false)};
    for (int k = 0; k < 3; k++) {
        int64_t P = (H + 2 * ds[k].pad[0] - ds[k].window[0]) / ds[k].stride[0] + 1;
        int64_t ys[4] = {N, P, P, C};
        mp_tensor *y = mp_test_keep(o, mp_test_rand(dt, 4, ys, NULL, 0, 0));
        assert_int_equal(ops->pool_forward(&ds[k], &x, y), MP_OK);
        mp_tensor dy = mp_test_rand(dt, 4, ys, r, -1, 1);
        mp_tensor *dx = mp_test_keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
        assert_int_equal(ops->pool_backward(&ds[k], &x, y, &dy, dx), MP_OK);
        mp_tensor_free(&dy);
    }
    bool bad = false;
    assert_int_equal(ops->grad_stats(&x, 1.0, &o->v[o->nv++], &bad), MP_OK);
    assert_true(bad);
    mp_tensor_free(&x);
}

/* Writes mp_test_cpu_bn_run_specials's special values into x and dy (M rows of C channels). */
static void bn_specials(mp_tensor *x, mp_tensor *dy, int64_t M, int64_t C)
{
    const mp_dtype dt = x->dtype;
    const double tiny = dt == MP_F16 ? 3e-6 : 1e-39; /* subnormal in fp16; in FP32 and bf16 */
    for (int64_t m = 0; m < M; m++) {
        mp_store(dy->data, dt, (size_t)(m * C), tiny * (double)(1 + m % 3));
        if (C > 9 && m % 5 == 1)
            mp_store(x->data, dt, (size_t)(m * C + 9), NAN);
        if (C > 2) {
            mp_store(x->data, dt, (size_t)(m * C + 2), m % 2 ? 6e4 : -6e4);
            mp_store(dy->data, dt, (size_t)(m * C + 2), 6e4);
        }
        if (C > 10 && m == M / 2)
            mp_store(x->data, dt, (size_t)(m * C + 10), INFINITY);
    }
}

/* mp_test_cpu_bn_run, with bn_specials's values among the inputs when `specials`. */
static void bn_run(const mp_ops *ops, mp_dtype dt, mp_dtype pt, int64_t M, int64_t C, mp_rng *r,
                   bool specials, mp_test_outputs *o)
{
    int64_t s[2] = {M, C}, cs[1] = {C};
    mp_bn_args a = {.eps = 1e-5, .momentum = 0.1};
    mp_tensor x = mp_test_rand(dt, 2, s, r, -2, 3), dy = mp_test_rand(dt, 2, s, r, -1, 1);
    if (specials)
        bn_specials(&x, &dy, M, C);
    mp_tensor g = mp_test_rand(pt, 1, cs, r, 0.5, 1.5), b = mp_test_rand(pt, 1, cs, r, -1, 1);
    mp_tensor *rm = mp_test_keep(o, mp_test_rand(pt, 1, cs, r, -0.1, 0.1));
    mp_tensor *rv = mp_test_keep(o, mp_test_rand(pt, 1, cs, r, 0.9, 1.1));
    mp_tensor *sm = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *si = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *y = mp_test_keep(o, mp_test_rand(dt, 2, s, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_forward(&a, true, &x, &g, &b, rm, rv, sm, si, y), MP_OK);
    mp_tensor *dx = mp_test_keep(o, mp_test_rand(dt, 2, s, NULL, 0, 0));
    mp_tensor *dg = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *db = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_backward(&a, &x, NULL, &dy, &g, sm, si, dx, dg, db), MP_OK);
    dg = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    db = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_backward(&a, &x, NULL, &dy, &g, sm, si, NULL, dg, db), MP_OK);
    mp_tensor *ye = mp_test_keep(o, mp_test_rand(dt, 2, s, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_forward(&a, false, &x, &g, &b, rm, rv, NULL, NULL, ye),
                     MP_OK);
    mp_bn_args fused = a; /* BatchNorm + ReLU: y, and dx, dgamma, dbeta through its mask */
    fused.relu = true;
    mp_tensor *yr = mp_test_keep(o, mp_test_rand(dt, 2, s, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_forward(&fused, true, &x, &g, &b, rm, rv, sm, si, yr), MP_OK);
    dx = mp_test_keep(o, mp_test_rand(dt, 2, s, NULL, 0, 0));
    dg = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    db = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_backward(&fused, &x, yr, &dy, &g, sm, si, dx, dg, db), MP_OK);
    mp_tensor *all[] = {&x, &dy, &g, &b};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

void mp_test_cpu_bn_run(const mp_ops *ops, mp_dtype dt, mp_dtype pt, int64_t M, int64_t C,
                        mp_rng *r, mp_test_outputs *o)
{
    bn_run(ops, dt, pt, M, C, r, false, o);
}

void mp_test_cpu_bn_run_specials(const mp_ops *ops, mp_dtype dt, mp_dtype pt, int64_t M,
                                 int64_t C, mp_rng *r, mp_test_outputs *o)
{
    bn_run(ops, dt, pt, M, C, r, true, o);
}

static void optimizer(const mp_ops *ops, mp_dtype dt, mp_rng *r, mp_test_outputs *o)
{
    mp_dtype pt = dt == MP_F64 ? MP_F64 : MP_F32;
    int64_t n[1] = {100003};
    mp_tensor gr = mp_test_rand(dt, 1, n, r, -1, 1);
    for (int k = 0; k < 4; k++) { /* Adam; SGD with momentum, with Nesterov, plain */
        mp_optim_args a = {.kind = k ? MP_OPTIM_SGD : MP_OPTIM_ADAM, .lr = 0.01,
                           .weight_decay = 1e-4, .momentum = k == 3 ? 0 : 0.9,
                           .nesterov = k == 2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                           .step = 3, .grad_scale = 0.5};
        mp_tensor *w = mp_test_keep(o, mp_test_rand(pt, 1, n, r, -1, 1));
        mp_tensor *copy = dt == pt ? NULL : mp_test_keep(o, mp_test_rand(dt, 1, n, NULL, 0, 0));
        mp_tensor *m1 = k == 3 ? NULL : mp_test_keep(o, mp_test_rand(pt, 1, n, r, -0.1, 0.1));
        mp_tensor m2 = mp_test_rand(pt, 1, n, r, 0, 0.01);
        assert_int_equal(ops->optim_step(&a, NULL, w, copy, &gr, m1, k ? NULL : &m2), MP_OK);
        mp_tensor_free(&m2);
    }
    bool bad = false;
    assert_int_equal(ops->grad_stats(&gr, 0.25, &o->v[o->nv++], &bad), MP_OK);
    assert_false(bad);
    mp_tensor_free(&gr);
}

/* The row-wise ops at WIDE features a row (wider than bias_grad's and LayerNorm's column
 * groups, not a multiple of them): bias_grad, LayerNorm forward, and its backward with dx
 * apart, with dx = dy (in place) and without dx; gamma and beta of dtype pt. */
static void row_wise(const mp_ops *ops, mp_dtype dt, mp_dtype pt, mp_rng *r, mp_test_outputs *o)
{
    enum { WIDE = 200 };
    int64_t s[2] = {N * H * W, WIDE}, cs[1] = {WIDE};
    mp_tensor x = mp_test_rand(dt, 2, s, r, -2, 2), dy = mp_test_rand(dt, 2, s, r, -1, 1);
    mp_tensor g = mp_test_rand(pt, 1, cs, r, 0.5, 1.5), b = mp_test_rand(pt, 1, cs, r, -1, 1);
    mp_tensor *db = mp_test_keep(o, mp_test_rand(dt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->bias_grad(&dy, db), MP_OK);
    mp_tensor *y = mp_test_keep(o, mp_test_rand(dt, 2, s, NULL, 0, 0));
    assert_int_equal(ops->layernorm_forward(1e-5, &x, &g, &b, y), MP_OK);
    mp_tensor *dx = mp_test_keep(o, mp_test_rand(dt, 2, s, NULL, 0, 0));
    mp_tensor *dg = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *dbeta = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->layernorm_backward(1e-5, &x, &dy, &g, dx, dg, dbeta), MP_OK);
    dg = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    dbeta = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->layernorm_backward(1e-5, &x, &dy, &g, NULL, dg, dbeta), MP_OK);
    dg = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    dbeta = mp_test_keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *inplace = mp_test_keep(o, dy);
    assert_int_equal(ops->layernorm_backward(1e-5, &x, inplace, &g, inplace, dg, dbeta), MP_OK);
    mp_tensor *all[] = {&x, &g, &b};
    for (int i = 0; i < 3; i++)
        mp_tensor_free(all[i]);
}

/* One attention geometry: N sequences of H x W tokens, D columns in `heads` heads. */
typedef struct attn_shape {
    int64_t N, H, W, heads, D;
} attn_shape;

/* Both attention paths, forward and backward, on shape s: causal with dropout, then neither. */
static void attention_case(const mp_ops *ops, mp_dtype dt, attn_shape s, mp_rng *r,
                           mp_test_outputs *o)
{
    int64_t T = s.H * s.W, qs[4] = {s.N, s.H, s.W, 3 * s.D}, os[4] = {s.N, s.H, s.W, s.D};
    int64_t ss[4] = {s.N, s.heads, T, 2}, ps[4] = {s.N, s.heads, T, T};
    const mp_dtype st = dt == MP_F64 ? MP_F64 : MP_F32;
    mp_tensor qkv = mp_test_rand(dt, 4, qs, r, -2, 2), dout = mp_test_rand(dt, 4, os, r, -1, 1);
    for (int causal = 1; causal >= 0; causal--) {
        mp_attn_desc d = {.heads = (int)s.heads, .causal = causal, .dropout_p = causal ? 0.1 : 0,
                          .seed = 7, .offset = 1000};
        mp_tensor *stats = mp_test_keep(o, mp_test_rand(st, 4, ss, NULL, 0, 0));
        mp_tensor *out = mp_test_keep(o, mp_test_rand(dt, 4, os, NULL, 0, 0));
        assert_int_equal(ops->attention_flash_forward(&d, &qkv, stats, out), MP_OK);
        mp_tensor *dqkv = mp_test_keep(o, mp_test_rand(dt, 4, qs, NULL, 0, 0));
        assert_int_equal(ops->attention_flash_backward(&d, &qkv, out, stats, &dout, dqkv), MP_OK);
        mp_tensor *probs = mp_test_keep(o, mp_test_rand(dt, 4, ps, NULL, 0, 0));
        out = mp_test_keep(o, mp_test_rand(dt, 4, os, NULL, 0, 0));
        assert_int_equal(ops->attention_forward(&d, &qkv, probs, out), MP_OK);
        dqkv = mp_test_keep(o, mp_test_rand(dt, 4, qs, NULL, 0, 0));
        assert_int_equal(ops->attention_backward(&d, &qkv, probs, &dout, dqkv), MP_OK);
    }
    mp_tensor_free(&qkv);
    mp_tensor_free(&dout);
}

/* 2 sequences of 129 tokens (three tiles of attention_flash.c, the last of one row) in 3 heads
 * of 20 columns (no vector width divides a head); then one sequence of 300 tokens in one head of
 * 128 columns, whose products, a tile's included, are large enough for OpenBLAS to thread them
 * (a call with one head has no heads to split). */
static void attention(const mp_ops *ops, mp_dtype dt, mp_rng *r, mp_test_outputs *o)
{
    attention_case(ops, dt, (attn_shape){2, 3, 43, 3, 60}, r, o);
    attention_case(ops, dt, (attn_shape){1, 12, 25, 1, 128}, r, o);
}

/* Softmax cross-entropy with label smoothing over 300 rows of 257 classes (no vector width
 * divides a row), with and without the gradient: the loss and the hit count as values. */
static void xent(const mp_ops *ops, mp_dtype dt, mp_rng *r, mp_test_outputs *o)
{
    enum { XR = 300, XC = 257 };
    int64_t shape[2] = {XR, XC};
    mp_tensor logits = mp_test_rand(dt, 2, shape, r, -8, 8);
    int32_t labels[XR];
    for (int i = 0; i < XR; i++)
        labels[i] = (int32_t)(mp_rng_next(r) % XC);
    for (int grad = 0; grad < 2; grad++) {
        mp_tensor *d = grad ? mp_test_keep(o, mp_test_rand(dt, 2, shape, NULL, 0, 0)) : NULL;
        mp_xent_result res;
        assert_int_equal(ops->softmax_xent(&logits, labels, 0.1, 0.5, NULL, &res, d), MP_OK);
        assert_true(o->nv + 2 <= MP_TEST_OPS_MAX);
        o->v[o->nv++] = res.loss;
        o->v[o->nv++] = (double)res.correct;
    }
    mp_tensor_free(&logits);
}

void mp_test_cpu_ops_run(const mp_ops *ops, mp_dtype dt, int64_t C, mp_test_outputs *o)
{
    mp_rng r;
    mp_rng_seed(&r, 2026, 0);
    memset(o, 0, sizeof *o);
    element_wise(ops, dt, C, &r, o);
    pooling(ops, dt, C, &r, o);
    const mp_dtype pt = dt == MP_F64 ? MP_F64 : MP_F32;
    row_wise(ops, dt, pt, &r, o);
    attention(ops, dt, &r, o);
    xent(ops, dt, &r, o);
    mp_test_cpu_bn_run(ops, dt, pt, N * H * W, C, &r, o);
    mp_test_cpu_bn_run(ops, dt, pt, N * H * W, 100, &r, o);
    optimizer(ops, dt, &r, o);
}

void mp_test_outputs_same(mp_test_outputs *a, mp_test_outputs *b, const char *what, mp_dtype dt)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->nv, b->nv);
    for (int i = 0; i < a->n; i++) {
        assert_int_equal(mp_tensor_bytes(&a->t[i]), mp_tensor_bytes(&b->t[i]));
        if (memcmp(a->t[i].data, b->t[i].data, (size_t)mp_tensor_bytes(&a->t[i])) != 0)
            fail_msg("%s: output %d differs %s", mp_dtype_name(dt), i, what);
        mp_tensor_free(&a->t[i]);
        mp_tensor_free(&b->t[i]);
    }
    for (int i = 0; i < a->nv; i++)
        if (memcmp(&a->v[i], &b->v[i], sizeof a->v[i]) != 0)
            fail_msg("%s: scalar output %d differs %s", mp_dtype_name(dt), i, what);
}
