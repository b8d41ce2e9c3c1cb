/* Multi-head self-attention on the CPU backend (attention_forward, attention_backward): the
 * forward against a direct FP64 reference that applies the op's roundings (S and P to probs'
 * dtype) in every dtype, 1 to 4 heads, odd sequence lengths, causal or not, with dropout; FP64
 * finite differences of dqkv (dropout with its fixed mask included); the causal mask exactly
 * (no gradient and no change of out[t] from tokens after t, across the CPU's row blocks);
 * fp16's overflow of S to inf turning the rows NaN where bf16, FP32 and FP32 probabilities stay
 * finite; softmax rows summing to 1 within their rounding, masked entries exactly 0; and the
 * shapes and dtypes the op refuses. */
#include "tests/util/test_util.h"
#include "tests/util/test_attn.h"
#include "tests/util/test_fd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/attn_geom.h"
#include "engine/dropout_mask.h"
#include "engine/ops.h"
#include "engine/rng.h"

#define EPS 1e-6
#define RTOL 1e-6
#define ATOL 1e-8

static const mp_ops *ops;

static const mp_dtype all_dtypes[4] = {MP_F64, MP_F32, MP_F16, MP_BF16};

/* The tensors of one call: qkv (N, H, W, 3D), probs (N, heads, T, T), out (N, H, W, D) and the
 * gradients, all of dtype dt; the outputs start as NaN. */
typedef struct attn_set {
    mp_tensor qkv, probs, out, dout, dqkv;
    int64_t N, T, D;
} attn_set;

static attn_set set_alloc(mp_dtype dt, int64_t N, int64_t H, int64_t W, int64_t D, int heads)
{
    attn_set s;
    int64_t T = H * W;
    const int64_t qs[4] = {N, H, W, 3 * D}, ps[4] = {N, heads, T, T}, os[4] = {N, H, W, D};
    s.qkv = mp_tensor_alloc(dt, 4, qs, MP_MEM_WORKSPACE);
    s.dqkv = mp_tensor_alloc(dt, 4, qs, MP_MEM_WORKSPACE);
    s.probs = mp_tensor_alloc(dt, 4, ps, MP_MEM_WORKSPACE);
    s.out = mp_tensor_alloc(dt, 4, os, MP_MEM_WORKSPACE);
    s.dout = mp_tensor_alloc(dt, 4, os, MP_MEM_WORKSPACE);
    s.N = N, s.T = T, s.D = D;
    memset(s.probs.data, 0xff, (size_t)mp_tensor_bytes(&s.probs)); /* NaN: every element must */
    memset(s.out.data, 0xff, (size_t)mp_tensor_bytes(&s.out));     /* be written */
    memset(s.dqkv.data, 0xff, (size_t)mp_tensor_bytes(&s.dqkv));
    return s;
}

static void set_free(attn_set *s)
{
    mp_tensor_free(&s->qkv);
    mp_tensor_free(&s->dqkv);
    mp_tensor_free(&s->probs);
    mp_tensor_free(&s->out);
    mp_tensor_free(&s->dout);
}

/* v rounded to dt. */
static double rnd(mp_dtype dt, double v)
{
    double buf;
    mp_store(&buf, dt, 0, v);
    return mp_load(&buf, dt, 0);
}

/* The op's semantics in FP64 from qkv's stored values, with its roundings to dt (S and P to
 * probs' dtype): probs and out (unrounded) of qkv (N, T, 3D). */
static void reference(const mp_attn_desc *d, mp_dtype dt, const double *qkv, int64_t N,
                      int64_t T, int64_t D, double *probs, double *out)
{
    int64_t heads = d->heads, dh = D / heads, ld = 3 * D;
    uint64_t key = mp_dropout_key(d->seed), thr = mp_dropout_threshold(d->dropout_p);
    double *s = malloc((size_t)T * sizeof *s);
    assert_non_null(s);
    memset(out, 0, (size_t)(N * T * D) * sizeof *out);
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < T; i++) {
                int64_t lim = d->causal ? i + 1 : T;
                double m = -INFINITY, sum = 0;
                bool bad = false;
                for (int64_t j = 0; j < lim; j++) {
                    double acc = 0;
                    for (int64_t c = 0; c < dh; c++)
                        acc += qkv[(n * T + i) * ld + h * dh + c] *
                               qkv[(n * T + j) * ld + D + h * dh + c];
                    s[j] = rnd(dt, acc / sqrt((double)dh));
                    bad |= !isfinite(s[j]);
                    m = s[j] > m ? s[j] : m;
                }
                for (int64_t j = 0; j < lim; j++)
                    sum += exp(s[j] - m);
                double *p = probs + ((n * heads + h) * T + i) * T;
                for (int64_t j = 0; j < T; j++) {
                    p[j] = j >= lim ? 0 : bad ? NAN : rnd(dt, exp(s[j] - m) / sum);
                    double mult = 1;
                    if (d->dropout_p > 0 && j < lim) {
                        uint64_t ctr = mp_attn_counter(d->offset, heads, T, n, h, i, j);
                        mult = mp_dropout_keep(key, ctr, thr) ? 1 / (1 - d->dropout_p) : 0;
                    }
                    for (int64_t c = 0; c < dh && j < lim; c++)
                        out[(n * T + i) * D + h * dh + c] +=
                            p[j] * mult * qkv[(n * T + j) * ld + 2 * D + h * dh + c];
                }
            }
    free(s);
}

/* Forward in every dtype against the reference, over 1 to 4 heads of D = 12, sequence lengths
 * 1, 7 and 33 (past the CPU's block of 32 rows) as H x W, causal or not, dropout 0 or 0.1.
 * Tolerances: S may round to a neighbour of the reference's (|S| <= 2 here, so P moves by at
 * most 8 eps relative), P by one more rounding, FP32's sums and exponential by a few 2^-24. */
static void test_forward_reference(void **state)
{
    (void)state;
    static const int64_t hw[3][2] = {{1, 1}, {7, 1}, {3, 11}};
    mp_rng r;
    mp_rng_seed(&r, 31, 0);
    for (int di = 0; di < 4; di++)
        for (int ti = 0; ti < 3; ti++)
            for (int heads = 1; heads <= 4; heads++)
                for (int mode = 0; mode < 4; mode++) {
                    mp_dtype dt = all_dtypes[di];
                    bool causal = mode & 1;
                    mp_attn_desc d = mp_test_attn_desc(heads, causal, mode & 2 ? 0.1 : 0.0);
                    attn_set s = set_alloc(dt, 2, hw[ti][0], hw[ti][1], 12, heads);
                    mp_test_fill(&s.qkv, &r, -1, 1);
                    assert_int_equal(ops->attention_forward(&d, &s.qkv, &s.probs, &s.out),
                                     MP_OK);
                    int64_t np = mp_tensor_numel(&s.probs), no = mp_tensor_numel(&s.out);
                    double *x = mp_test_values(&s.qkv), *p = mp_test_values(&s.probs);
                    double *o = mp_test_values(&s.out);
                    double *pr = malloc((size_t)np * sizeof *pr);
                    double *orf = malloc((size_t)no * sizeof *orf);
                    assert_non_null(pr);
                    assert_non_null(orf);
                    reference(&d, dt, x, s.N, s.T, s.D, pr, orf);
                    double e = dt == MP_F64 ? 1e-13 : mp_test_eps(dt);
                    double prt = dt == MP_F64 ? 1e-12 : 32 * e + 1e-6;
                    assert_close(p, pr, (size_t)np, dt == MP_F64 ? 1e-14 : 1e-6, prt);
                    assert_close(o, orf, (size_t)no, 1.2 * prt + 1e-6, 2 * e);
                    free(x), free(p), free(o), free(pr), free(orf);
                    set_free(&s);
                }
}

/* L = sum(out * r) of the forward at qkv. */
static double loss(const mp_attn_desc *d, attn_set *s, const double *r)
{
    assert_int_equal(ops->attention_forward(d, &s->qkv, &s->probs, &s->out), MP_OK);
    const double *o = s->out.data;
    double l = 0;
    for (int64_t i = 0; i < mp_tensor_numel(&s->out); i++)
        l += o[i] * r[i];
    return l;
}

typedef struct attn_case {
    const mp_attn_desc *d;
    attn_set *s;
    const double *r;
} attn_case;

static double attn_case_loss(void *arg)
{
    attn_case *c = arg;
    return loss(c->d, c->s, c->r);
}

/* FP64 central differences of L = sum(out * r) against attention_backward's dqkv (dout = r),
 * for (heads, causal, dropout) over T = 2 x 3 tokens of D = 6: the dropout mask is fixed by
 * (seed, offset), so L stays smooth. */
static void test_gradcheck(void **state)
{
    (void)state;
    static const struct {
        int heads;
        bool causal;
        double p;
    } cases[] = {{1, false, 0}, {2, false, 0}, {3, true, 0}, {2, true, 0.3}, {1, false, 0.3}};
    mp_rng r;
    mp_rng_seed(&r, 32, 0);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mp_attn_desc d = mp_test_attn_desc(cases[c].heads, cases[c].causal, cases[c].p);
        attn_set s = set_alloc(MP_F64, 2, 2, 3, 6, cases[c].heads);
        mp_test_fill(&s.qkv, &r, -1.5, 1.5);
        mp_test_fill(&s.dout, &r, -1, 1);
        const double *rv = s.dout.data;
        loss(&d, &s, rv);
        assert_int_equal(ops->attention_backward(&d, &s.qkv, &s.probs, &s.dout, &s.dqkv),
                         MP_OK);
        int64_t n = mp_tensor_numel(&s.qkv);
        double *num = malloc((size_t)n * sizeof *num);
        assert_non_null(num);
        attn_case ac = {&d, &s, rv};
        mp_test_fd(s.qkv.data, n, EPS, attn_case_loss, &ac, num);
        assert_close(s.dqkv.data, num, (size_t)n, ATOL, RTOL);
        free(num);
        set_free(&s);
    }
}

/* The causal mask exactly, over T = 70 tokens (three of the CPU's row blocks) in every dtype,
 * with and without dropout: for each t, dqkv from a dout that is nonzero only at token t is
 * exactly 0 at every token after t, and out at tokens <= t does not change when qkv changes at
 * the tokens after t. Without the mask, tokens after t do receive gradient (the check can
 * fail). */
static void test_causal_mask(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 33, 0);
    for (int di = 0; di < 4; di++)
        for (int mode = 0; mode < 3; mode++) {
            mp_dtype dt = all_dtypes[di];
            bool causal = mode < 2;
            mp_attn_desc d = mp_test_attn_desc(2, causal, mode == 1 ? 0.2 : 0.0);
            attn_set s = set_alloc(dt, 2, 7, 10, 8, 2);
            int64_t T = s.T, D = s.D, row = 3 * D;
            mp_test_fill(&s.qkv, &r, -2, 2);
            assert_int_equal(ops->attention_forward(&d, &s.qkv, &s.probs, &s.out), MP_OK);
            int64_t leaked = 0;
            for (int64_t t = 0; t < T; t++) {
                memset(s.dout.data, 0, (size_t)mp_tensor_bytes(&s.dout));
                for (int64_t n = 0; n < s.N; n++)
                    for (int64_t c = 0; c < D; c++)
                        mp_store(s.dout.data, dt, (size_t)((n * T + t) * D + c),
                                 0.5 + mp_rng_uniform(&r));
                assert_int_equal(ops->attention_backward(&d, &s.qkv, &s.probs, &s.dout,
                                                         &s.dqkv),
                                 MP_OK);
                for (int64_t n = 0; n < s.N; n++)
                    for (int64_t u = t + 1; u < T; u++)
                        for (int64_t c = 0; c < row; c++) {
                            double g = mp_load(s.dqkv.data, dt, (size_t)((n * T + u) * row + c));
                            if (causal && g != 0.0)
                                fail_msg("%s causal: d out[%lld] / d qkv[%lld][%lld] = %g",
                                         mp_dtype_name(dt), (long long)t, (long long)u,
                                         (long long)c, g);
                            leaked += g != 0.0;
                        }
            }
            if (!causal) {
                assert_true(leaked > 0);
                set_free(&s);
                continue;
            }
            for (int64_t t = 0; t + 1 < T; t += 9) { /* new values after t: out[<= t] stays */
                double *before = mp_test_values(&s.out);
                for (int64_t n = 0; n < s.N; n++)
                    for (int64_t i = (n * T + t + 1) * row; i < (n + 1) * T * row; i++)
                        mp_store(s.qkv.data, dt, (size_t)i, -3 + 6 * mp_rng_uniform(&r));
                assert_int_equal(ops->attention_forward(&d, &s.qkv, &s.probs, &s.out), MP_OK);
                for (int64_t n = 0; n < s.N; n++)
                    for (int64_t i = n * T * D; i < (n * T + t + 1) * D; i++)
                        if (mp_load(s.out.data, dt, (size_t)i) != before[i])
                            fail_msg("%s: out[%lld] changed with the tokens after %lld",
                                     mp_dtype_name(dt), (long long)(i / D % T), (long long)t);
                free(before);
            }
            set_free(&s);
        }
}

/* q = 200 and k = +-200 at token 0 over dh = 4: S[i][0] = +-80000, beyond fp16's 65504, the
 * other scores small: fp16 probabilities (S rounded to +inf, or to -inf beside finite scores)
 * make every row and out NaN; in bf16, FP32, and with FP32 probs from fp16 qkv (S is rounded to
 * probs' dtype), everything is finite and rows sum to 1. */
static void test_fp16_overflow(void **state)
{
    (void)state;
    static const mp_dtype qt[4] = {MP_F16, MP_BF16, MP_F32, MP_F16};
    static const mp_dtype pt[4] = {MP_F16, MP_BF16, MP_F32, MP_F32};
    for (int k = 0; k < 4; k++)
        for (int sign = -1; sign <= 1; sign += 2) {
            mp_attn_desc d = mp_test_attn_desc(1, false, 0);
            int64_t T = 3, D = 4;
            const int64_t qs[4] = {1, 1, T, 3 * D}, ps[4] = {1, 1, T, T}, os[4] = {1, 1, T, D};
            mp_tensor qkv = mp_tensor_alloc(qt[k], 4, qs, MP_MEM_WORKSPACE);
            mp_tensor probs = mp_tensor_alloc(pt[k], 4, ps, MP_MEM_WORKSPACE);
            mp_tensor out = mp_tensor_alloc(qt[k], 4, os, MP_MEM_WORKSPACE);
            for (int64_t t = 0; t < T; t++)
                for (int64_t c = 0; c < D; c++) {
                    mp_store(qkv.data, qt[k], (size_t)(t * 3 * D + c), 200);
                    mp_store(qkv.data, qt[k], (size_t)(t * 3 * D + D + c),
                             t == 0 ? sign * 200.0 : 0.01 * (double)t);
                    mp_store(qkv.data, qt[k], (size_t)(t * 3 * D + 2 * D + c), 0.25 * (t + 1));
                }
            assert_int_equal(ops->attention_forward(&d, &qkv, &probs, &out), MP_OK);
            bool overflow = pt[k] == MP_F16;
            for (int64_t i = 0; i < T; i++) {
                double sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    double p = mp_load(probs.data, pt[k], (size_t)(i * T + j));
                    if (overflow ? !isnan(p) : !isfinite(p))
                        fail_msg("%s/%s S = %d * 80000: probs[%lld][%lld] = %g",
                                 mp_dtype_name(qt[k]), mp_dtype_name(pt[k]), sign,
                                 (long long)i, (long long)j, p);
                    sum += p;
                }
                if (!overflow)
                    assert_true(fabs(sum - 1) <= 4 * mp_test_eps(pt[k]));
                for (int64_t c = 0; c < D; c++) {
                    double o = mp_load(out.data, qt[k], (size_t)(i * D + c));
                    assert_true(overflow ? isnan(o) : isfinite(o));
                }
            }
            mp_tensor_free(&qkv);
            mp_tensor_free(&probs);
            mp_tensor_free(&out);
        }
}

/* Softmax rows sum to 1 within their rounding (each P within eps(dt) of its FP32 value, which
 * is within a few 2^-24; fp16 subnormals add up to 2^-25 each) and masked entries are exactly
 * 0, in every dtype, with scores spread over several units. */
static void test_rows_sum_to_one(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 34, 0);
    for (int di = 0; di < 4; di++)
        for (int causal = 0; causal < 2; causal++) {
            mp_dtype dt = all_dtypes[di];
            mp_attn_desc d = mp_test_attn_desc(2, causal, 0);
            attn_set s = set_alloc(dt, 3, 5, 9, 16, 2);
            int64_t T = s.T;
            mp_test_fill(&s.qkv, &r, -3, 3);
            assert_int_equal(ops->attention_forward(&d, &s.qkv, &s.probs, &s.out), MP_OK);
            double tol = dt == MP_F64 ? 1e-13 : 2 * mp_test_eps(dt) + (double)T * 0x1p-24;
            for (int64_t row = 0; row < s.N * 2 * T; row++) {
                int64_t i = row % T, lim = causal ? i + 1 : T;
                double sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    double p = mp_load(s.probs.data, dt, (size_t)(row * T + j));
                    if (j >= lim && p != 0.0)
                        fail_msg("%s: masked probs[%lld][%lld] = %g", mp_dtype_name(dt),
                                 (long long)i, (long long)j, p);
                    assert_true(p >= 0 && p <= 1);
                    sum += p;
                }
                if (!(fabs(sum - 1) <= tol))
                    fail_msg("%s causal %d: row %lld sums to 1 %+g (tolerance %g)",
                             mp_dtype_name(dt), causal, (long long)row, sum - 1, tol);
            }
            set_free(&s);
        }
}

/* Refused with MP_EINTERNAL (naming the op): heads not dividing D, heads 0, dropout outside
 * [0, 1), probs, out or dqkv of the wrong shape, qkv's last dimension not a multiple of 3, and
 * FP64 mixed with other dtypes. */
static void test_errors(void **state)
{
    (void)state;
    attn_set s = set_alloc(MP_F32, 2, 3, 1, 12, 4);
    mp_attn_desc good = mp_test_attn_desc(4, true, 0.1);
    assert_int_equal(ops->attention_forward(&good, &s.qkv, &s.probs, &s.out), MP_OK);
    assert_int_equal(ops->attention_backward(&good, &s.qkv, &s.probs, &s.dout, &s.dqkv), MP_OK);
    mp_attn_desc bad[4] = {good, good, good, good};
    bad[0].heads = 5, bad[1].heads = 0, bad[2].dropout_p = 1.0, bad[3].dropout_p = -0.1;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ops->attention_forward(&bad[i], &s.qkv, &s.probs, &s.out),
                         MP_EINTERNAL);
        assert_non_null(strstr(mp_error_message(), "attention_forward"));
        assert_int_equal(ops->attention_backward(&bad[i], &s.qkv, &s.probs, &s.dout, &s.dqkv),
                         MP_EINTERNAL);
        assert_non_null(strstr(mp_error_message(), "attention_backward"));
    }
    mp_tensor p3 = s.probs, o3 = s.out, x3 = s.qkv, dx3 = s.dqkv;
    p3.shape[1] = 2;     /* heads 4 expected */
    o3.shape[3] = 6;     /* D = 12 expected */
    x3.shape[3] = 35;    /* not 3 D */
    dx3.shape[0] = 1;    /* not qkv's shape */
    assert_int_equal(ops->attention_forward(&good, &s.qkv, &p3, &s.out), MP_EINTERNAL);
    assert_int_equal(ops->attention_forward(&good, &s.qkv, &s.probs, &o3), MP_EINTERNAL);
    assert_int_equal(ops->attention_forward(&good, &x3, &s.probs, &s.out), MP_EINTERNAL);
    assert_int_equal(ops->attention_backward(&good, &s.qkv, &s.probs, &s.dout, &dx3),
                     MP_EINTERNAL);
    mp_tensor f64 = s.probs;
    f64.dtype = MP_F64; /* shape-checked only: never read */
    assert_int_equal(ops->attention_forward(&good, &s.qkv, &f64, &s.out), MP_EINTERNAL);
    mp_error_clear();
    set_free(&s);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_reference), cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_causal_mask),       cmocka_unit_test(test_fp16_overflow),
        cmocka_unit_test(test_rows_sum_to_one),   cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
