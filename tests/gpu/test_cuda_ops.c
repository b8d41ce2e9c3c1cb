/* The CUDA backend's dense and elementwise ops against the CPU backend on the same random
 * inputs (never zero) in FP32, fp16 and bf16, outputs poisoned with NaN first: gemm in all four
 * transpose combinations on sizes that are no multiple of 8 or 16, with and without beta and
 * with mixed dtypes; gemm_bias (fused and not); bias_add, bias_grad, relu forward and backward (NaN propagates, in place);
 * softmax cross-entropy with and without label smoothing and dlogits; scale, fill, convert
 * between every pair of dtypes (bitwise, through subnormals, overflow, inf and NaN); add with
 * mixed dtypes; dropout with the same mask bit for bit; grad_stats with inf and NaN; and the
 * memory ops (zeroed, counted blocks, NULL when out of memory; copies). Skipped (exit 77)
 * without a usable GPU. */
#include "tests/util/test_gpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mp_ops *gpu, *cpu;

#define NAME(dt) mp_dtype_name(dt)

/* Device memory: blocks come zeroed and counted under their category, exactly their bytes, and
 * are uncounted when freed, also across many allocations and frees that churn the backend's
 * pointer table; copy_in, copy within the device at odd byte offsets and copy_out move bytes
 * unchanged and touch nothing else. */
static void test_memory(void **state)
{
    (void)state;
    assert_false(gpu->host_memory);
    const int64_t base = mp_mem_current(MP_MEM_DATA);
    const size_t sizes[3] = {0, 4099, (size_t)1 << 20};
    unsigned char *blk[3];
    for (int i = 0; i < 3; i++) {
        blk[i] = gpu->mem_alloc(sizes[i], MP_MEM_DATA);
        assert_non_null(blk[i]);
    }
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base + (int64_t)(sizes[1] + sizes[2]));
    size_t n = sizes[2], m = sizes[1];
    unsigned char *host = malloc(n), *back = malloc(n);
    assert_non_null(host);
    assert_non_null(back);
    memset(back, 0xab, n);
    mp_gpu_get(back, blk[2], n);
    for (size_t i = 0; i < n; i++)
        if (back[i] != 0)
            fail_msg("mem_alloc: byte %zu of a new block is %d, not 0", i, back[i]);
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned char)(i * 131 + 7);
    mp_gpu_put(blk[2], host, n);
    assert_int_equal(gpu->copy(blk[1], blk[2] + 3, m - 1), MP_OK);
    mp_gpu_get(back, blk[1], m);
    for (size_t i = 0; i + 1 < m; i++)
        if (back[i] != host[i + 3])
            fail_msg("copy: byte %zu is %d, want %d", i, back[i], host[i + 3]);
    assert_int_equal(back[m - 1], 0); /* past the copy: still the zero of mem_alloc */
    mp_gpu_get(back, blk[2], n);
    assert_memory_equal(back, host, n);
    free(host);
    free(back);
    for (int i = 0; i < 3; i++)
        gpu->mem_free(blk[i]);
    gpu->mem_free(NULL);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    /* Out of device memory: NULL, nothing counted, and the device still usable. */
    assert_null(gpu->mem_alloc((size_t)1 << 50, MP_MEM_DATA));
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    assert_int_equal(gpu->sync(), MP_OK);
    enum { LIVE = 8, ROUNDS = 3000 };
    void *ring[LIVE] = {NULL};
    int64_t held = 0;
    for (int r = 0; r < ROUNDS; r++) {
        if (ring[r % LIVE]) {
            gpu->mem_free(ring[r % LIVE]);
            held -= 64 + (r - LIVE);
        }
        ring[r % LIVE] = gpu->mem_alloc((size_t)(64 + r), MP_MEM_DATA);
        assert_non_null(ring[r % LIVE]);
        held += 64 + r;
        assert_int_equal(mp_mem_current(MP_MEM_DATA), base + held);
    }
    for (int i = 0; i < LIVE; i++)
        gpu->mem_free(ring[i]);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    /* Pinned host blocks: zeroed, counted, copied from asynchronously (the bytes arrive once
     * copy_out has waited), uncounted when freed. */
    enum { PIN = 1 << 16 };
    unsigned char *pin = gpu->host_alloc(PIN, MP_MEM_DATA), *dev = gpu->mem_alloc(PIN, MP_MEM_DATA);
    unsigned char *out = malloc(PIN);
    assert_non_null(pin);
    assert_non_null(dev);
    assert_non_null(out);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base + 2 * PIN);
    for (size_t i = 0; i < PIN; i++)
        if (pin[i] != 0)
            fail_msg("host_alloc: byte %zu of a new pinned block is %d, not 0", i, pin[i]);
    for (size_t i = 0; i < PIN; i++)
        pin[i] = (unsigned char)(i * 29 + 3);
    assert_int_equal(gpu->copy_in(dev, pin, PIN), MP_OK);
    mp_gpu_get(out, dev, PIN);
    assert_memory_equal(out, pin, PIN);
    gpu->host_free(pin);
    gpu->mem_free(dev);
    free(out);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
}

static void check_gemm(mp_dtype at, mp_dtype bt, mp_dtype ct, bool ta, bool tb,
                       const int64_t mnk[3], double beta, uint64_t seed)
{
    mp_rng r;
    mp_rng_seed(&r, 101, seed);
    int64_t m = mnk[0], n = mnk[1], k = mnk[2];
    int64_t as[2] = {ta ? k : m, ta ? m : k}, bs[2] = {tb ? n : k, tb ? k : n}, cs[2] = {m, n};
    mp_gpu_pair a = mp_gpu_random(at, 2, as, &r, -1, 1), b = mp_gpu_random(bt, 2, bs, &r, -1, 1);
    /* beta = 0: c is not read, so it starts poisoned and every element must be written. */
    mp_gpu_pair c = beta != 0 ? mp_gpu_random(ct, 2, cs, &r, -1, 1) : mp_gpu_poisoned(ct, 2, cs);
    assert_int_equal(cpu->gemm(ta, tb, 0.75, &a.host, &b.host, beta, &c.host), MP_OK);
    assert_int_equal(gpu->gemm(ta, tb, 0.75, &a.dev, &b.dev, beta, &c.dev), MP_OK);
    /* k products of size <= 0.75 and beta c (<= 0.5) summed in FP32 (TF32 is off), then one
     * rounding to c's dtype. */
    mp_gpu_check(&c, mp_gpu_atol(k + 1, 1.0), mp_gpu_rtol(ct),
                 "gemm a %s b %s c %s ta %d tb %d m %lld n %lld k %lld beta %g", NAME(at),
                 NAME(bt), NAME(ct), ta, tb, (long long)m, (long long)n, (long long)k, beta);
    mp_gpu_pair_free(&a);
    mp_gpu_pair_free(&b);
    mp_gpu_pair_free(&c);
}

static void test_gemm(void **state)
{
    (void)state;
    const int64_t sizes[2][3] = {{13, 7, 37}, {67, 45, 131}};
    uint64_t seed = 0;
    for (int d = 0; d < MP_GPU_NDTYPES; d++)
        for (int t = 0; t < 4; t++)
            for (int s = 0; s < 2; s++)
                for (int b = 0; b < 2; b++) {
                    mp_dtype dt = mp_gpu_dtypes[d];
                    check_gemm(dt, dt, dt, t & 1, t & 2, sizes[s], b ? 0.5 : 0.0, seed++);
                }
    /* Mixed storage: half operands with an FP32 result (O1 weight gradients), and others. */
    const mp_dtype mixes[][3] = {{MP_F16, MP_F16, MP_F32},
                                 {MP_BF16, MP_BF16, MP_F32},
                                 {MP_F32, MP_F16, MP_BF16},
                                 {MP_BF16, MP_F32, MP_F16}};
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 4; t++)
            check_gemm(mixes[i][0], mixes[i][1], mixes[i][2], t & 1, t & 2, sizes[1], 0.5,
                       seed++);
}

/* gemm_bias (the linear layer's forward) with the bias in cuBLASLt's epilogue where dtypes
 * allow, and the unfused path for others. The CPU rounds the product p to c's dtype and then
 * the sum; the fused GPU rounds once. The product's rounding is up to half an ulp of |p|, not
 * of the result, which is much smaller where the bias cancels the product, so each element is
 * allowed one ulp of c's dtype at |p| (from the CPU's product) beyond gemm's tolerance. */
static void test_gemm_bias(void **state)
{
    (void)state;
    const mp_dtype cases[][3] = {{MP_F32, MP_F32, MP_F32}, {MP_F16, MP_F16, MP_F16},
                                 {MP_BF16, MP_BF16, MP_BF16}, {MP_F16, MP_F16, MP_F32},
                                 {MP_F16, MP_F32, MP_F16}};
    const int64_t m = 64, n = 48, k = 131;
    for (int i = 0; i < 5; i++) {
        mp_rng r;
        mp_rng_seed(&r, 105, (uint64_t)i);
        mp_dtype at = cases[i][0], ct = cases[i][1], bt = cases[i][2];
        int64_t as[2] = {m, k}, ws[2] = {n, k}, cs[2] = {m, n}, bs[1] = {n};
        mp_gpu_pair a = mp_gpu_random(at, 2, as, &r, -1, 1);
        mp_gpu_pair w = mp_gpu_random(at, 2, ws, &r, -1, 1);
        mp_gpu_pair b = mp_gpu_random(bt, 1, bs, &r, -1, 1), c = mp_gpu_poisoned(ct, 2, cs);
        mp_gpu_pair p = mp_gpu_pair_alloc(ct, 2, cs);
        assert_int_equal(cpu->gemm(false, true, 1.0, &a.host, &w.host, 0.0, &p.host), MP_OK);
        assert_int_equal(cpu->gemm_bias(false, true, &a.host, &w.host, &b.host, &c.host), MP_OK);
        assert_int_equal(gpu->gemm_bias(false, true, &a.dev, &w.dev, &b.dev, &c.dev), MP_OK);
        double atol = mp_gpu_atol(k + 1, 1.0), rtol = mp_gpu_rtol(ct);
        double *got = mp_gpu_values(&c.dev);
        int64_t bad = -1;
        double g = 0, want = 0, prod = 0;
        for (int64_t e = 0; e < m * n && bad < 0; e++) {
            g = got[e];
            want = mp_load(c.host.data, ct, (size_t)e);
            prod = mp_load(p.host.data, ct, (size_t)e);
            if (!(fabs(g - want) <= atol + rtol * (fabs(want) + fabs(prod))))
                bad = e;
        }
        free(got);
        if (bad >= 0)
            fail_msg("gemm_bias a %s c %s bias %s: element %lld of %lld: got %.10g, want %.10g "
                     "(product %.10g; |diff| %.3g > %.3g)", NAME(at), NAME(ct), NAME(bt),
                     (long long)bad, (long long)(m * n), g, want, prod, fabs(g - want),
                     atol + rtol * (fabs(want) + fabs(prod)));
        mp_gpu_pair *all[] = {&a, &w, &b, &c, &p};
        for (int j = 0; j < 5; j++)
            mp_gpu_pair_free(all[j]);
    }
}

/* y += b, and db = column sums of dy, on (rows, cols) read from a 3-D y as the op reads it. */
static void test_bias(void **state)
{
    (void)state;
    const int64_t shapes[2][3] = {{9, 3, 37}, {300, 1, 41}};
    for (int d = 0; d < MP_GPU_NDTYPES; d++)
        for (int s = 0; s < 2; s++)
            for (int mixed = 0; mixed < 2; mixed++) {
                mp_dtype dt = mp_gpu_dtypes[d], bt = mixed ? MP_F32 : dt;
                mp_rng r;
                mp_rng_seed(&r, 102, (uint64_t)(d * 4 + s * 2 + mixed));
                int64_t rows = shapes[s][0], cols = shapes[s][1] * shapes[s][2];
                mp_gpu_pair y = mp_gpu_random(dt, 3, shapes[s], &r, -1, 1);
                mp_gpu_pair b = mp_gpu_random(bt, 1, &cols, &r, -1, 1);
                mp_gpu_pair db = mp_gpu_poisoned(bt, 1, &cols);
                assert_int_equal(cpu->bias_add(&y.host, &b.host), MP_OK);
                assert_int_equal(gpu->bias_add(&y.dev, &b.dev), MP_OK);
                /* One FP32 addition, then one rounding to y's dtype. */
                mp_gpu_check(&y, 0, mp_gpu_rtol(dt), "bias_add y %s b %s", NAME(dt), NAME(bt));
                assert_int_equal(cpu->bias_grad(&y.host, &db.host), MP_OK);
                assert_int_equal(gpu->bias_grad(&y.dev, &db.dev), MP_OK);
                /* rows terms of size <= 2 summed in FP32, one rounding to db's dtype. */
                mp_gpu_check(&db, mp_gpu_atol(rows, 2), mp_gpu_rtol(bt),
                             "bias_grad dy %s db %s rows %lld", NAME(dt), NAME(bt),
                             (long long)rows);
                mp_gpu_pair_free(&y);
                mp_gpu_pair_free(&b);
                mp_gpu_pair_free(&db);
            }
}

/* ReLU is exact: both sides must agree bit for bit, NaN staying NaN, also in place. */
static void test_relu(void **state)
{
    (void)state;
    int64_t n = 4099;
    for (int d = 0; d < MP_GPU_NDTYPES; d++) {
        mp_dtype dt = mp_gpu_dtypes[d];
        mp_rng r;
        mp_rng_seed(&r, 103, (uint64_t)d);
        mp_gpu_pair x = mp_gpu_random(dt, 1, &n, &r, -1, 1);
        mp_gpu_pair dy = mp_gpu_random(dt, 1, &n, &r, -1, 1);
        mp_store(x.host.data, dt, 17, NAN);
        mp_store(x.host.data, dt, 4000, NAN);
        mp_gpu_upload(&x);
        mp_gpu_pair y = mp_gpu_poisoned(dt, 1, &n), dx = mp_gpu_poisoned(dt, 1, &n);
        assert_int_equal(cpu->relu_forward(&x.host, &y.host), MP_OK);
        assert_int_equal(gpu->relu_forward(&x.dev, &y.dev), MP_OK);
        mp_gpu_check_bits(&y, "relu_forward %s", NAME(dt));
        assert_true(isnan(mp_load(y.host.data, dt, 17)));
        assert_int_equal(cpu->relu_backward(&y.host, &dy.host, &dx.host), MP_OK);
        assert_int_equal(gpu->relu_backward(&y.dev, &dy.dev, &dx.dev), MP_OK);
        mp_gpu_check_bits(&dx, "relu_backward %s", NAME(dt));
        /* In place: y = relu(y) leaves y, dy = relu'(dy) keeps what was kept. */
        assert_int_equal(gpu->relu_forward(&y.dev, &y.dev), MP_OK);
        mp_gpu_check_bits(&y, "relu_forward in place %s", NAME(dt));
        assert_int_equal(cpu->relu_backward(&y.host, &dy.host, &dy.host), MP_OK);
        assert_int_equal(gpu->relu_backward(&y.dev, &dy.dev, &dy.dev), MP_OK);
        mp_gpu_check_bits(&dy, "relu_backward in place %s", NAME(dt));
        mp_gpu_pair *all[] = {&x, &dy, &y, &dx};
        for (int i = 0; i < 4; i++)
            mp_gpu_pair_free(all[i]);
    }
}

/* Logits in [-3, 3) with a unique arg-max per row (the arg-max of a tie is the op's choice),
 * the label the arg-max in every third row so `correct` counts something. */
static void check_xent(mp_dtype dt, int64_t rows, int64_t cols, double smoothing, bool grad,
                       uint64_t seed)
{
    mp_rng r;
    mp_rng_seed(&r, 104, seed);
    int64_t s[2] = {rows, cols};
    mp_gpu_pair z = mp_gpu_random(dt, 2, s, &r, -3, 3);
    int32_t *labels = malloc((size_t)rows * sizeof *labels);
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
    mp_gpu_pair dz = mp_gpu_poisoned(dt, 2, s);
    const double gs = 512;
    mp_xent_result want, got;
    assert_int_equal(
        cpu->softmax_xent(&z.host, labels, smoothing, gs, NULL, &want, grad ? &dz.host : NULL),
        MP_OK);
    assert_int_equal(
        gpu->softmax_xent(&z.dev, dlabels, smoothing, gs, NULL, &got, grad ? &dz.dev : NULL),
        MP_OK);
    /* Logits are at most 4 in size and a row's loss at most lmax. Per row, the log-sum-exp
     * sums cols terms exp(z - max) <= 1 (the largest is 1) and the smoothing term averages cols
     * logits, in FP32: each within 4u (cols + 4) of exact, plus a few single roundings of
     * values <= lmax (8u lmax). The mean over rows adds 4u lmax, and the result is rounded to
     * FP32 (u relative); the two sides are within twice that of each other. */
    const double u = 0x1p-24, lmax = 7 + log((double)cols), g = gs / (double)rows;
    assert_close(&got.loss, &want.loss, 1, 2 * 4 * u * ((double)cols + 4 + 3 * lmax), 2 * u);
    assert_int_equal(got.correct, want.correct);
    assert_true(want.correct >= (rows + 2) / 3);
    if (grad)
        /* (softmax - target) g: a probability carries the log-sum-exp's error 4u (cols + 4),
         * z - lse's rounding (u lmax) and exp's few ulps (8u); then the product with g and one
         * rounding to dt. */
        mp_gpu_check(&dz, 2 * 4 * u * ((double)cols + 8 + lmax) * g, mp_gpu_rtol(dt),
                     "softmax_xent dlogits %s rows %lld cols %lld smoothing %g", NAME(dt),
                     (long long)rows, (long long)cols, smoothing);
    else /* dlogits NULL: nothing written */
        mp_gpu_check_bits(&dz, "softmax_xent without dlogits %s", NAME(dt));
    if (grad) { /* the loss scale read from a device mp_amp_state, no result for the host:
                   gs / 4 times a scale of 4 is gs exactly, so dlogits must be the same bits */
        mp_gpu_pair dz2 = mp_gpu_poisoned(dt, 2, s);
        mp_amp_state hs = {.scaler.scale = 4.0};
        mp_amp_state *ds = mp_gpu_alloc(sizeof hs);
        mp_gpu_put(ds, &hs, sizeof hs);
        assert_int_equal(gpu->softmax_xent(&z.dev, dlabels, smoothing, gs / 4, ds, NULL,
                                           &dz2.dev), MP_OK);
        size_t bytes = (size_t)mp_tensor_bytes(&dz.dev);
        void *first = malloc(bytes);
        assert_non_null(first);
        mp_gpu_get(first, dz.dev.data, bytes);
        mp_gpu_check_bytes(&dz2.dev, first, "softmax_xent %s with the scale from the state",
                           NAME(dt));
        free(first);
        gpu->mem_free(ds);
        mp_gpu_pair_free(&dz2);
    }
    gpu->mem_free(dlabels);
    free(labels);
    mp_gpu_pair_free(&z);
    mp_gpu_pair_free(&dz);
}

static void test_softmax_xent(void **state)
{
    (void)state;
    const int64_t shapes[3][2] = {{19, 37}, {3, 1030}, {64, 10}};
    uint64_t seed = 0;
    for (int d = 0; d < MP_GPU_NDTYPES; d++)
        for (int s = 0; s < 3; s++)
            for (int k = 0; k < 4; k++)
                check_xent(mp_gpu_dtypes[d], shapes[s][0], shapes[s][1], k & 1 ? 0.1 : 0.0,
                           k & 2, seed++);
}

/* scale is one FP32 multiplication and one rounding; fill stores the value rounded to the
 * dtype (bitwise), 1e6 overflowing fp16 to inf. */
static void test_scale_fill(void **state)
{
    (void)state;
    int64_t s[2] = {7, 143};
    const double alphas[] = {-0.37, 1024}, values[] = {1.0 / 3, -2.5e4, 1e6};
    for (int d = 0; d < MP_GPU_NDTYPES; d++) {
        mp_dtype dt = mp_gpu_dtypes[d];
        mp_rng r;
        mp_rng_seed(&r, 105, (uint64_t)d);
        mp_gpu_pair x = mp_gpu_random(dt, 2, s, &r, -1, 1);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(cpu->scale(&x.host, alphas[k]), MP_OK);
            assert_int_equal(gpu->scale(&x.dev, alphas[k]), MP_OK);
            mp_gpu_check(&x, 0, mp_gpu_rtol(dt), "scale %s by %g", NAME(dt), alphas[k]);
            mp_gpu_upload(&x); /* the next step starts from the same values on both sides */
        }
        for (int k = 0; k < 3; k++) {
            mp_gpu_poison(&x);
            assert_int_equal(cpu->fill(&x.host, values[k]), MP_OK);
            assert_int_equal(gpu->fill(&x.dev, values[k]), MP_OK);
            mp_gpu_check_bits(&x, "fill %s with %g", NAME(dt), values[k]);
        }
        mp_gpu_pair_free(&x);
    }
}

/* Every pair of dtypes, bitwise: magnitudes 2^-30 .. 2^30 of either sign (fp16 subnormals,
 * underflow and overflow, bf16's lost bits), plus inf, -inf and NaN. */
static void test_convert(void **state)
{
    (void)state;
    int64_t n = 5003;
    for (int a = 0; a < MP_GPU_NDTYPES; a++)
        for (int b = 0; b < MP_GPU_NDTYPES; b++) {
            mp_dtype st = mp_gpu_dtypes[a], dt = mp_gpu_dtypes[b];
            mp_rng r;
            mp_rng_seed(&r, 106, (uint64_t)(a * 3 + b));
            mp_gpu_pair src = mp_gpu_pair_alloc(st, 1, &n), dst = mp_gpu_poisoned(dt, 1, &n);
            int span = st == MP_F16 ? 20 : 30; /* fp16 sources stay finite and nonzero */
            for (int64_t i = 0; i < n; i++)
                do {
                    int e = (int)mp_rng_below(&r, (uint64_t)(2 * span + 1)) - span - 1;
                    double v = ldexp(1 + mp_rng_uniform(&r), e);
                    mp_store(src.host.data, st, (size_t)i, mp_rng_next(&r) & 1 ? -v : v);
                } while (mp_load(src.host.data, st, (size_t)i) == 0 ||
                       isinf(mp_load(src.host.data, st, (size_t)i)));
            mp_store(src.host.data, st, 5, INFINITY);
            mp_store(src.host.data, st, 6, -INFINITY);
            mp_store(src.host.data, st, 7, NAN);
            mp_gpu_upload(&src);
            assert_int_equal(cpu->convert(&src.host, &dst.host), MP_OK);
            assert_int_equal(gpu->convert(&src.dev, &dst.dev), MP_OK);
            mp_gpu_check_bits(&dst, "convert %s to %s", NAME(st), NAME(dt));
            mp_gpu_pair_free(&src);
            mp_gpu_pair_free(&dst);
        }
}

/* y = a + b for every combination of dtypes: one FP32 addition, one rounding to y's dtype. */
static void test_add(void **state)
{
    (void)state;
    int64_t n = 3001;
    for (int k = 0; k < 27; k++) {
        mp_dtype at = mp_gpu_dtypes[k % 3], bt = mp_gpu_dtypes[k / 3 % 3];
        mp_dtype yt = mp_gpu_dtypes[k / 9];
        mp_rng r;
        mp_rng_seed(&r, 107, (uint64_t)k);
        mp_gpu_pair a = mp_gpu_random(at, 1, &n, &r, -1, 1);
        mp_gpu_pair b = mp_gpu_random(bt, 1, &n, &r, -1, 1), y = mp_gpu_poisoned(yt, 1, &n);
        assert_int_equal(cpu->add(&a.host, &b.host, &y.host), MP_OK);
        assert_int_equal(gpu->add(&a.dev, &b.dev, &y.dev), MP_OK);
        mp_gpu_check(&y, 0, mp_gpu_rtol(yt), "add a %s b %s y %s", NAME(at), NAME(bt), NAME(yt));
        if (at == yt) { /* y may alias a when the dtypes match */
            assert_int_equal(cpu->add(&a.host, &b.host, &a.host), MP_OK);
            assert_int_equal(gpu->add(&a.dev, &b.dev, &a.dev), MP_OK);
            mp_gpu_check(&a, 0, mp_gpu_rtol(yt), "add in place a %s b %s", NAME(at), NAME(bt));
        }
        mp_gpu_pair_free(&a);
        mp_gpu_pair_free(&b);
        mp_gpu_pair_free(&y);
    }
}

/* The device's mask is the CPU's bit for bit (the same elements are zero: inputs never are),
 * kept values scaled alike; an offset + i past 2^32 catches a 32-bit counter; p = 0 is the
 * identity. */
static void test_dropout(void **state)
{
    (void)state;
    int64_t n = 100003;
    const double ps[] = {0.3, 0.0, 0.9};
    const uint64_t offsets[] = {12345, (1ull << 32) - 777, 3};
    for (int d = 0; d < MP_GPU_NDTYPES; d++)
        for (int k = 0; k < 3; k++) {
            mp_dtype dt = mp_gpu_dtypes[d];
            mp_rng r;
            mp_rng_seed(&r, 108, (uint64_t)(d * 3 + k));
            mp_gpu_pair x = mp_gpu_random(dt, 1, &n, &r, -1, 1), y = mp_gpu_poisoned(dt, 1, &n);
            mp_gpu_pair dx = mp_gpu_poisoned(dt, 1, &n);
            uint64_t seed = 0x5eed + (uint64_t)k;
            double p = ps[k];
            uint64_t off = offsets[k];
            assert_int_equal(cpu->dropout_forward(p, seed, off, &x.host, &y.host), MP_OK);
            assert_int_equal(gpu->dropout_forward(p, seed, off, &x.dev, &y.dev), MP_OK);
            assert_int_equal(cpu->dropout_backward(p, seed, off, &x.host, &dx.host), MP_OK);
            assert_int_equal(gpu->dropout_backward(p, seed, off, &x.dev, &dx.dev), MP_OK);
            mp_gpu_pair *outs[] = {&y, &dx};
            for (int o = 0; o < 2; o++) {
                double *got = mp_gpu_values(&outs[o]->dev);
                int64_t first = -1, kept = 0;
                for (int64_t i = 0; i < n; i++) {
                    bool hz = mp_load(outs[o]->host.data, dt, (size_t)i) == 0;
                    kept += !hz;
                    if (first < 0 && hz != (got[i] == 0))
                        first = i;
                }
                free(got);
                if (first >= 0)
                    fail_msg("dropout %s %s p %g: element %lld dropped on one backend only",
                             o ? "backward" : "forward", NAME(dt), ps[k], (long long)first);
                assert_true(ps[k] > 0 || kept == n);
                /* x (1 / (1 - p)) in FP32, one rounding. */
                mp_gpu_check(outs[o], 0, mp_gpu_rtol(dt), "dropout %s %s p %g",
                             o ? "backward" : "forward", NAME(dt), ps[k]);
            }
            mp_gpu_pair_free(&x);
            mp_gpu_pair_free(&y);
            mp_gpu_pair_free(&dx);
        }
}

/* Sum of squares of g * scale (each product one FP32 rounding, its square exact in FP64) added
 * to *sumsq in FP64: the terms agree, only the summation order differs, n + 1 nonnegative
 * terms each side within n 2^-53 relative. Then an inf, a NaN, and an FP32 overflow of
 * g * scale must each set the flag. */
static void test_grad_stats(void **state)
{
    (void)state;
    int64_t n = 100003;
    for (int d = 0; d < MP_GPU_NDTYPES; d++)
        for (int k = 0; k < 4; k++) {
            mp_dtype dt = mp_gpu_dtypes[d];
            if (k == 3 && dt != MP_F32)
                continue; /* g * 8 overflows FP32 only from FP32 gradients */
            mp_rng r;
            mp_rng_seed(&r, 109, (uint64_t)(d * 4 + k));
            mp_gpu_pair g = mp_gpu_random(dt, 1, &n, &r, -1, 1);
            double scale = k == 3 ? 8.0 : 0.37;
            if (k > 0)
                mp_store(g.host.data, dt, (size_t)(n - 1 - 7 * k),
                         k == 1 ? INFINITY : k == 2 ? NAN : 1e38);
            mp_gpu_upload(&g);
            double s_cpu = 2.5, s_gpu = 2.5;
            bool nf_cpu = false, nf_gpu = false;
            assert_int_equal(cpu->grad_stats(&g.host, scale, &s_cpu, &nf_cpu), MP_OK);
            assert_int_equal(gpu->grad_stats(&g.dev, scale, &s_gpu, &nf_gpu), MP_OK);
            if (nf_gpu != (k > 0) || nf_cpu != (k > 0))
                fail_msg("grad_stats %s case %d: nonfinite cpu %d gpu %d, want %d", NAME(dt), k,
                         nf_cpu, nf_gpu, k > 0);
            if (k == 0)
                assert_close(&s_gpu, &s_cpu, 1, 0, 2 * (double)(n + 1) * 0x1p-53);
            mp_gpu_pair_free(&g);
        }
}

int main(void)
{
    gpu = mp_gpu_or_skip();
    cpu = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),       cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_bias),    cmocka_unit_test(test_bias),
        cmocka_unit_test(test_relu),         cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_scale_fill),   cmocka_unit_test(test_convert),
        cmocka_unit_test(test_add),          cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_grad_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
