/* The CUDA backend's convolution, batch normalisation and pooling against the CPU backend on
 * the same random inputs (never zero), outputs poisoned with NaN first: conv2d forward,
 * backward-data and backward-filter over strides, padding, dilation, groups, 1x1, 3x3, 5x5
 * and non-square filters in FP32, fp16, bf16 and the mixes O1 uses; batchnorm training
 * (y, saved and running statistics), evaluation (save_* left alone) and backward with FP32
 * parameters and FP32 or half activations, and with half parameters (O3); max and average
 * pooling with padding and overlap, global average pooling, and max pooling's routing of ties to
 * the first maximum. Skipped (exit 77) without a usable GPU. */
#include "tests/util/test_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const mp_ops *gpu, *cpu;

#define NAME(dt) mp_dtype_name(dt)

typedef struct conv_case {
    int64_t n, h, w, c, k, r, s;
    mp_conv_desc d;
} conv_case;

static const conv_case conv_cases[] = {
    {2, 9, 7, 3, 5, 3, 3, {{2, 2}, {1, 1}, {1, 1}, 1}},   /* stride 2, pad 1 */
    {2, 11, 9, 4, 6, 3, 3, {{1, 1}, {2, 2}, {2, 2}, 1}},  /* dilation 2 */
    {2, 7, 7, 6, 10, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 2}},  /* groups 2 */
    {2, 6, 6, 8, 8, 3, 3, {{2, 1}, {1, 1}, {1, 1}, 8}},   /* depthwise */
    {3, 6, 5, 5, 7, 1, 1, {{1, 1}, {0, 0}, {1, 1}, 1}},   /* 1x1 */
    {2, 5, 7, 6, 4, 1, 1, {{2, 2}, {0, 0}, {1, 1}, 2}},   /* 1x1, stride 2, groups 2 */
    {2, 9, 8, 3, 4, 5, 5, {{1, 1}, {2, 2}, {1, 1}, 1}},   /* 5x5 */
    {2, 7, 10, 4, 3, 3, 1, {{1, 2}, {1, 0}, {1, 1}, 1}},  /* 3x1, non-square stride */
    {1, 12, 9, 16, 24, 2, 3, {{2, 1}, {0, 1}, {1, 2}, 1}}, /* 2x3, dilated along W */
};

/* rtol of a convolution output of dtype `out` from inputs of dtypes in1 and in2: the CUDA
 * backend sums in FP32 but hands cuDNN one work dtype (the inputs' when they agree, else FP32;
 * conv2d.cu), so an output of another dtype is rounded to the work dtype first, as PyTorch's
 * autocast does (the O1 weight gradient: half sums widened to FP32), where the CPU rounds once. */
static double conv_rtol(mp_dtype out, mp_dtype in1, mp_dtype in2)
{
    mp_dtype work = in1 == in2 ? in1 : MP_F32;
    return mp_gpu_rtol(out) + (work != out ? mp_gpu_rtol(work) : 0);
}

/* One case with x (and dx) in xt, w in wt, y and dy in yt, dw in dwt. */
static void check_conv(const conv_case *cc, mp_dtype xt, mp_dtype wt, mp_dtype yt, mp_dtype dwt,
                       uint64_t seed)
{
    const mp_conv_desc *d = &cc->d;
    int64_t p = (cc->h + 2 * d->pad[0] - d->dilation[0] * (cc->r - 1) - 1) / d->stride[0] + 1;
    int64_t q = (cc->w + 2 * d->pad[1] - d->dilation[1] * (cc->s - 1) - 1) / d->stride[1] + 1;
    int64_t xs[4] = {cc->n, cc->h, cc->w, cc->c}, ys[4] = {cc->n, p, q, cc->k};
    int64_t ws[4] = {cc->k, cc->r, cc->s, cc->c / d->groups};
    mp_rng r;
    mp_rng_seed(&r, 201, seed);
    mp_gpu_pair x = mp_gpu_random(xt, 4, xs, &r, -1, 1);
    mp_gpu_pair w = mp_gpu_random(wt, 4, ws, &r, -1, 1);
    mp_gpu_pair dy = mp_gpu_random(yt, 4, ys, &r, -1, 1), y = mp_gpu_poisoned(yt, 4, ys);
    mp_gpu_pair dx = mp_gpu_poisoned(xt, 4, xs), dw = mp_gpu_poisoned(dwt, 4, ws);
    assert_int_equal(cpu->conv2d_forward(d, &x.host, &w.host, &y.host), MP_OK);
    assert_int_equal(gpu->conv2d_forward(d, &x.dev, &w.dev, &y.dev), MP_OK);
    assert_int_equal(cpu->conv2d_backward_data(d, &dy.host, &w.host, &dx.host), MP_OK);
    assert_int_equal(gpu->conv2d_backward_data(d, &dy.dev, &w.dev, &dx.dev), MP_OK);
    assert_int_equal(cpu->conv2d_backward_filter(d, &x.host, &dy.host, &dw.host), MP_OK);
    assert_int_equal(gpu->conv2d_backward_filter(d, &x.dev, &dy.dev, &dw.dev), MP_OK);
    /* Each output is an FP32 sum (TF32 is off) of products of size <= 1, rounded to its dtype
     * (conv_rtol): y over the R S C/G taps, dx over at most R S K/G, dw over the N P Q
     * positions. */
    int64_t taps = cc->r * cc->s, cg = cc->c / d->groups, kg = cc->k / d->groups;
    char what[256];
    snprintf(what, sizeof what,
             "conv2d x %s w %s y %s dw %s: n %lld h %lld w %lld c %lld k %lld %lldx%lld stride "
             "%d %d pad %d %d dilation %d %d groups %d",
             NAME(xt), NAME(wt), NAME(yt), NAME(dwt), (long long)cc->n, (long long)cc->h,
             (long long)cc->w, (long long)cc->c, (long long)cc->k, (long long)cc->r,
             (long long)cc->s, d->stride[0], d->stride[1], d->pad[0], d->pad[1], d->dilation[0],
             d->dilation[1], d->groups);
    mp_gpu_check(&y, mp_gpu_atol(taps * cg, 1), conv_rtol(yt, xt, wt), "%s: forward", what);
    mp_gpu_check(&dx, mp_gpu_atol(taps * kg, 1), conv_rtol(xt, yt, wt), "%s: backward_data",
                 what);
    mp_gpu_check(&dw, mp_gpu_atol(cc->n * p * q, 1), conv_rtol(dwt, xt, yt),
                 "%s: backward_filter", what);
    mp_gpu_pair *all[] = {&x, &w, &dy, &y, &dx, &dw};
    for (int i = 0; i < 6; i++)
        mp_gpu_pair_free(all[i]);
}

static void test_conv2d(void **state)
{
    (void)state;
    const int ncases = (int)(sizeof conv_cases / sizeof conv_cases[0]);
    uint64_t seed = 0;
    for (int i = 0; i < ncases; i++) {
        for (int k = 0; k < MP_GPU_NDTYPES; k++) {
            mp_dtype dt = mp_gpu_dtypes[k];
            check_conv(&conv_cases[i], dt, dt, dt, dt, seed++);
        }
        /* O1: half activations and weight copy, FP32 weight gradients; and a free mix. */
        check_conv(&conv_cases[i], MP_F16, MP_F16, MP_F16, MP_F32, seed++);
        check_conv(&conv_cases[i], MP_BF16, MP_BF16, MP_BF16, MP_F32, seed++);
        check_conv(&conv_cases[i], MP_BF16, MP_F32, MP_F16, MP_F32, seed++);
    }
}

/* Batch normalisation of x (n, h, w, c) in xt with gamma, beta and their gradients in pt and
 * the statistics in FP32. x is U(-2, 2) plus a channel offset (c % 4) / 2, so |x| <= 4 and the
 * mean matters. Each backend is within test_batchnorm.c's bound of the exact values (FP32 sums
 * of M terms of size <= 4, then one rounding: 64u for per-element results and statistics,
 * M 8u for the parameter gradients), so the two are within twice that of each other. */
static void check_bn(const int64_t shape[4], mp_dtype xt, mp_dtype pt, uint64_t seed)
{
    const double u = 0x1p-24;
    int64_t C = shape[3], M = shape[0] * shape[1] * shape[2];
    double acc = 2 * 64 * u, sum = 2 * (double)M * 8 * u;
    mp_rng r;
    mp_rng_seed(&r, 202, seed);
    mp_gpu_pair x = mp_gpu_random(xt, 4, shape, &r, -2, 2);
    mp_gpu_pair dy = mp_gpu_random(xt, 4, shape, &r, -1, 1);
    for (int64_t i = 0; i < M * C; i++) { /* the offset, keeping x nonzero */
        double v = mp_load(x.host.data, xt, (size_t)i) + (double)(i % C % 4) / 2;
        mp_store(x.host.data, xt, (size_t)i, v != 0 ? v : 0.25);
    }
    mp_gpu_upload(&x);
    mp_gpu_pair g = mp_gpu_random(pt, 1, &C, &r, 0.5, 1.5);
    mp_gpu_pair b = mp_gpu_random(pt, 1, &C, &r, -1, 1);
    mp_gpu_pair rm = mp_gpu_random(MP_F32, 1, &C, &r, -1, 1);
    mp_gpu_pair rv = mp_gpu_random(MP_F32, 1, &C, &r, 0.5, 1.5);
    mp_gpu_pair sm = mp_gpu_poisoned(MP_F32, 1, &C), si = mp_gpu_poisoned(MP_F32, 1, &C);
    mp_gpu_pair y = mp_gpu_poisoned(xt, 4, shape), dx = mp_gpu_poisoned(xt, 4, shape);
    mp_gpu_pair dg = mp_gpu_poisoned(pt, 1, &C), db = mp_gpu_poisoned(pt, 1, &C);
    const mp_bn_args a = {.eps = 1e-5, .momentum = 0.1};
    char what[128];
    snprintf(what, sizeof what, "batchnorm x %s params %s (%lld, %lld, %lld, %lld)", NAME(xt),
             NAME(pt), (long long)shape[0], (long long)shape[1], (long long)shape[2],
             (long long)C);

    assert_int_equal(cpu->batchnorm_forward(&a, true, &x.host, &g.host, &b.host, &rm.host,
                                            &rv.host, &sm.host, &si.host, &y.host),
                     MP_OK);
    assert_int_equal(gpu->batchnorm_forward(&a, true, &x.dev, &g.dev, &b.dev, &rm.dev, &rv.dev,
                                            &sm.dev, &si.dev, &y.dev),
                     MP_OK);
    mp_gpu_check(&y, acc, mp_gpu_rtol(xt), "%s: train y", what);
    mp_gpu_check(&sm, acc, 2 * 4 * u, "%s: train save_mean", what);
    mp_gpu_check(&si, acc, 2 * 4 * u, "%s: train save_invstd", what);
    mp_gpu_check(&rm, acc, 2 * 4 * u, "%s: train running_mean", what);
    mp_gpu_check(&rv, acc, 2 * 4 * u, "%s: train running_var", what);

    /* Evaluation from the same running statistics on both sides; save_* stay as they are. */
    mp_gpu_upload(&rm);
    mp_gpu_upload(&rv);
    void *sm_before = mp_gpu_bytes(&sm.dev), *si_before = mp_gpu_bytes(&si.dev);
    mp_gpu_poison(&y);
    assert_int_equal(cpu->batchnorm_forward(&a, false, &x.host, &g.host, &b.host, &rm.host,
                                            &rv.host, &sm.host, &si.host, &y.host),
                     MP_OK);
    assert_int_equal(gpu->batchnorm_forward(&a, false, &x.dev, &g.dev, &b.dev, &rm.dev, &rv.dev,
                                            &sm.dev, &si.dev, &y.dev),
                     MP_OK);
    mp_gpu_check(&y, acc, mp_gpu_rtol(xt), "%s: eval y", what);
    mp_gpu_check_bits(&rm, "%s: eval running_mean unchanged", what);
    mp_gpu_check_bits(&rv, "%s: eval running_var unchanged", what);
    mp_gpu_check_bytes(&sm.dev, sm_before, "%s: eval save_mean unchanged", what);
    mp_gpu_check_bytes(&si.dev, si_before, "%s: eval save_invstd unchanged", what);
    free(sm_before);
    free(si_before);

    /* Backward from the CPU's saved statistics on both sides. */
    mp_gpu_upload(&sm);
    mp_gpu_upload(&si);
    assert_int_equal(cpu->batchnorm_backward(&x.host, &dy.host, &g.host, &sm.host, &si.host,
                                             &dx.host, &dg.host, &db.host),
                     MP_OK);
    assert_int_equal(gpu->batchnorm_backward(&x.dev, &dy.dev, &g.dev, &sm.dev, &si.dev, &dx.dev,
                                             &dg.dev, &db.dev),
                     MP_OK);
    double prt = pt == MP_F32 ? 2 * 4 * u : mp_gpu_rtol(pt);
    mp_gpu_check(&dx, acc, mp_gpu_rtol(xt), "%s: backward dx", what);
    mp_gpu_check(&dg, sum, prt, "%s: backward dgamma", what);
    mp_gpu_check(&db, sum, prt, "%s: backward dbeta", what);
    mp_gpu_pair *all[] = {&x, &dy, &g, &b, &rm, &rv, &sm, &si, &y, &dx, &dg, &db};
    for (int i = 0; i < 12; i++)
        mp_gpu_pair_free(all[i]);
}

static void test_batchnorm(void **state)
{
    (void)state;
    const int64_t shapes[3][4] = {{4, 5, 3, 7}, {2, 3, 4, 70}, {16, 1, 1, 37}};
    uint64_t seed = 0;
    for (int s = 0; s < 3; s++) {
        for (int k = 0; k < MP_GPU_NDTYPES; k++)
            check_bn(shapes[s], mp_gpu_dtypes[k], MP_F32, seed++);
        check_bn(shapes[s], MP_F16, MP_F16, seed++); /* O3 without keep_batchnorm_fp32 */
        check_bn(shapes[s], MP_BF16, MP_BF16, seed++);
    }
}

typedef struct pool_case {
    int64_t n, h, w, c;
    mp_pool_desc d;
} pool_case;

static const pool_case pool_cases[] = {
    {2, 4, 4, 3, {{2, 2}, {2, 2}, {0, 0}, true}},
    {2, 5, 6, 2, {{3, 3}, {2, 2}, {1, 1}, true}}, /* overlapping windows, padding */
    {2, 5, 6, 2, {{3, 3}, {2, 2}, {1, 1}, false}},
    {2, 7, 5, 3, {{3, 2}, {1, 2}, {1, 0}, false}}, /* non-square window and stride */
    {2, 5, 5, 66, {{2, 2}, {2, 2}, {1, 1}, true}}, /* more channels than one block */
    {2, 6, 6, 4, {{3, 3}, {1, 1}, {1, 1}, false}}, /* each input in up to 9 windows */
    {2, 6, 6, 4, {{3, 3}, {1, 1}, {1, 1}, true}},
    {2, 7, 6, 66, {{7, 6}, {1, 1}, {0, 0}, false}}, /* global average */
};

/* Forward, then backward from the CPU's y on both sides. x holds, in each (n, c) plane, a
 * random permutation of (k - H W / 2 + 1/2) / 8, k < H W: distinct, nonzero and exact in every
 * dtype, so max pooling has no ties and is exact, and window sums are exact in FP32; with
 * `ties` every x is the same value, and each window's gradient goes to its first maximum. */
static void check_pool(const pool_case *pc, mp_dtype dt, bool ties, uint64_t seed)
{
    const mp_pool_desc *d = &pc->d;
    int64_t p = (pc->h + 2 * d->pad[0] - d->window[0]) / d->stride[0] + 1;
    int64_t q = (pc->w + 2 * d->pad[1] - d->window[1]) / d->stride[1] + 1;
    int64_t xs[4] = {pc->n, pc->h, pc->w, pc->c}, ys[4] = {pc->n, p, q, pc->c};
    int64_t hw = pc->h * pc->w;
    mp_rng r;
    mp_rng_seed(&r, 203, seed);
    mp_gpu_pair x = mp_gpu_pair_alloc(dt, 4, xs), dy = mp_gpu_random(dt, 4, ys, &r, -1, 1);
    mp_gpu_pair y = mp_gpu_poisoned(dt, 4, ys), dx = mp_gpu_poisoned(dt, 4, xs);
    int64_t *perm = malloc((size_t)hw * sizeof *perm);
    assert_non_null(perm);
    for (int64_t n = 0; n < pc->n; n++)
        for (int64_t c = 0; c < pc->c; c++) {
            for (int64_t i = 0; i < hw; i++)
                perm[i] = i;
            for (int64_t i = hw - 1; i > 0; i--) {
                int64_t j = (int64_t)mp_rng_below(&r, (uint64_t)i + 1), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            for (int64_t i = 0; i < hw; i++)
                mp_store(x.host.data, dt, (size_t)((n * hw + i) * pc->c + c),
                         ties ? 1.5 : ((double)perm[i] - (double)(hw / 2) + 0.5) / 8);
        }
    free(perm);
    mp_gpu_upload(&x);
    assert_int_equal(cpu->pool_forward(d, &x.host, &y.host), MP_OK);
    assert_int_equal(gpu->pool_forward(d, &x.dev, &y.dev), MP_OK);
    char what[160];
    snprintf(what, sizeof what,
             "%s pool %s: n %lld h %lld w %lld c %lld window %d %d stride %d %d pad %d %d%s",
             d->max ? "max" : "avg", NAME(dt), (long long)pc->n, (long long)pc->h,
             (long long)pc->w, (long long)pc->c, d->window[0], d->window[1], d->stride[0],
             d->stride[1], d->pad[0], d->pad[1], ties ? " (ties)" : "");
    /* Max is exact; an average is an exact sum divided by the window's area, rounded. */
    if (d->max)
        mp_gpu_check_bits(&y, "%s: forward", what);
    else
        mp_gpu_check(&y, 0, mp_gpu_rtol(dt), "%s: forward", what);
    mp_gpu_upload(&y);
    assert_int_equal(cpu->pool_backward(d, &x.host, &y.host, &dy.host, &dx.host), MP_OK);
    assert_int_equal(gpu->pool_backward(d, &x.dev, &y.dev, &dy.dev, &dx.dev), MP_OK);
    /* dx sums, in FP32, one term per window holding the element: dy (max) or dy / area. */
    int64_t wins = ((d->window[0] + d->stride[0] - 1) / d->stride[0]) *
                   ((d->window[1] + d->stride[1] - 1) / d->stride[1]);
    double mag = d->max ? 1.0 : 1.0 / (double)(d->window[0] * d->window[1]);
    mp_gpu_check(&dx, mp_gpu_atol(wins, mag), mp_gpu_rtol(dt), "%s: backward", what);
    mp_gpu_pair *all[] = {&x, &dy, &y, &dx};
    for (int i = 0; i < 4; i++)
        mp_gpu_pair_free(all[i]);
}

static void test_pool(void **state)
{
    (void)state;
    const int ncases = (int)(sizeof pool_cases / sizeof pool_cases[0]);
    uint64_t seed = 0;
    for (int i = 0; i < ncases; i++)
        for (int k = 0; k < MP_GPU_NDTYPES; k++) {
            check_pool(&pool_cases[i], mp_gpu_dtypes[k], false, seed++);
            if (pool_cases[i].d.max)
                check_pool(&pool_cases[i], mp_gpu_dtypes[k], true, seed++);
        }
}

int main(void)
{
    gpu = mp_gpu_or_skip();
    cpu = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
