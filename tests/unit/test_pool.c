/* Pooling: forward against a naive reference that walks every window position (padding
 * included) for max and average pooling in every dtype, backward bitwise as pool.c pins its
 * rounding (an FP32 sum per input element in window order, rounded once), FP64 finite-difference checks of the
 * layers' backward (average with padding, global average, max on inputs kept away from ties),
 * first-maximum routing on ties checked exactly, NaN propagation, and the layers' output shapes
 * and errors. */
#include "tests/util/test_util.h"
#include "tests/util/test_fd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/layer.h"
#include "engine/rng.h"

#define EPS 1e-6
#define RTOL 1e-6
#define ATOL 1e-9

static const mp_ops *ops;

static mp_pool_desc desc(int kh, int kw, int sh, int sw, int ph, int pw, bool max)
{
    mp_pool_desc d;
    memset(&d, 0, sizeof d);
    d.window[0] = kh;
    d.window[1] = kw;
    d.stride[0] = sh;
    d.stride[1] = sw;
    d.pad[0] = ph;
    d.pad[1] = pw;
    d.max = max;
    return d;
}

/* y (N, P, Q, C) from x (N, H, W, C) by visiting all kh * kw positions of each window: max over
 * those inside the image (first maximum, its flat index into *arg), average over the full
 * window with the padded positions counted as zeros. */
static void naive_pool(const mp_pool_desc *d, const double *x, int64_t N, int64_t H, int64_t W,
                       int64_t C, int64_t P, int64_t Q, double *y, int64_t *arg)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t q = 0; q < Q; q++)
                for (int64_t c = 0; c < C; c++) {
                    double acc = d->max ? -INFINITY : 0;
                    int64_t best = -1;
                    for (int r = 0; r < d->window[0]; r++)
                        for (int s = 0; s < d->window[1]; s++) {
                            int64_t h = p * d->stride[0] - d->pad[0] + r;
                            int64_t w = q * d->stride[1] - d->pad[1] + s;
                            if (h < 0 || h >= H || w < 0 || w >= W)
                                continue;
                            int64_t i = ((n * H + h) * W + w) * C + c;
                            if (!d->max)
                                acc += x[i];
                            else if (best < 0 || x[i] > acc) {
                                acc = x[i];
                                best = i;
                            }
                        }
                    int64_t o = ((n * P + p) * Q + q) * C + c;
                    y[o] = d->max ? acc : acc / (d->window[0] * d->window[1]);
                    if (arg)
                        arg[o] = best;
                }
}

/* dx of the naive pooling: each dy scattered to its window's first maximum or spread evenly. */
static void naive_pool_backward(const mp_pool_desc *d, const double *x, const double *dy,
                                int64_t N, int64_t H, int64_t W, int64_t C, int64_t P, int64_t Q,
                                double *dx)
{
    static double y[4096];
    static int64_t arg[4096];
    assert_true(N * P * Q * C <= 4096);
    naive_pool(d, x, N, H, W, C, P, Q, y, arg);
    memset(dx, 0, (size_t)(N * H * W * C) * sizeof *dx);
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t q = 0; q < Q; q++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t o = ((n * P + p) * Q + q) * C + c;
                    if (d->max) {
                        dx[arg[o]] += dy[o];
                        continue;
                    }
                    for (int r = 0; r < d->window[0]; r++)
                        for (int s = 0; s < d->window[1]; s++) {
                            int64_t h = p * d->stride[0] - d->pad[0] + r;
                            int64_t w = q * d->stride[1] - d->pad[1] + s;
                            if (h >= 0 && h < H && w >= 0 && w < W)
                                dx[((n * H + h) * W + w) * C + c] +=
                                    dy[o] / (d->window[0] * d->window[1]);
                        }
                }
}

/* dx as the CPU backend rounds it (engine/backend_cpu/pool.c): for each input element, the sum in
 * the accumulator type (FP64 for FP64, else FP32) of the dy of every window that routes to it
 * (its first maximum, or every element of the window when averaging), the windows taken in
 * row-major order, divided by the area when averaging, then rounded once to dt. dy holds values
 * of dt. */
static void pinned_backward(const mp_pool_desc *d, const double *x, const double *dy, int64_t N,
                            int64_t H, int64_t W, int64_t C, int64_t P, int64_t Q, mp_dtype dt,
                            double *dx)
{
    static double y[4096];
    static int64_t arg[4096];
    naive_pool(d, x, N, H, W, C, P, Q, y, arg);
    double area = (double)(d->window[0] * d->window[1]);
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t i = ((n * H + h) * W + w) * C + c;
                    float acc32 = 0;
                    double acc64 = 0;
                    for (int64_t p = 0; p < P; p++)
                        for (int64_t q = 0; q < Q; q++) {
                            int64_t h0 = p * d->stride[0] - d->pad[0];
                            int64_t w0 = q * d->stride[1] - d->pad[1];
                            int64_t o = ((n * P + p) * Q + q) * C + c;
                            bool in = h >= h0 && h < h0 + d->window[0] && w >= w0 &&
                                      w < w0 + d->window[1];
                            if (!in || (d->max && arg[o] != i))
                                continue;
                            acc32 += (float)dy[o];
                            acc64 += dy[o];
                        }
                    if (!d->max) {
                        acc32 /= (float)area;
                        acc64 /= area;
                    }
                    if (dt == MP_F64)
                        dx[i] = acc64;
                    else if (dt == MP_F32)
                        dx[i] = acc32;
                    else if (dt == MP_F16)
                        dx[i] = mp_f16_to_f32(mp_f32_to_f16(acc32));
                    else
                        dx[i] = mp_bf16_to_f32(mp_f32_to_bf16(acc32));
                }
}

/* A layer's forward and backward in dtype dt on the given FP64 values (exact in dt), read back
 * as FP64. */
static void run_layer(mp_layer *l, mp_dtype dt, int64_t n, const double *xv, const double *dyv,
                      double *yv, double *dxv)
{
    int64_t xs[4] = {n, l->in_shape[0], l->in_shape[1], l->in_shape[2]};
    int64_t ys[4] = {n, l->out_shape[0], l->out_shape[1], l->out_shape[2]};
    mp_tensor x = mp_tensor_alloc(dt, 4, xs, MP_MEM_WORKSPACE);
    mp_tensor dx = mp_tensor_alloc(dt, 4, xs, MP_MEM_WORKSPACE);
    mp_tensor y = mp_tensor_alloc(dt, 4, ys, MP_MEM_WORKSPACE);
    mp_tensor dy = mp_tensor_alloc(dt, 4, ys, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        mp_store(x.data, dt, (size_t)i, xv[i]);
    for (int64_t i = 0; i < mp_tensor_numel(&y); i++)
        mp_store(dy.data, dt, (size_t)i, dyv[i]);
    assert_int_equal(l->cls->forward(l, &x, &y, true), MP_OK);
    assert_int_equal(l->cls->backward(l, &x, &y, &dy, &dx), MP_OK);
    for (int64_t i = 0; i < mp_tensor_numel(&y); i++)
        yv[i] = mp_load(y.data, dt, (size_t)i);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        dxv[i] = mp_load(dx.data, dt, (size_t)i);
    mp_tensor *all[] = {&x, &dx, &y, &dy};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

/* Forward and backward of several descriptors against the naive reference, in every dtype.
 * x holds multiples of 1/16 in [-4, 4) (exact in every dtype, so the window sums are exact in
 * FP32); dy holds U(-1, 1) rounded to the dtype, whose sums over overlapping windows are not
 * representable in it: dx must be summed in FP32 and rounded once. */
static void test_against_naive(void **state)
{
    (void)state;
    static double xv[4096], dyv[4096], y[4096], dx[4096], ry[4096], rdx[4096], pdx[4096];
    struct {
        int64_t H, W, C;
        mp_pool_desc d;
    } cases[] = {
        {4, 4, 3, desc(2, 2, 2, 2, 0, 0, true)},
        {5, 6, 2, desc(3, 3, 2, 2, 1, 1, true)},  /* overlapping windows, padding */
        {5, 6, 2, desc(3, 3, 2, 2, 1, 1, false)},
        {7, 5, 3, desc(3, 2, 1, 2, 1, 0, false)}, /* non-square window and stride */
        {5, 5, 66, desc(2, 2, 2, 2, 1, 1, true)}, /* more channels than one block */
        {5, 5, 66, desc(3, 3, 3, 2, 0, 1, false)},
        {6, 6, 4, desc(3, 3, 1, 1, 1, 1, false)}, /* each input in up to 9 windows */
        {6, 6, 4, desc(3, 3, 1, 1, 1, 1, true)},
        {3, 4, 5, desc(3, 4, 1, 1, 0, 0, false)}, /* one window: global average */
    };
    const mp_dtype dts[] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    mp_rng r;
    mp_rng_seed(&r, 7, 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t in[3] = {cases[k].H, cases[k].W, cases[k].C}, n = 2;
        mp_layer l;
        assert_int_equal(mp_layer_pool_init(&l, ops, "pool", in, &cases[k].d), MP_OK);
        int64_t P = l.out_shape[0], Q = l.out_shape[1], C = in[2];
        int64_t nx = n * mp_shape_numel(in), ny = n * mp_shape_numel(l.out_shape);
        assert_true(nx <= 4096 && ny <= 4096);
        for (int64_t i = 0; i < nx; i++)
            xv[i] = floor(128 * mp_rng_uniform(&r) - 64) / 16;
        naive_pool(&cases[k].d, xv, n, in[0], in[1], C, P, Q, ry, NULL);
        for (int d = 0; d < 4; d++) {
            for (int64_t i = 0; i < ny; i++) {
                float v = (float)(2 * mp_rng_uniform(&r) - 1);
                dyv[i] = dts[d] == MP_F16    ? mp_f16_to_f32(mp_f32_to_f16(v))
                         : dts[d] == MP_BF16 ? mp_bf16_to_f32(mp_f32_to_bf16(v))
                                             : v;
            }
            naive_pool_backward(&cases[k].d, xv, dyv, n, in[0], in[1], C, P, Q, rdx);
            run_layer(&l, dts[d], n, xv, dyv, y, dx);
            /* Max pooling forward is exact; average is one rounding of an exact sum. dx sums
             * up to 9 terms of size < 1 in FP32 (the reference divides each dy by the area
             * before summing in FP64), then rounds once to the dtype. */
            double e = mp_test_eps(dts[d]) + 1e-15;
            if (cases[k].d.max)
                assert_close(y, ry, (size_t)ny, 0, 0);
            else
                assert_close(y, ry, (size_t)ny, 1e-12, e);
            assert_close(dx, rdx, (size_t)nx, dts[d] == MP_F64 ? 1e-15 : 16 * 0x1p-24, e);
            pinned_backward(&cases[k].d, xv, dyv, n, in[0], in[1], C, P, Q, dts[d], pdx);
            for (int64_t i = 0; i < nx; i++)
                if (memcmp(&dx[i], &pdx[i], sizeof dx[i]) != 0)
                    fail_msg("case %zu %s: dx[%lld] = %.17g, the pinned rounding gives %.17g", k,
                             mp_dtype_name(dts[d]), (long long)i, dx[i], pdx[i]);
        }
    }
}

/* Equal values: each window routes its gradient to its first (top-left valid) element. */
static void test_max_ties_route_to_first(void **state)
{
    (void)state;
    const int64_t H = 5, W = 5, C = 2;
    double xv[50], dyv[50], y[50], dx[50], want[50];
    int64_t in[3] = {H, W, C};
    mp_pool_desc cases[] = {desc(2, 2, 2, 2, 0, 0, true), desc(3, 3, 1, 1, 1, 1, true),
                            desc(3, 3, 2, 2, 1, 1, true)};
    for (size_t k = 0; k < 3; k++) {
        mp_layer l;
        assert_int_equal(mp_layer_pool_init(&l, ops, "pool", in, &cases[k]), MP_OK);
        int64_t P = l.out_shape[0], Q = l.out_shape[1];
        for (int i = 0; i < 50; i++) {
            xv[i] = 1.5;
            dyv[i] = (double)(i + 1); /* distinct integers: every sum is exact */
        }
        memset(want, 0, sizeof want);
        for (int64_t p = 0; p < P; p++)
            for (int64_t q = 0; q < Q; q++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t h = p * cases[k].stride[0] - cases[k].pad[0];
                    int64_t w = q * cases[k].stride[1] - cases[k].pad[1];
                    h = h < 0 ? 0 : h;
                    w = w < 0 ? 0 : w;
                    want[(h * W + w) * C + c] += dyv[(p * Q + q) * C + c];
                }
        run_layer(&l, MP_F64, 1, xv, dyv, y, dx);
        assert_close(dx, want, 50, 0, 0);
    }
    /* A window 3, 5, 5, 1: the first 5 (index 1) takes the gradient, not the second. */
    int64_t in2[3] = {1, 4, 1};
    mp_pool_desc d = desc(1, 4, 1, 1, 0, 0, true);
    mp_layer l;
    assert_int_equal(mp_layer_pool_init(&l, ops, "pool", in2, &d), MP_OK);
    double x2[4] = {3, 5, 5, 1}, dy2[1] = {2.5}, y2[1], dx2[4], want2[4] = {0, 2.5, 0, 0};
    const mp_dtype dts[] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    for (int k = 0; k < 4; k++) {
        run_layer(&l, dts[k], 1, x2, dy2, y2, dx2);
        assert_true(y2[0] == 5);
        assert_close(dx2, want2, 4, 0, 0);
    }
}

/* Windows that tile the input (2x2, stride 2: the one-pass backward) route as the scatter does,
 * in every dtype: equal values to the first; -0 before +0 to the -0; the first of two NaNs; the
 * first of two equal maxima; and a -0 gradient arrives as +0 (0 + dy), as everywhere else. The
 * 4x4 pattern fills every channel, and is repeated over larger images and batches: 1 channel;
 * 11 (the kernel's vector blocks and the channels left over); 16 (whole vectors); and 16 over
 * 32 images of 32x32, whose FP32 and FP64 dx (2 and 4 MiB) go by non-temporal stores. */
static void test_tiled_max_routing(void **state)
{
    (void)state;
    const double x1[16] = {1.5, 1.5, -0.0, 0.0, 1.5, 1.5, -1, -2, 1, NAN, 1, 3, NAN, 5, 3, 2};
    const double dy1[4] = {2.5, 4, 8, -0.0};
    double want1[16] = {0};
    want1[0] = 2.5; /* window (0,0): all equal, the first */
    want1[2] = 4;   /* window (0,1): -0 then +0, the first */
    want1[9] = 8;   /* window (1,0): the first NaN */
    const mp_dtype dts[] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    const int64_t cases[4][3] = {{1, 1, 1}, {1, 1, 11}, {1, 1, 16}, {32, 8, 16}}; /* N, tiles, C */
    for (int t = 0; t < 4; t++) {
        const int64_t N = cases[t][0], T = cases[t][1], C = cases[t][2], H = 4 * T;
        const int64_t nx = N * H * H * C, ny = nx / 4;
        int64_t in[3] = {H, H, C};
        mp_pool_desc d = desc(2, 2, 2, 2, 0, 0, true);
        mp_layer l;
        assert_int_equal(mp_layer_pool_init(&l, ops, "pool", in, &d), MP_OK);
        double *x = malloc((size_t)nx * sizeof *x), *want = malloc((size_t)nx * sizeof *want);
        double *dx = malloc((size_t)nx * sizeof *dx), *dy = malloc((size_t)ny * sizeof *dy);
        double *y = malloc((size_t)ny * sizeof *y);
        assert_true(x && want && dx && dy && y);
        for (int64_t i = 0; i < nx; i++) { /* (n, h, w, c): the pattern at (h % 4, w % 4) */
            const int64_t h = i / C / H % H, w = i / C % H;
            x[i] = x1[h % 4 * 4 + w % 4];
            want[i] = want1[h % 4 * 4 + w % 4];
        }
        for (int64_t i = 0; i < ny; i++) { /* (n, p, q, c): window (p % 2, q % 2) of a tile */
            const int64_t p = i / C / (H / 2) % (H / 2), q = i / C % (H / 2);
            dy[i] = dy1[p % 2 * 2 + q % 2];
        }
        for (int k = 0; k < 4; k++) {
            run_layer(&l, dts[k], N, x, dy, y, dx);
            for (int64_t i = 0; i < ny; i++) {
                const int64_t p = i / C / (H / 2) % (H / 2), q = i / C % (H / 2);
                assert_true(p % 2 != 1 || q % 2 != 0 || isnan(y[i]));
                assert_true(p % 2 != 1 || q % 2 != 1 || y[i] == 3);
            }
            for (int64_t i = 0; i < nx; i++) {
                const int64_t h = i / C / H % H, w = i / C % H;
                if (memcmp(&dx[i], &want[i], sizeof dx[i]) != 0)
                    fail_msg("%s, %lld x %lldx%lldx%lld: dx[%lld] = %g, want %g (window maxima "
                             "routed as the scatter does)",
                             mp_dtype_name(dts[k]), (long long)N, (long long)H, (long long)H,
                             (long long)C, (long long)i, dx[i], want[i]);
                if (h % 4 == 2 && w % 4 == 3)
                    assert_false(signbit(dx[i])); /* window (1,1): its first 3, dy -0: +0 */
            }
        }
        free(x);
        free(want);
        free(dx);
        free(dy);
        free(y);
    }
}

/* A NaN in a window makes the max NaN (as PyTorch), in any position of the window. */
static void test_max_propagates_nan(void **state)
{
    (void)state;
    int64_t in[3] = {2, 2, 1};
    mp_pool_desc d = desc(2, 2, 2, 2, 0, 0, true);
    mp_layer l;
    assert_int_equal(mp_layer_pool_init(&l, ops, "pool", in, &d), MP_OK);
    for (int pos = 0; pos < 4; pos++) {
        double xv[4] = {1, 2, 3, 4}, dy[1] = {1}, y[1], dx[4];
        xv[pos] = NAN;
        run_layer(&l, MP_F32, 1, xv, dy, y, dx);
        assert_true(isnan(y[0]));
        for (int i = 0; i < 4; i++)
            assert_true(dx[i] == (i == pos ? 1.0 : 0.0));
    }
}

/* x holds a random permutation of k / 16, k = 0 .. numel - 1 (distinct: no ties within
 * 1/16, far more than EPS) when distinct, else U(-1, 1). */
static void gradcheck(mp_layer *l, int64_t n, bool distinct, uint64_t seed)
{
    mp_rng rng;
    mp_rng_seed(&rng, seed, 0);
    int64_t xs[4] = {n, l->in_shape[0], l->in_shape[1], l->in_shape[2]};
    int64_t ys[4] = {n, l->out_shape[0], l->out_shape[1], l->out_shape[2]};
    mp_tensor x = mp_tensor_alloc(MP_F64, 4, xs, MP_MEM_WORKSPACE);
    mp_tensor dx = mp_tensor_alloc(MP_F64, 4, xs, MP_MEM_WORKSPACE);
    mp_tensor y = mp_tensor_alloc(MP_F64, 4, ys, MP_MEM_WORKSPACE);
    mp_tensor r = mp_tensor_alloc(MP_F64, 4, ys, MP_MEM_WORKSPACE);
    int64_t nx = mp_tensor_numel(&x);
    double *xv = x.data;
    assert_true(nx <= 256);
    for (int64_t i = 0; i < nx; i++)
        xv[i] = distinct ? (double)i / 16 : 2 * mp_rng_uniform(&rng) - 1;
    for (int64_t i = nx - 1; distinct && i > 0; i--) {
        int64_t j = (int64_t)mp_rng_below(&rng, (uint64_t)i + 1);
        double t = xv[i];
        xv[i] = xv[j];
        xv[j] = t;
    }
    for (int64_t i = 0; i < mp_tensor_numel(&r); i++)
        ((double *)r.data)[i] = 2 * mp_rng_uniform(&rng) - 1;
    mp_test_layer_loss(l, &x, &y, &r);
    assert_int_equal(l->cls->backward(l, &x, &y, &r, &dx), MP_OK);
    mp_test_layer_fd_check(l, &x, &y, &r, &x, &dx, EPS, ATOL, RTOL);
    mp_tensor *all[] = {&x, &dx, &y, &r};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

static void test_gradcheck_avg_padded(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {5, 4, 2};
    mp_pool_desc d = desc(3, 2, 2, 1, 1, 1, false);
    assert_int_equal(mp_layer_pool_init(&l, ops, "avg", in, &d), MP_OK);
    gradcheck(&l, 2, false, 1);
}

static void test_gradcheck_global_avg(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {3, 4, 5};
    assert_int_equal(mp_layer_global_avgpool_init(&l, ops, "gap", in), MP_OK);
    int64_t want[3] = {1, 1, 5};
    assert_memory_equal(l.out_shape, want, sizeof want);
    gradcheck(&l, 2, false, 2);
}

static void test_gradcheck_max(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {5, 5, 2};
    mp_pool_desc d = desc(3, 3, 2, 2, 1, 1, true);
    assert_int_equal(mp_layer_pool_init(&l, ops, "max", in, &d), MP_OK);
    gradcheck(&l, 2, true, 3);
    d = desc(2, 2, 2, 2, 0, 0, true);
    assert_int_equal(mp_layer_pool_init(&l, ops, "max", in, &d), MP_OK);
    gradcheck(&l, 2, true, 4);
}

static void test_layer_shapes_and_errors(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {7, 8, 3};
    mp_pool_desc d = desc(3, 3, 2, 2, 1, 1, true);
    assert_int_equal(mp_layer_pool_init(&l, NULL, "pool1", in, &d), MP_OK);
    int64_t want[3] = {4, 4, 3};
    assert_memory_equal(l.out_shape, want, sizeof want);
    assert_string_equal(l.cls->type, "maxpool");
    assert_int_equal(l.nparams, 0);
    d = desc(2, 3, 2, 3, 0, 0, false);
    assert_int_equal(mp_layer_pool_init(&l, NULL, "pool2", in, &d), MP_OK);
    int64_t want2[3] = {3, 2, 3};
    assert_memory_equal(l.out_shape, want2, sizeof want2);
    assert_string_equal(l.cls->type, "avgpool");

    mp_pool_desc bad[] = {
        desc(0, 2, 1, 1, 0, 0, true),  /* window < 1 */
        desc(2, 2, 1, 0, 0, 0, false), /* stride < 1 */
        desc(8, 2, 1, 1, 0, 0, true),  /* window taller than the input: empty output */
        desc(3, 3, 1, 1, 2, 0, true),  /* padding more than half the window */
        desc(2, 2, 1, 1, -1, 0, false),
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        mp_error_clear();
        assert_int_equal(mp_layer_pool_init(&l, NULL, "poolX", in, &bad[k]), MP_EUSAGE);
        assert_non_null(strstr(mp_error_message(), "poolX"));
    }
    /* The op itself rejects an output of the wrong shape. */
    double xv[4] = {0}, yv[4];
    int64_t xs[4] = {1, 2, 2, 1}, ys[4] = {1, 2, 1, 1};
    mp_tensor x = mp_tensor_view(xv, MP_F64, 4, xs), y = mp_tensor_view(yv, MP_F64, 4, ys);
    d = desc(2, 2, 2, 2, 0, 0, true);
    assert_int_equal(ops->pool_forward(&d, &x, &y), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "pool_forward"));
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_naive),
        cmocka_unit_test(test_max_ties_route_to_first),
        cmocka_unit_test(test_tiled_max_routing),
        cmocka_unit_test(test_max_propagates_nan),
        cmocka_unit_test(test_gradcheck_avg_padded),
        cmocka_unit_test(test_gradcheck_global_avg),
        cmocka_unit_test(test_gradcheck_max),
        cmocka_unit_test(test_layer_shapes_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
