/* Tiled attention on the CPU backend (attention_flash_forward, attention_flash_backward)
 * against the (T, T) path (attention_forward, attention_backward), which test_attention.c
 * checks against an FP64 reference and finite differences: in FP64 the two agree to FP64's
 * rounding (the order of sums is all that differs); in FP32, fp16 and bf16 the tiled op,
 * computing in FP32 and rounding its outputs once, is within FP32's error of the FP64 (T, T)
 * path on the same stored inputs, over T = 1, 7, 129 and 1000 (one, several and a partial
 * tile), 1 or 2 heads of D = 8 and one head of 64, causal or not, dropout 0 or 0.1. Also: the
 * saved statistics give each row's log-sum-exp; an inf in a row makes that row NaN and no other;
 * the working memory of the op grows linearly in T where the (T, T) path's grows as T^2 (the
 * allocator's workspace counter); and the calls the op refuses. */
#include "tests/util/test_util.h"
#include "tests/util/test_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/attn_flash.h"
#include "engine/ops.h"
#include "engine/rng.h"

static const mp_ops *ops;

/* One geometry: qkv (N, H, W, 3D) of dtype dt, the tiled op's stats, out and dqkv, dout. */
typedef struct flash_set {
    mp_tensor qkv, stats, out, dout, dqkv;
    int64_t N, T, D;
} flash_set;

static flash_set set_alloc(mp_dtype dt, int64_t N, int64_t H, int64_t W, int64_t D, int heads)
{
    flash_set s;
    int64_t T = H * W;
    const int64_t qs[4] = {N, H, W, 3 * D}, ss[4] = {N, heads, T, 2}, os[4] = {N, H, W, D};
    s.qkv = mp_tensor_alloc(dt, 4, qs, MP_MEM_WORKSPACE);
    s.dqkv = mp_tensor_alloc(dt, 4, qs, MP_MEM_WORKSPACE);
    s.stats = mp_tensor_alloc(mp_attn_flash_stats_dtype(dt), 4, ss, MP_MEM_WORKSPACE);
    s.out = mp_tensor_alloc(dt, 4, os, MP_MEM_WORKSPACE);
    s.dout = mp_tensor_alloc(dt, 4, os, MP_MEM_WORKSPACE);
    s.N = N, s.T = T, s.D = D;
    memset(s.stats.data, 0xff, (size_t)mp_tensor_bytes(&s.stats)); /* NaN: every element */
    memset(s.out.data, 0xff, (size_t)mp_tensor_bytes(&s.out));     /* must be written */
    memset(s.dqkv.data, 0xff, (size_t)mp_tensor_bytes(&s.dqkv));
    return s;
}

static void set_free(flash_set *s)
{
    mp_tensor_free(&s->qkv);
    mp_tensor_free(&s->dqkv);
    mp_tensor_free(&s->stats);
    mp_tensor_free(&s->out);
    mp_tensor_free(&s->dout);
}

/* An FP64 tensor of t's shape holding t's values. */
static mp_tensor widened(const mp_tensor *t)
{
    mp_tensor w = mp_tensor_alloc(MP_F64, t->ndim, t->shape, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(t); i++)
        ((double *)w.data)[i] = mp_load(t->data, t->dtype, (size_t)i);
    return w;
}

static double max_abs(const double *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(v[i]));
    return m;
}

/* The (T, T) path in FP64 on s's stored qkv and dout: out (N T D) and dqkv (N T 3D), malloc'd. */
static void matrix_f64(const mp_attn_desc *d, const flash_set *s, double **out, double **dqkv)
{
    mp_tensor x = widened(&s->qkv), dout = widened(&s->dout);
    const int64_t ps[4] = {s->N, d->heads, s->T, s->T};
    mp_tensor probs = mp_tensor_alloc(MP_F64, 4, ps, MP_MEM_WORKSPACE);
    mp_tensor o = mp_tensor_alloc(MP_F64, 4, s->out.shape, MP_MEM_WORKSPACE);
    mp_tensor dx = mp_tensor_alloc(MP_F64, 4, x.shape, MP_MEM_WORKSPACE);
    assert_int_equal(ops->attention_forward(d, &x, &probs, &o), MP_OK);
    assert_int_equal(ops->attention_backward(d, &x, &probs, &dout, &dx), MP_OK);
    *out = mp_test_values(&o);
    *dqkv = mp_test_values(&dx);
    mp_tensor_free(&x), mp_tensor_free(&dout), mp_tensor_free(&probs);
    mp_tensor_free(&o), mp_tensor_free(&dx);
}

/* Row (n, h, i)'s log-sum-exp of the scaled scores over the positions it attends to, in FP64
 * from the stored qkv. */
static double row_lse(const mp_attn_desc *d, const double *x, const flash_set *s, int64_t n,
                      int64_t h, int64_t i)
{
    int64_t dh = s->D / d->heads, ld = 3 * s->D, lim = d->causal ? i + 1 : s->T;
    double m = -INFINITY, sum = 0, *sc = malloc((size_t)lim * sizeof *sc);
    assert_non_null(sc);
    for (int64_t j = 0; j < lim; j++) {
        double acc = 0;
        for (int64_t c = 0; c < dh; c++)
            acc += x[(n * s->T + i) * ld + h * dh + c] * x[(n * s->T + j) * ld + s->D + h * dh + c];
        sc[j] = acc / sqrt((double)dh);
        m = fmax(m, sc[j]);
    }
    for (int64_t j = 0; j < lim; j++)
        sum += exp(sc[j] - m);
    free(sc);
    return m + log(sum);
}

/* One case: the tiled op forward and backward against the FP64 (T, T) path. Bounds: FP64, the
 * order of sums (1e-12 of the largest value). Otherwise the tiled op's FP32 arithmetic (scores
 * within 4 u dh |q||k|, probabilities within a few u per tile, sums of up to T terms, each within
 * 4 u T of the largest term; u = 2^-24) and one rounding of each output to its dtype
 * (mp_test_eps relative); backward also reads out as stored, so d_i = dO . out moves by out's
 * rounding, which dS = P (dP - d_i) carries into every gradient: bounded by 8 eps(dt) of the
 * largest gradient. */
static void check_case(mp_dtype dt, int64_t N, int64_t H, int64_t W, int64_t D, int heads,
                       bool causal, double p, mp_rng *r)
{
    mp_attn_desc d = mp_test_attn_desc(heads, causal, p);
    flash_set s = set_alloc(dt, N, H, W, D, heads);
    mp_test_fill(&s.qkv, r, -1, 1);
    mp_test_fill(&s.dout, r, -1, 1);
    assert_int_equal(ops->attention_flash_forward(&d, &s.qkv, &s.stats, &s.out), MP_OK);
    assert_int_equal(
        ops->attention_flash_backward(&d, &s.qkv, &s.out, &s.stats, &s.dout, &s.dqkv), MP_OK);
    double *ref_o, *ref_dx;
    matrix_f64(&d, &s, &ref_o, &ref_dx);
    int64_t no = mp_tensor_numel(&s.out), nx = mp_tensor_numel(&s.qkv);
    double *o = mp_test_values(&s.out), *dx = mp_test_values(&s.dqkv), *x = mp_test_values(&s.qkv);
    double *st = mp_test_values(&s.stats);
    bool f64 = dt == MP_F64;
    double u = 0x1p-24, e = f64 ? 0 : mp_test_eps(dt), T = (double)s.T;
    double tiles = ceil(T / 64) + 1;
    double ao = f64 ? 1e-12 : (16 * tiles + 8 * (double)(D / heads)) * u;
    assert_close(o, ref_o, (size_t)no, ao, f64 ? 1e-12 : e * 1.001);
    double gmax = max_abs(ref_dx, nx);
    double ax = f64 ? 1e-12 * (gmax + 1) : (8 * e + 8 * u * T + 32 * u * tiles) * gmax + 4 * ao;
    assert_close(dx, ref_dx, (size_t)nx, ax, f64 ? 1e-12 : 2 * e);
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < s.T; i++) {
                int64_t at = ((n * heads + h) * s.T + i) * 2;
                double lse = st[at] + log(st[at + 1]), want = row_lse(&d, x, &s, n, h, i);
                assert_true(fabs(lse - want) <=
                            (f64 ? 1e-12 : 8 * u * (fabs(want) + T + (double)D)));
            }
    free(ref_o), free(ref_dx), free(o), free(dx), free(x), free(st);
    set_free(&s);
}

static void test_against_matrix(void **state)
{
    (void)state;
    static const mp_dtype dts[4] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    static const int64_t hw[3][2] = {{1, 1}, {7, 1}, {3, 43}}; /* T = 1, 7, 129 */
    mp_rng r;
    mp_rng_seed(&r, 41, 0);
    for (int k = 0; k < 4; k++)
        for (int mode = 0; mode < 4; mode++) {
            bool causal = mode & 1;
            double p = mode & 2 ? 0.1 : 0.0;
            for (int t = 0; t < 3; t++)
                for (int heads = 1; heads <= 2; heads++)
                    check_case(dts[k], 2, hw[t][0], hw[t][1], 8, heads, causal, p, &r);
            check_case(dts[k], 1, 40, 25, 8, 2, causal, p, &r); /* T = 1000 */
            check_case(dts[k], 1, 3, 43, 64, 1, causal, p, &r);  /* dh = 64 */
        }
}

/* An inf in one query makes its row (every head's out and dqkv there) NaN; the other sequence
 * stays finite. */
static void test_nonfinite_row(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 42, 0);
    flash_set s = set_alloc(MP_F32, 2, 5, 1, 8, 2);
    mp_test_fill(&s.qkv, &r, -1, 1);
    mp_test_fill(&s.dout, &r, -1, 1);
    ((float *)s.qkv.data)[2 * 24 + 1] = INFINITY; /* sequence 0, token 2, q of head 0 */
    mp_attn_desc d = mp_test_attn_desc(2, false, 0.0);
    assert_int_equal(ops->attention_flash_forward(&d, &s.qkv, &s.stats, &s.out), MP_OK);
    const float *o = s.out.data;
    for (int64_t t = 0; t < 10; t++)
        for (int64_t c = 0; c < 8; c++) {
            bool nan_row = t == 2 && c < 4; /* head 0 of token 2 */
            assert_true(isnan(o[t * 8 + c]) == nan_row);
        }
    set_free(&s);
}

/* The op's workspace (the allocator's MP_MEM_WORKSPACE counter: copies of half operands and
 * the tiles) over T = 128 .. 1024: the tiled op's grows by about 2x per doubling, the (T, T)
 * path's by about 4x (its probabilities and scores), which is what the check tells apart. Runs
 * first in this program, so the workspace block has not grown before. */
static int64_t ws_after(bool flash, int64_t T)
{
    flash_set s = set_alloc(MP_F16, 1, T, 1, 64, 2);
    memset(s.qkv.data, 0, (size_t)mp_tensor_bytes(&s.qkv));
    memset(s.dout.data, 0, (size_t)mp_tensor_bytes(&s.dout));
    mp_attn_desc d = mp_test_attn_desc(2, true, 0.0);
    int64_t before = mp_mem_current(MP_MEM_WORKSPACE);
    if (flash) {
        assert_int_equal(ops->attention_flash_forward(&d, &s.qkv, &s.stats, &s.out), MP_OK);
        assert_int_equal(ops->attention_flash_backward(&d, &s.qkv, &s.out, &s.stats, &s.dout,
                                                       &s.dqkv),
                         MP_OK);
    } else {
        const int64_t ps[4] = {1, 2, T, T};
        mp_tensor probs = mp_tensor_alloc(MP_F16, 4, ps, MP_MEM_ACTIVATIONS);
        assert_int_equal(ops->attention_forward(&d, &s.qkv, &probs, &s.out), MP_OK);
        assert_int_equal(ops->attention_backward(&d, &s.qkv, &probs, &s.dout, &s.dqkv), MP_OK);
        mp_tensor_free(&probs);
    }
    int64_t grown = mp_mem_current(MP_MEM_WORKSPACE) - before;
    set_free(&s);
    return grown;
}

static void test_memory_linear(void **state)
{
    (void)state;
    int64_t prev = 0, first = 0;
    for (int64_t T = 128; T <= 1024; T *= 2) {
        int64_t total = prev + ws_after(true, T);
        if (T == 128)
            first = total;
        prev = total;
    }
    print_message("tiled attention workspace: %lld bytes at T = 128, %lld at 1024\n",
                  (long long)first, (long long)prev);
    assert_true(first > 0 && prev <= 9 * first); /* linear: 8x the tokens, at most 9x */
    int64_t m128 = prev + ws_after(false, 128);
    int64_t m1024 = m128 + ws_after(false, 1024);
    print_message("(T, T) path workspace: %lld bytes at T = 128, %lld at 1024\n",
                  (long long)m128, (long long)m1024);
    assert_true(m1024 >= 30 * first); /* quadratic: the check can tell */
}

static void test_errors(void **state)
{
    (void)state;
    flash_set s = set_alloc(MP_F32, 2, 3, 1, 12, 4);
    mp_attn_desc good = mp_test_attn_desc(4, true, 0.1), bad = good;
    assert_int_equal(ops->attention_flash_forward(&good, &s.qkv, &s.stats, &s.out), MP_OK);
    bad.heads = 5;
    assert_int_equal(ops->attention_flash_forward(&bad, &s.qkv, &s.stats, &s.out), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "attention_flash_forward"));
    mp_tensor st = s.stats, x = s.qkv;
    st.shape[3] = 1; /* two numbers per row expected */
    assert_int_equal(ops->attention_flash_forward(&good, &s.qkv, &st, &s.out), MP_EINTERNAL);
    st = s.stats;
    st.dtype = MP_F16; /* FP32 statistics expected */
    assert_int_equal(ops->attention_flash_forward(&good, &s.qkv, &st, &s.out), MP_EINTERNAL);
    assert_int_equal(
        ops->attention_flash_backward(&good, &s.qkv, &s.out, &st, &s.dout, &s.dqkv),
        MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "attention_flash_backward"));
    x.shape[0] = 1; /* dqkv not qkv's shape */
    assert_int_equal(
        ops->attention_flash_backward(&good, &s.qkv, &s.out, &s.stats, &s.dout, &x),
        MP_EINTERNAL);
    set_free(&s);
    flash_set w = set_alloc(MP_F32, 1, 2, 1, 3 * 129, 3); /* dh = 129: too wide a head */
    mp_attn_desc three = mp_test_attn_desc(3, false, 0.0);
    assert_int_equal(ops->attention_flash_forward(&three, &w.qkv, &w.stats, &w.out),
                     MP_EINTERNAL);
    mp_error_clear();
    set_free(&w);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_linear),
        cmocka_unit_test(test_against_matrix),
        cmocka_unit_test(test_nonfinite_row),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
