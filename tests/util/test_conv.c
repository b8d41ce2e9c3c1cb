/* The convolution tests' shared cases and references (tests/util/test_conv.h). */
#include "tests/util/test_conv.h"

#include <stdlib.h>

#include "tests/util/test_util.h"

const mp_test_conv_case mp_test_conv_cases[MP_TEST_CONV_NCASES] = {
    {2, 5, 5, 3, 4, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true, 3, 3},
    {2, 6, 5, 2, 3, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true, 3, 3},
    {1, 5, 6, 2, 2, {2, 3}, {2, 1}, {2, 1}, {1, 1}, 1, false, 4, 6},
    {1, 7, 7, 2, 2, {3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true, 7, 7},
    {2, 5, 5, 4, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true, 5, 5},
    {1, 5, 5, 3, 6, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 3, true, 3, 3},
    {2, 4, 3, 4, 6, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 2, true, 4, 3},
    {1, 1, 1, 1, 1, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false, 1, 1},
    {2, 3, 3, 2, 2, {1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false, 2, 2},
    {1, 2, 2, 1, 2, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, 2, 2},
    {1, 4, 5, 2, 2, {3, 1}, {1, 2}, {0, 2}, {1, 2}, 1, true, 2, 5},
    {2, 4, 4, 3, 3, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 3, true, 3, 3},
    {2, 5, 3, 2, 3, {1, 1}, {2, 1}, {0, 0}, {1, 1}, 1, true, 3, 3},
    {1, 3, 4, 4, 2, {1, 1}, {1, 1}, {1, 0}, {1, 1}, 2, false, 5, 4},
};

mp_conv_desc mp_test_conv_desc(const mp_test_conv_case *cc)
{
    mp_conv_desc d = {{cc->stride[0], cc->stride[1]},
                      {cc->pad[0], cc->pad[1]},
                      {cc->dilation[0], cc->dilation[1]},
                      cc->groups};
    return d;
}

/* Case cc's image (N, H, W, C), filter (K, R, S, C/G) and output (N, P, Q, K) shapes. */
void mp_test_conv_shapes(const mp_test_conv_case *cc, int64_t xs[4], int64_t ws[4], int64_t ys[4])
{
    const int64_t shapes[3][4] = {{cc->n, cc->h, cc->w, cc->c},
                                  {cc->k, cc->kernel[0], cc->kernel[1], cc->c / cc->groups},
                                  {cc->n, cc->p, cc->q, cc->k}};
    for (int i = 0; i < 4; i++)
        xs[i] = shapes[0][i], ws[i] = shapes[1][i], ys[i] = shapes[2][i];
}

/* Case cc's x, w, y (or dy), dw and dx in dtypes dt, uninitialised and counted as data, so that
 * they are not mistaken for the ops' workspace. */
void mp_test_conv_tensors(const mp_test_conv_case *cc, const mp_dtype dt[5], mp_tensor t[5])
{
    int64_t xs[4], ws[4], ys[4];
    mp_test_conv_shapes(cc, xs, ws, ys);
    const int64_t *shape[5] = {xs, ws, ys, ws, xs};
    for (int i = 0; i < 5; i++)
        t[i] = mp_tensor_alloc(dt[i], 4, shape[i], MP_MEM_DATA);
}

/* The direct definition: y = conv(x, w) + b, dx = sum over outputs of dy * w, dw = sum of
 * dy * x, in FP64 over NHWC/KRSC arrays. Any of b, dy, y, dx, dw may be NULL; dx and dw are
 * accumulated into (pass zeroed arrays). */
void mp_test_conv_ref(const mp_test_conv_case *cc, const double *x, const double *w, const double *b,
                     const double *dy, double *y, double *dx, double *dw)
{
    int64_t cg = cc->c / cc->groups, kg = cc->k / cc->groups;
    int64_t R = cc->kernel[0], S = cc->kernel[1];
    for (int64_t n = 0; n < cc->n; n++)
        for (int64_t p = 0; p < cc->p; p++)
            for (int64_t q = 0; q < cc->q; q++)
                for (int64_t k = 0; k < cc->k; k++) {
                    int64_t yi = ((n * cc->p + p) * cc->q + q) * cc->k + k, g = k / kg;
                    double acc = b ? b[k] : 0.0, g_out = dy ? dy[yi] : 0.0;
                    for (int64_t r = 0; r < R; r++)
                        for (int64_t s = 0; s < S; s++) {
                            int64_t hh = p * cc->stride[0] - cc->pad[0] + r * cc->dilation[0];
                            int64_t ww = q * cc->stride[1] - cc->pad[1] + s * cc->dilation[1];
                            if (hh < 0 || hh >= cc->h || ww < 0 || ww >= cc->w)
                                continue;
                            for (int64_t c = 0; c < cg; c++) {
                                int64_t xi = ((n * cc->h + hh) * cc->w + ww) * cc->c + g * cg + c;
                                int64_t wi = ((k * R + r) * S + s) * cg + c;
                                acc += x[xi] * w[wi];
                                if (dx)
                                    dx[xi] += g_out * w[wi];
                                if (dw)
                                    dw[wi] += g_out * x[xi];
                            }
                        }
                    if (y)
                        y[yi] = acc;
                }
}

/* A tensor of dtype dt with random values in [-1, 1), and its exact FP64 copy. */
void mp_test_random_pair(mp_dtype dt, const int64_t *shape, mp_rng *r, mp_tensor *t,
                        mp_tensor *t64c)
{
    *t = mp_tensor_alloc(dt, 4, shape, MP_MEM_WORKSPACE);
    *t64c = mp_tensor_alloc(MP_F64, 4, shape, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(t); i++) {
        mp_store(t->data, dt, (size_t)i, 2 * mp_rng_uniform(r) - 1);
        ((double *)t64c->data)[i] = mp_load(t->data, dt, (size_t)i);
    }
}

void mp_test_check_dtype(const mp_tensor *t, const mp_tensor *ref, int64_t k)
{
    int64_t n = mp_tensor_numel(t);
    double *got = calloc((size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++)
        got[i] = mp_load(t->data, t->dtype, (size_t)i);
    /* FP32 accumulation over k terms of size <= 1, then one rounding to t's dtype. */
    assert_close(got, (double *)ref->data, (size_t)n, (double)k * 4 * 0x1p-24, mp_test_eps(t->dtype));
    free(got);
}

