/* What the convolution tests share (test_conv2d.c, test_conv2d_storage.c): the settings they
 * run, their shapes, a direct FP64 convolution, random tensors with exact FP64 copies, and the
 * tolerance of a stored result against FP64. */
#ifndef MP_TEST_CONV_H
#define MP_TEST_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/tensor.h"

/* One convolution setting with its output size worked out by hand. */
typedef struct mp_test_conv_case {
    int64_t n, h, w, c, k;
    int kernel[2], stride[2], pad[2], dilation[2], groups;
    bool bias;
    int64_t p, q;
} mp_test_conv_case;

/* The small settings every test runs: strides, padding, dilation, groups, depthwise, 1x1 and
 * non-square kernels. */
#define MP_TEST_CONV_NCASES 14
extern const mp_test_conv_case mp_test_conv_cases[MP_TEST_CONV_NCASES];

/* Case cc's stride, padding, dilation and groups. */
mp_conv_desc mp_test_conv_desc(const mp_test_conv_case *cc);

/* Case cc's image (N, H, W, C), filter (K, R, S, C/G) and output (N, P, Q, K) shapes. */
void mp_test_conv_shapes(const mp_test_conv_case *cc, int64_t xs[4], int64_t ws[4], int64_t ys[4]);

/* Case cc's x, w, y (or dy), dw and dx in dtypes dt, uninitialised and counted as data, so that
 * they are not mistaken for the ops' workspace. */
void mp_test_conv_tensors(const mp_test_conv_case *cc, const mp_dtype dt[5], mp_tensor t[5]);

/* The direct definition: y = conv(x, w) + b, dx = sum over outputs of dy * w, dw = sum of
 * dy * x, in FP64 over NHWC/KRSC arrays. Any of b, dy, y, dx, dw may be NULL; dx and dw are
 * accumulated into (pass zeroed arrays). */
void mp_test_conv_ref(const mp_test_conv_case *cc, const double *x, const double *w,
                      const double *b, const double *dy, double *y, double *dx, double *dw);

/* A 4-D tensor of dtype dt with random values in [-1, 1), and its exact FP64 copy (both counted
 * as workspace). */
void mp_test_random_pair(mp_dtype dt, const int64_t *shape, mp_rng *r, mp_tensor *t,
                         mp_tensor *t64c);

/* t against the FP64 ref within FP32 accumulation over k terms of size <= 1, then one rounding
 * to t's dtype. */
void mp_test_check_dtype(const mp_tensor *t, const mp_tensor *ref, int64_t k);

#endif
