/* The op table's dense and elementwise cases (op_table.h): gemm in all four transpose
 * combinations on sizes that are no multiple of 8 or 16, with and without beta, mixed dtypes,
 * k = 0 and n = 0; gemm_bias (fused and not) with its own bound; bias_add and bias_grad; relu
 * forward and backward (NaN propagates, in place); softmax cross-entropy with and without label
 * smoothing and dlogits, with the loss scale from a state in backend memory; scale, fill,
 * convert between every pair of dtypes (bitwise, through subnormals, overflow, inf and NaN); add
 * with mixed dtypes and in place; dropout with the same mask bit for bit; grad_stats with inf,
 * NaN and FP32 overflow. Every dtype the device stores (FP32, fp16, bf16) and empty tensors. */
#include "tests/gpu/op_table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mp_dtype F32 = MP_F32, F16 = MP_F16, BF16 = MP_BF16;
#define DTS mp_gpu_dtypes
#define NDT MP_GPU_NDTYPES

/* c = 0.75 op(a) op(b) + beta c, dt = (a, b, c). beta = 0: c is not read, so it starts
 * poisoned and every element must be written. k products of size <= 0.75 and beta c (<= 0.5)
 * summed in FP32 (TF32 is off), then one rounding to c's dtype. */
static void run_gemm(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 401, c->seed);
    bool ta = c->u.gemm.ta, tb = c->u.gemm.tb;
    double beta = c->u.gemm.beta;
    int64_t m = c->shape[0], n = c->shape[1], k = c->shape[2];
    int64_t as[2] = {ta ? k : m, ta ? m : k}, bs[2] = {tb ? n : k, tb ? k : n}, cs[2] = {m, n};
    mp_gpu_pair a = mp_gpu_random(c->dt[0], 2, as, &r, -1, 1);
    mp_gpu_pair b = mp_gpu_random(c->dt[1], 2, bs, &r, -1, 1);
    mp_gpu_pair y = beta != 0 ? mp_gpu_random(c->dt[2], 2, cs, &r, -1, 1)
                              : mp_gpu_poisoned(c->dt[2], 2, cs);
    OP_BOTH(c, gemm, ta, tb, 0.75, OP_T(&a), OP_T(&b), beta, OP_T(&y));
    mp_gpu_check(&y, mp_gpu_atol(k + 1, 1.0), mp_gpu_rtol(c->dt[2]), "%s", c->name);
    OP_FREE(&a, &b, &y);
}

/* gemm_bias (the linear layer's forward), dt = (a and w, c, bias), with the bias in cuBLASLt's
 * epilogue where dtypes allow, and the unfused path for others. The CPU rounds the product p to
 * c's dtype and then the sum; the fused GPU rounds once. The product's rounding is up to half an
 * ulp of |p|, not of the result, which is much smaller where the bias cancels the product, so
 * each element is allowed one ulp of c's dtype at |p| (from the CPU's product) beyond gemm's
 * tolerance: a bound per element, the table's hook for this op. */
static void run_gemm_bias(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 402, c->seed);
    bool ta = c->u.gemm.ta, tb = c->u.gemm.tb;
    int64_t m = c->shape[0], n = c->shape[1], k = c->shape[2];
    int64_t as[2] = {ta ? k : m, ta ? m : k}, ws[2] = {tb ? n : k, tb ? k : n}, cs[2] = {m, n};
    mp_dtype ct = c->dt[1];
    mp_gpu_pair a = mp_gpu_random(c->dt[0], 2, as, &r, -1, 1);
    mp_gpu_pair w = mp_gpu_random(c->dt[0], 2, ws, &r, -1, 1);
    mp_gpu_pair b = mp_gpu_random(c->dt[2], 1, &n, &r, -1, 1), y = mp_gpu_poisoned(ct, 2, cs);
    mp_gpu_pair p = mp_gpu_pair_alloc(ct, 2, cs);
    assert_int_equal(op_ref->gemm(ta, tb, 1.0, &a.host, &w.host, 0.0, &p.host), MP_OK);
    OP_BOTH(c, gemm_bias, ta, tb, OP_T(&a), OP_T(&w), OP_T(&b), OP_T(&y));
    double atol = mp_gpu_atol(k + 1, 1.0), rtol = mp_gpu_rtol(ct);
    double *each = malloc((size_t)(m * n + 1) * sizeof *each);
    assert_non_null(each);
    for (int64_t e = 0; e < m * n; e++)
        each[e] = atol + rtol * fabs(mp_load(p.host.data, ct, (size_t)e));
    mp_gpu_check_each(&y, each, rtol, "%s", c->name);
    free(each);
    OP_FREE(&a, &w, &b, &y, &p);
}

/* y (rows, d1, d2) += b (d1 d2): one FP32 addition, then one rounding to y's dtype;
 * dt = (y, b). */
static void run_bias_add(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 403, c->seed);
    int64_t cols = c->shape[1] * c->shape[2];
    mp_gpu_pair y = mp_gpu_random(c->dt[0], 3, c->shape, &r, -1, 1);
    mp_gpu_pair b = mp_gpu_random(c->dt[1], 1, &cols, &r, -1, 1);
    OP_BOTH(c, bias_add, OP_T(&y), OP_T(&b));
    mp_gpu_check(&y, 0, mp_gpu_rtol(c->dt[0]), "%s", c->name);
    OP_FREE(&y, &b);
}

/* db = column sums of dy (rows, d1, d2): rows terms of size <= 1 summed in FP32, one rounding
 * to db's dtype; dt = (dy, db). */
static void run_bias_grad(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 404, c->seed);
    int64_t cols = c->shape[1] * c->shape[2];
    mp_gpu_pair dy = mp_gpu_random(c->dt[0], 3, c->shape, &r, -1, 1);
    mp_gpu_pair db = mp_gpu_poisoned(c->dt[1], 1, &cols);
    OP_BOTH(c, bias_grad, OP_T(&dy), OP_T(&db));
    mp_gpu_check(&db, mp_gpu_atol(c->shape[0], 1), mp_gpu_rtol(c->dt[1]), "%s", c->name);
    OP_FREE(&dy, &db);
}

/* Random values of x's host side with NaN at elements 17 and n - 99 (when they exist). */
static void put_nans(mp_gpu_pair *x)
{
    int64_t n = mp_tensor_numel(&x->host);
    if (n > 17)
        mp_store(x->host.data, x->host.dtype, 17, NAN);
    if (n > 99)
        mp_store(x->host.data, x->host.dtype, (size_t)(n - 99), NAN);
    mp_gpu_upload(x);
}

/* ReLU is exact: both sides must agree bit for bit, NaN staying NaN, also in place (y = x). */
static void run_relu_forward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 405, c->seed);
    mp_gpu_pair x = mp_gpu_random(c->dt[0], 1, c->shape, &r, -1, 1), y = {0};
    if (c->u.ew.nan)
        put_nans(&x);
    mp_gpu_pair *out = &x;
    if (!c->u.ew.in_place) {
        y = mp_gpu_poisoned(c->dt[0], 1, c->shape);
        out = &y;
    }
    OP_BOTH(c, relu_forward, OP_T(&x), OP_T(out));
    mp_gpu_check_bits(out, "%s", c->name);
    OP_FREE(&x, &y);
}

/* dx = dy where y > 0 for y = relu(x) (zeros, positives and NaN), bitwise; in place: dx = dy. */
static void run_relu_backward(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 406, c->seed);
    mp_dtype dt = c->dt[0];
    mp_gpu_pair y = mp_gpu_random(dt, 1, c->shape, &r, -1, 1);
    mp_gpu_pair dy = mp_gpu_random(dt, 1, c->shape, &r, -1, 1), dx = {0};
    for (int64_t i = 0; i < c->shape[0]; i++)
        if (mp_load(y.host.data, dt, (size_t)i) < 0)
            mp_store(y.host.data, dt, (size_t)i, 0.0);
    if (c->u.ew.nan)
        put_nans(&y);
    mp_gpu_upload(&y);
    mp_gpu_pair *out = &dy;
    if (!c->u.ew.in_place) {
        dx = mp_gpu_poisoned(dt, 1, c->shape);
        out = &dx;
    }
    OP_BOTH(c, relu_backward, OP_T(&y), OP_T(&dy), OP_T(out));
    mp_gpu_check_bits(out, "%s", c->name);
    OP_FREE(&y, &dy, &dx);
}

/* Logits (rows, cols) in [-3, 3) with a unique arg-max per row (the arg-max of a tie is the
 * op's choice), the label the arg-max in every third row so `correct` counts something.
 * grad 2: no result for the host and the loss scale read from an mp_amp_state in backend
 * memory (gs / 4 times a scale of 4: gs exactly). */
static void run_softmax_xent(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 407, c->seed);
    mp_dtype dt = c->dt[0];
    int64_t rows = c->shape[0], cols = c->shape[1], s[2] = {rows, cols};
    int grad = c->u.xent.grad;
    double smoothing = c->u.xent.smoothing;
    mp_gpu_pair z = mp_gpu_random(dt, 2, s, &r, -3, 3), dz = mp_gpu_poisoned(dt, 2, s);
    int32_t *labels = malloc((size_t)(rows + 1) * sizeof *labels);
    assert_non_null(labels);
    for (int64_t i = 0; i < rows; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < cols; j++)
            if (mp_load(z.host.data, dt, (size_t)(i * cols + j)) >
                mp_load(z.host.data, dt, (size_t)(i * cols + best)))
                best = j;
        size_t bi = (size_t)(i * cols + best);
        mp_store(z.host.data, dt, bi, mp_load(z.host.data, dt, bi) + 0.5);
        labels[i] = (int32_t)(i % 3 == 0 ? best : (int64_t)mp_rng_below(&r, (uint64_t)cols));
    }
    mp_gpu_upload(&z);
    int32_t *dlabels = mp_gpu_alloc((size_t)rows * sizeof *labels);
    mp_gpu_put(dlabels, labels, (size_t)rows * sizeof *labels);
    mp_amp_state hs = {.scaler.scale = 4.0};
    mp_amp_state *ds = mp_gpu_alloc(sizeof hs);
    mp_gpu_put(ds, &hs, sizeof hs);
    const double gs = 512;
    mp_xent_result want = {NAN, -1}, got = {NAN, -2};
    OP_BOTH(c, softmax_xent, OP_T(&z), OP_SIDE(labels, dlabels), smoothing,
            grad == 2 ? gs / 4 : gs, grad == 2 ? OP_SIDE(&hs, ds) : NULL,
            grad == 2 ? NULL : OP_SIDE(&want, &got), grad ? OP_T(&dz) : NULL);
    if (!c->refused) {
        /* Logits are at most 4 in size and a row's loss at most lmax. Per row, the log-sum-exp
         * sums cols terms exp(z - max) <= 1 and the smoothing term averages cols logits, in
         * FP32: each within 4u (cols + 4) of exact, plus a few single roundings of values
         * <= lmax (8u lmax). The mean over rows adds 4u lmax, and the result is rounded to
         * FP32 (u relative); the two sides are within twice that of each other. */
        const double u = 0x1p-24, lmax = 7 + log((double)cols), g = gs / (double)rows;
        if (grad != 2) {
            assert_close(&got.loss, &want.loss, 1, 2 * 4 * u * ((double)cols + 4 + 3 * lmax),
                         2 * u);
            assert_int_equal(got.correct, want.correct);
            assert_true(want.correct >= (rows + 2) / 3);
        }
        if (grad) /* (softmax - target) g: a probability carries the log-sum-exp's error
                     4u (cols + 4), z - lse's rounding (u lmax) and exp's few ulps (8u); then
                     the product with g and one rounding to dt. */
            mp_gpu_check(&dz, 2 * 4 * u * ((double)cols + 8 + lmax) * g, mp_gpu_rtol(dt), "%s",
                         c->name);
        else /* dlogits NULL: nothing written, the poison on both sides */
            mp_gpu_check_bits(&dz, "%s", c->name);
    }
    op_uut->mem_free(ds);
    op_uut->mem_free(dlabels);
    free(labels);
    OP_FREE(&z, &dz);
}

/* x *= alpha: one FP32 multiplication and one rounding. */
static void run_scale(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 408, c->seed);
    mp_gpu_pair x = mp_gpu_random(c->dt[0], 2, c->shape, &r, -1, 1);
    OP_BOTH(c, scale, OP_T(&x), c->u.x);
    mp_gpu_check(&x, 0, mp_gpu_rtol(c->dt[0]), "%s", c->name);
    OP_FREE(&x);
}

/* The value rounded to the dtype, bitwise (1e6 overflows fp16 to inf). */
static void run_fill(const op_case *c)
{
    mp_gpu_pair x = mp_gpu_poisoned(c->dt[0], 2, c->shape);
    OP_BOTH(c, fill, OP_T(&x), c->u.x);
    mp_gpu_check_bits(&x, "%s", c->name);
    OP_FREE(&x);
}

/* Bitwise, dt = (src, dst): magnitudes 2^-30 .. 2^30 of either sign (fp16 subnormals,
 * underflow and overflow, bf16's lost bits), plus inf, -inf and NaN at elements 5, 6, 7. */
static void run_convert(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 409, c->seed);
    mp_dtype st = c->dt[0];
    int64_t n = c->shape[0];
    mp_gpu_pair src = mp_gpu_pair_alloc(st, 1, &n), dst = mp_gpu_poisoned(c->dt[1], 1, &n);
    int span = st == MP_F16 ? 20 : 30; /* fp16 sources stay finite and nonzero */
    for (int64_t i = 0; i < n; i++)
        do {
            int e = (int)mp_rng_below(&r, (uint64_t)(2 * span + 1)) - span - 1;
            double v = ldexp(1 + mp_rng_uniform(&r), e);
            mp_store(src.host.data, st, (size_t)i, mp_rng_next(&r) & 1 ? -v : v);
        } while (mp_load(src.host.data, st, (size_t)i) == 0 ||
                 isinf(mp_load(src.host.data, st, (size_t)i)));
    const double special[3] = {INFINITY, -INFINITY, NAN};
    for (int64_t i = 5; i < 8 && i < n; i++)
        mp_store(src.host.data, st, (size_t)i, special[i - 5]);
    mp_gpu_upload(&src);
    OP_BOTH(c, convert, OP_T(&src), OP_T(&dst));
    mp_gpu_check_bits(&dst, "%s", c->name);
    OP_FREE(&src, &dst);
}

/* y = a + b, dt = (a, b, y): one FP32 addition, one rounding to y's dtype; in place: y = a.
 * add_relu (u.ew.relu): the ReLU of elem_rule.h before the rounding, bitwise. */
static void run_add(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 410, c->seed);
    mp_gpu_pair a = mp_gpu_random(c->dt[0], 1, c->shape, &r, -1, 1);
    mp_gpu_pair b = mp_gpu_random(c->dt[1], 1, c->shape, &r, -1, 1), y = {0};
    mp_gpu_pair *out = &a;
    if (!c->u.ew.in_place) {
        y = mp_gpu_poisoned(c->dt[2], 1, c->shape);
        out = &y;
    }
    if (c->u.ew.relu) {
        OP_BOTH(c, add_relu, OP_T(&a), OP_T(&b), OP_T(out));
        mp_gpu_check_bits(out, "%s", c->name);
    } else {
        OP_BOTH(c, add, OP_T(&a), OP_T(&b), OP_T(out));
        mp_gpu_check(out, 0, mp_gpu_rtol(c->dt[2]), "%s", c->name);
    }
    OP_FREE(&a, &b, &y);
}

/* The device's mask is the CPU's bit for bit: inputs are never zero, so an element dropped on
 * one side only fails the check; kept values are x (1 / (1 - p)) in FP32, one rounding. An
 * offset + i past 2^32 catches a 32-bit counter; p = 0 is the identity. With a step (u.dropout
 * step >= 0), each side reads it from its own memory (two FP32 words holding the int64), as a
 * graph's launch does. */
static void run_dropout(const op_case *c, bool backward)
{
    mp_rng r;
    mp_rng_seed(&r, 411, c->seed);
    mp_gpu_pair x = mp_gpu_random(c->dt[0], 1, c->shape, &r, -1, 1);
    mp_gpu_pair y = mp_gpu_poisoned(c->dt[0], 1, c->shape);
    mp_gpu_pair s = mp_gpu_pair_alloc(MP_F32, 1, (const int64_t[]){2});
    memcpy(s.host.data, &c->u.dropout.step, sizeof(int64_t));
    mp_gpu_upload(&s);
    double p = c->u.dropout.p;
    uint64_t seed = 0x5eed + c->seed, off = c->u.dropout.offset;
    bool has = c->u.dropout.step >= 0;
    if (backward)
        OP_BOTH(c, dropout_backward, p, seed, off, has ? (const int64_t *)OP_T(&s)->data : NULL,
                OP_T(&x), OP_T(&y));
    else
        OP_BOTH(c, dropout_forward, p, seed, off, has ? (const int64_t *)OP_T(&s)->data : NULL,
                OP_T(&x), OP_T(&y));
    mp_gpu_check(&y, 0, mp_gpu_rtol(c->dt[0]), "%s", c->name);
    OP_FREE(&x, &y, &s);
}

static void run_dropout_forward(const op_case *c) { run_dropout(c, false); }

static void run_dropout_backward(const op_case *c) { run_dropout(c, true); }

/* Sum of squares of g * scale (each product one FP32 rounding, its square exact in FP64) added
 * to *sumsq in FP64: the terms agree, only the summation order differs, n + 1 nonnegative
 * terms each side within n 2^-53 relative. An inf, a NaN, and an FP32 overflow of g * scale
 * must each set the flag; an empty gradient leaves both alone. */
static void run_grad_stats(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 412, c->seed);
    mp_dtype dt = c->dt[0];
    int64_t n = c->shape[0];
    int bad = c->u.stats.bad;
    mp_gpu_pair g = mp_gpu_random(dt, 1, &n, &r, -1, 1);
    if (bad)
        mp_store(g.host.data, dt, (size_t)(n - 1 - 7 * bad),
                 bad == 1 ? INFINITY : bad == 2 ? NAN : 1e38);
    mp_gpu_upload(&g);
    double s_ref = 2.5, s_uut = 2.5;
    bool nf_ref = false, nf_uut = false;
    OP_BOTH(c, grad_stats, OP_T(&g), c->u.stats.scale, OP_SIDE(&s_ref, &s_uut),
            OP_SIDE(&nf_ref, &nf_uut));
    if (nf_uut != (bad > 0) || nf_ref != (bad > 0))
        fail_msg("%s: nonfinite reference %d device %d, want %d", c->name, nf_ref, nf_uut,
                 bad > 0);
    if (!bad)
        assert_close(&s_uut, &s_ref, 1, 0, 2 * (double)(n + 1) * 0x1p-53);
    if (n == 0)
        assert_true(s_uut == 2.5 && s_ref == 2.5);
    OP_FREE(&g);
}

static void cases_gemm(void)
{
    const int64_t sizes[2][3] = {{13, 7, 37}, {67, 45, 131}};
    for (int d = 0; d < NDT; d++)
        for (int t = 0; t < 4; t++)
            for (int s = 0; s < 2; s++)
                for (int b = 0; b < 2; b++) {
                    op_case c = {.run = run_gemm, .dt = {DTS[d], DTS[d], DTS[d]},
                                 .shape = {sizes[s][0], sizes[s][1], sizes[s][2]},
                                 .u.gemm = {t & 1, t & 2, b ? 0.5 : 0.0}};
                    op_add(c, "gemm", 3, 3, "ta %d tb %d beta %g", t & 1, !!(t & 2), c.u.gemm.beta);
                }
    /* Mixed storage: half operands with an FP32 result (O1 weight gradients), and others. */
    const mp_dtype mixes[4][3] = {
        {F16, F16, F32}, {BF16, BF16, F32}, {F32, F16, BF16}, {BF16, F32, F16}};
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 4; t++) {
            op_case c = {.run = run_gemm, .dt = {mixes[i][0], mixes[i][1], mixes[i][2]},
                         .shape = {67, 45, 131}, .u.gemm = {t & 1, t & 2, 0.5}};
            op_add(c, "gemm", 3, 3, "ta %d tb %d beta 0.5", t & 1, !!(t & 2));
        }
    /* Empty: k = 0 (c = beta c; beta 0 writes zeros) with a (m, 0) and b (n, 0); n = 0; and
     * 1 x 1 x 1. A 2-D op reads (shape[0], numel / shape[0]), so a zero first dimension makes
     * the row length 0 too: only these transposes can express k = 0 or n = 0. */
    for (int d = 0; d < NDT; d++)
        for (int b = 0; b < 2; b++) {
            op_case c = {.run = run_gemm, .dt = {DTS[d], DTS[d], DTS[d]}, .shape = {9, 5, 0},
                         .u.gemm = {false, true, b ? 0.5 : 0.0}};
            op_add(c, "gemm", 3, 3, "ta 0 tb 1 beta %g (k = 0)", c.u.gemm.beta);
        }
    op_case n0 = {.run = run_gemm, .dt = {F16, F16, F32}, .shape = {9, 0, 5},
                  .u.gemm = {true, false, 0.0}};
    op_add(n0, "gemm", 3, 3, "ta 1 tb 0 beta 0 (n = 0)");
    op_case one = {.run = run_gemm, .dt = {BF16, BF16, BF16}, .shape = {1, 1, 1},
                   .u.gemm = {false, false, 0.0}};
    op_add(one, "gemm", 3, 3, "ta 0 tb 0 beta 0");

    /* gemm_bias, dt = (a and w, c, bias): the fused dtypes and unfused mixes; odd and empty
     * (k = 0: c = bias) shapes; every transpose once. */
    const mp_dtype gb[5][3] = {
        {F32, F32, F32}, {F16, F16, F16}, {BF16, BF16, BF16}, {F16, F16, F32}, {F16, F32, F16}};
    for (int i = 0; i < 5; i++)
        for (int s = 0; s < 2; s++) {
            op_case c = {.run = run_gemm_bias, .dt = {gb[i][0], gb[i][1], gb[i][2]},
                         .shape = {s ? 13 : 64, s ? 7 : 48, s ? 37 : 131},
                         .u.gemm = {false, true, 0}};
            op_add(c, "gemm_bias", 3, 3, "ta 0 tb 1");
        }
    for (int t = 0; t < 4; t++) {
        op_case c = {.run = run_gemm_bias, .dt = {F16, F16, F16}, .shape = {33, 17, 71},
                     .u.gemm = {t & 1, t & 2, 0}};
        if (t != 2)
            op_add(c, "gemm_bias", 3, 3, "ta %d tb %d", t & 1, !!(t & 2));
    }
    for (int d = 0; d < NDT; d++) {
        op_case c = {.run = run_gemm_bias, .dt = {DTS[d], DTS[d], DTS[d]}, .shape = {5, 3, 0},
                     .u.gemm = {false, true, 0}};
        op_add(c, "gemm_bias", 3, 3, "ta 0 tb 1 (k = 0)");
    }
}

static void cases_elementwise(void)
{
    const int64_t bias_shapes[3][3] = {{9, 3, 37}, {300, 1, 41}, {5, 0, 3}};
    for (int d = 0; d < NDT; d++)
        for (int s = 0; s < 3; s++)
            for (int mixed = 0; mixed < 2; mixed++) {
                if (mixed && (s == 2 || DTS[d] == MP_F32))
                    continue; /* an FP32 bias: only beside half data */
                op_case c = {.run = run_bias_add, .dt = {DTS[d], mixed ? F32 : DTS[d]},
                             .shape = {bias_shapes[s][0], bias_shapes[s][1], bias_shapes[s][2]}};
                op_add(c, "bias_add", 2, 3, "%s", "");
                c.run = run_bias_grad;
                op_add(c, "bias_grad", 2, 3, "%s", "");
            }
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < 3; k++) { /* k 0: NaN in x, 1: in place, 2: empty */
            op_case c = {.run = run_relu_forward, .dt = {DTS[d]}, .shape = {k == 2 ? 0 : 4099},
                         .u.ew = {.nan = k == 0, .in_place = k == 1}};
            op_add(c, "relu_forward", 1, 1, "%s", k == 0 ? "with NaN" : k == 1 ? "in place" : "");
            c.run = run_relu_backward;
            op_add(c, "relu_backward", 1, 1, "%s", k == 0 ? "with NaN" : k == 1 ? "in place" : "");
        }
    const int64_t xent_shapes[4][2] = {{19, 37}, {3, 1030}, {64, 10}, {1, 1}};
    for (int d = 0; d < NDT; d++)
        for (int s = 0; s < 4; s++)
            for (int k = 0; k < 6; k++) {
                if (s == 3 && k > 1)
                    continue;
                op_case c = {.run = run_softmax_xent, .dt = {DTS[d]},
                             .shape = {xent_shapes[s][0], xent_shapes[s][1]},
                             .u.xent = {k & 1 ? 0.1 : 0.0, k / 2}};
                static const char *const grads[3] = {"no dlogits", "dlogits",
                                                     "dlogits, scale from the state"};
                op_add(c, "softmax_xent", 1, 2, "smoothing %g %s", c.u.xent.smoothing,
                       grads[k / 2]);
            }
    op_case xr = {.run = run_softmax_xent, .dt = {F32}, .shape = {0, 10}, .u.xent = {0, 1},
                  .refused = true};
    op_add(xr, "softmax_xent", 1, 2, "(no rows: refused)");

    const double alphas[2] = {-0.37, 1024}, values[3] = {1.0 / 3, -2.5e4, 1e6};
    for (int d = 0; d < NDT; d++) {
        for (int k = 0; k < 3; k++) {
            op_case c = {.run = run_scale, .dt = {DTS[d]},
                         .shape = {k < 2 ? 7 : 0, 143}, .u.x = alphas[k % 2]};
            op_add(c, "scale", 1, 2, "by %g", c.u.x);
        }
        for (int k = 0; k < 4; k++) {
            op_case c = {.run = run_fill, .dt = {DTS[d]},
                         .shape = {k < 3 ? 7 : 3, k < 3 ? 143 : 0}, .u.x = values[k % 3]};
            op_add(c, "fill", 1, 2, "with %g", c.u.x);
        }
        for (int e = 0; e < NDT; e++) {
            op_case c = {.run = run_convert, .dt = {DTS[d], DTS[e]}, .shape = {5003}};
            op_add(c, "convert", 2, 1, "%s", "");
        }
    }
    op_case ce = {.run = run_convert, .dt = {F32, F16}, .shape = {0}};
    op_add(ce, "convert", 2, 1, "%s", "");
    for (int k = 0; k < 27; k++) {
        op_case c = {.run = run_add, .dt = {DTS[k % 3], DTS[k / 3 % 3], DTS[k / 9]},
                     .shape = {3001}};
        for (int relu = 0; relu < 2; relu++) {
            const char *op = relu ? "add_relu" : "add";
            c.u.ew.relu = relu;
            c.u.ew.in_place = false;
            op_add(c, op, 3, 1, "%s", "");
            c.u.ew.in_place = true; /* y may alias a when their dtypes match */
            if (c.dt[0] == c.dt[2])
                op_add(c, op, 3, 1, "in place");
        }
    }
    op_case ae = {.run = run_add, .dt = {F16, F32, BF16}, .shape = {0}};
    op_add(ae, "add", 3, 1, "%s", "");
    ae.u.ew.relu = true;
    op_add(ae, "add_relu", 3, 1, "%s", "");

    const double ps[4] = {0.3, 0.0, 0.9, 0.5};
    const uint64_t offsets[4] = {12345, (1ull << 32) - 777, 3, 0};
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < 4; k++) {
            op_case c = {.run = run_dropout_forward, .dt = {DTS[d]},
                         .shape = {k < 3 ? 100003 : 0}, .u.dropout = {ps[k], offsets[k], -1}};
            unsigned long long off = offsets[k];
            op_add(c, "dropout_forward", 1, 1, "p %g offset %llu", ps[k], off);
            c.run = run_dropout_backward;
            op_add(c, "dropout_backward", 1, 1, "p %g offset %llu", ps[k], off);
        }
    const int64_t steps[2] = {3, 65537}; /* the step read from each side's memory */
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < 2; k++) {
            op_case c = {.run = run_dropout_forward, .dt = {DTS[d]}, .shape = {100003},
                         .u.dropout = {0.3, 12345, steps[k]}};
            op_add(c, "dropout_forward", 1, 1, "p 0.3 offset 12345 step %lld", (long long)steps[k]);
            c.run = run_dropout_backward;
            op_add(c, "dropout_backward", 1, 1, "p 0.3 offset 12345 step %lld",
                   (long long)steps[k]);
        }
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < 5; k++) { /* k 4: empty */
            if (k == 3 && DTS[d] != MP_F32)
                continue; /* g * 8 overflows FP32 only from FP32 gradients */
            op_case c = {.run = run_grad_stats, .dt = {DTS[d]}, .shape = {k < 4 ? 100003 : 0},
                         .u.stats = {k == 3 ? 8.0 : 0.37, k < 4 ? k : 0}};
            static const char *const bads[5] = {"", " with inf", " with NaN",
                                                " with an FP32 overflow", ""};
            op_add(c, "grad_stats", 1, 1, "scale %g%s", c.u.stats.scale, bads[k]);
        }
}

void op_cases_dense(void)
{
    cases_gemm();
    cases_elementwise();
}
