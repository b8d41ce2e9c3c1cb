/* The conv2d layer and the CPU backend's convolution ops: FP64 finite-difference checks of
 * dx, dweight and dbias through the layer over strides, padding, dilation, groups, depthwise,
 * 1x1 and non-square kernels; all three ops against a direct convolution (tests/util/test_conv.c;
 * also on a shape large enough to be split into several im2col chunks); an empty batch; shape
 * and setting errors. Stored dtypes, the fused backward and the half chunks:
 * test_conv2d_storage.c. */
#include "tests/util/test_util.h"
#include "tests/util/test_fd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/layer.h"
#include "engine/rng.h"
#include "tests/util/test_conv.h"

#define EPS 1e-6
#define RTOL 1e-6
#define ATOL 1e-8

static const mp_ops *ops;

static mp_tensor t64(int ndim, const int64_t *shape, mp_rng *r)
{
    mp_tensor t = mp_tensor_alloc(MP_F64, ndim, shape, MP_MEM_WORKSPACE);
    double *d = t.data;
    for (int64_t i = 0; r && i < mp_tensor_numel(&t); i++)
        d[i] = 2 * mp_rng_uniform(r) - 1;
    return t;
}

static double *zeros(int64_t n) { return calloc((size_t)n, sizeof(double)); }

static void init_layer(mp_layer *l, const mp_test_conv_case *cc)
{
    int64_t in[3] = {cc->h, cc->w, cc->c};
    mp_conv_desc d = mp_test_conv_desc(cc);
    assert_int_equal(mp_layer_conv2d_init(l, ops, "conv", in, cc->k, cc->kernel, &d, cc->bias),
                     MP_OK);
    assert_int_equal(l->out_shape[0], cc->p);
    assert_int_equal(l->out_shape[1], cc->q);
    assert_int_equal(l->out_shape[2], cc->k);
}

/* Forward against ref_conv, then dx, dweight and dbias against central differences. */
static void gradcheck_case(const mp_test_conv_case *cc, uint64_t seed)
{
    mp_layer l;
    init_layer(&l, cc);
    mp_rng rng;
    mp_rng_seed(&rng, 41, seed);
    for (int j = 0; j < l.nparams; j++) {
        l.w[j] = t64(l.param_ndim[j], l.param_shape[j], &rng);
        l.dw[j] = t64(l.param_ndim[j], l.param_shape[j], NULL);
    }
    int64_t xs[4] = {cc->n, cc->h, cc->w, cc->c}, ys[4] = {cc->n, cc->p, cc->q, cc->k};
    mp_tensor x = t64(4, xs, &rng), y = t64(4, ys, NULL), r = t64(4, ys, &rng);
    mp_tensor dx = t64(4, xs, NULL);
    mp_test_layer_loss(&l, &x, &y, &r);
    double *want = zeros(mp_tensor_numel(&y));
    mp_test_conv_ref(cc, x.data, l.w[0].data, cc->bias ? l.w[1].data : NULL, NULL, want, NULL, NULL);
    assert_close((double *)y.data, want, (size_t)mp_tensor_numel(&y), 1e-13, 1e-13);
    free(want);

    assert_int_equal(l.cls->backward(&l, &x, &y, &r, &dx), MP_OK);
    mp_test_layer_fd_check(&l, &x, &y, &r, &x, &dx, EPS, ATOL, RTOL);
    for (int j = 0; j < l.nparams; j++)
        mp_test_layer_fd_check(&l, &x, &y, &r, &l.w[j], &l.dw[j], EPS, ATOL, RTOL);
    mp_tensor *all[] = {&x, &y, &r, &dx};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
    for (int j = 0; j < l.nparams; j++) {
        mp_tensor_free(&l.w[j]);
        mp_tensor_free(&l.dw[j]);
    }
}

static void test_gradcheck_all_cases(void **state)
{
    (void)state;
    for (int i = 0; i < MP_TEST_CONV_NCASES; i++)
        gradcheck_case(&mp_test_conv_cases[i], (uint64_t)i);
}

static void test_layer_params(void **state)
{
    (void)state;
    mp_layer l;
    init_layer(&l, &mp_test_conv_cases[5]); /* 3 channels, groups 3, 6 outputs, 3x3, bias */
    assert_string_equal(l.cls->type, "conv2d");
    assert_int_equal(l.nparams, 2);
    assert_string_equal(l.param_suffix[0], "weight");
    assert_int_equal(l.param_ndim[0], 4);
    int64_t wshape[4] = {6, 3, 3, 1};
    for (int d = 0; d < 4; d++)
        assert_int_equal(l.param_shape[0][d], wshape[d]);
    assert_string_equal(l.param_suffix[1], "bias");
    assert_int_equal(l.param_ndim[1], 1);
    assert_int_equal(l.param_shape[1][0], 6);
    assert_int_equal(l.param_init[0], MP_INIT_UNIFORM);
    assert_int_equal(l.param_init[1], MP_INIT_UNIFORM);
    assert_true(l.fan_in == 9.0);
    init_layer(&l, &mp_test_conv_cases[4]); /* 4 channels in 2 groups, 3x3 */
    assert_true(l.fan_in == 18.0);
    assert_int_equal(l.param_shape[0][3], 2);
    init_layer(&l, &mp_test_conv_cases[2]); /* no bias */
    assert_int_equal(l.nparams, 1);
    assert_int_equal(l.param_shape[0][1], 2);
    assert_int_equal(l.param_shape[0][2], 3);
}

/* The layer accepts flattened (N, H * W * C) tensors as the model may pass them. */
static void test_layer_flat_tensors(void **state)
{
    (void)state;
    const mp_test_conv_case *cc = &mp_test_conv_cases[1];
    mp_layer l;
    init_layer(&l, cc);
    mp_rng rng;
    mp_rng_seed(&rng, 43, 0);
    l.w[0] = t64(4, l.param_shape[0], &rng);
    l.w[1] = t64(1, l.param_shape[1], &rng);
    int64_t xs[2] = {cc->n, cc->h * cc->w * cc->c}, ys[2] = {cc->n, cc->p * cc->q * cc->k};
    mp_tensor x = t64(2, xs, &rng), y = t64(2, ys, NULL);
    assert_int_equal(l.cls->forward(&l, &x, &y, false), MP_OK);
    double want[2 * 3 * 3 * 3];
    mp_test_conv_ref(cc, x.data, l.w[0].data, l.w[1].data, NULL, want, NULL, NULL);
    assert_close((double *)y.data, want, 54, 1e-13, 1e-13);
    mp_tensor_free(&y);
    int64_t bad[2] = {cc->n, cc->p * cc->q * cc->k + 1};
    y = t64(2, bad, NULL);
    assert_int_equal(l.cls->forward(&l, &x, &y, false), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "layer conv"));
    mp_tensor *all[] = {&x, &y, &l.w[0], &l.w[1]};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

/* A shape whose patch matrix exceeds the im2col chunk, so every op runs over several chunks
 * (backward filter accumulates across them), against the direct definition in FP64 and FP32. */
static void test_chunked_against_direct(void **state)
{
    (void)state;
    const mp_test_conv_case cc = {3, 32, 32, 64, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false, 32, 32};
    mp_conv_desc d = mp_test_conv_desc(&cc);
    int64_t xs[4], ws[4], ys[4];
    mp_test_conv_shapes(&cc, xs, ws, ys);
    mp_dtype dts[] = {MP_F64, MP_F32};
    for (int di = 0; di < 2; di++) {
        mp_rng rng;
        mp_rng_seed(&rng, 53, (uint64_t)di);
        mp_tensor x, x64, w, w64, dy, dy64;
        mp_test_random_pair(dts[di], xs, &rng, &x, &x64);
        mp_test_random_pair(dts[di], ws, &rng, &w, &w64);
        mp_test_random_pair(dts[di], ys, &rng, &dy, &dy64);
        mp_tensor y = mp_tensor_alloc(dts[di], 4, ys, MP_MEM_WORKSPACE);
        mp_tensor dx = mp_tensor_alloc(dts[di], 4, xs, MP_MEM_WORKSPACE);
        mp_tensor dw = mp_tensor_alloc(dts[di], 4, ws, MP_MEM_WORKSPACE);
        assert_int_equal(ops->conv2d_forward(&d, &x, &w, &y), MP_OK);
        assert_int_equal(ops->conv2d_backward_data(&d, &dy, &w, &dx), MP_OK);
        assert_int_equal(ops->conv2d_backward_filter(&d, &x, &dy, &dw), MP_OK);
        mp_tensor ry = mp_tensor_alloc(MP_F64, 4, ys, MP_MEM_WORKSPACE);
        mp_tensor rdx = mp_tensor_alloc(MP_F64, 4, xs, MP_MEM_WORKSPACE);
        mp_tensor rdw = mp_tensor_alloc(MP_F64, 4, ws, MP_MEM_WORKSPACE);
        mp_test_conv_ref(&cc, x64.data, w64.data, NULL, dy64.data, ry.data, rdx.data, rdw.data);
        if (dts[di] == MP_F64) {
            assert_close((double *)y.data, (double *)ry.data, (size_t)mp_tensor_numel(&y),
                         1e-12, 1e-12);
            assert_close((double *)dx.data, (double *)rdx.data, (size_t)mp_tensor_numel(&dx),
                         1e-12, 1e-12);
            assert_close((double *)dw.data, (double *)rdw.data, (size_t)mp_tensor_numel(&dw),
                         1e-10, 1e-12);
        } else {
            mp_test_check_dtype(&y, &ry, 9 * cc.c);
            mp_test_check_dtype(&dx, &rdx, 9 * cc.k);
            mp_test_check_dtype(&dw, &rdw, cc.n * cc.p * cc.q);
        }
        mp_tensor *all[] = {&x, &x64, &w, &w64, &dy, &dy64, &y, &dx, &dw, &ry, &rdx, &rdw};
        for (int i = 0; i < 12; i++)
            mp_tensor_free(all[i]);
    }
}

/* An empty batch: nothing to compute, and the filter gradient is zero. */
static void test_empty_batch(void **state)
{
    (void)state;
    mp_conv_desc d = {{1, 1}, {1, 1}, {1, 1}, 1};
    float x[1], y[1], w[2 * 3 * 3 * 2];
    for (int i = 0; i < 36; i++)
        w[i] = 1.0f;
    int64_t xs[4] = {0, 4, 4, 2}, ys[4] = {0, 4, 4, 2}, ws[4] = {2, 3, 3, 2};
    mp_tensor tx = mp_tensor_view(x, MP_F32, 4, xs), ty = mp_tensor_view(y, MP_F32, 4, ys);
    mp_tensor tw = mp_tensor_view(w, MP_F32, 4, ws);
    assert_int_equal(ops->conv2d_forward(&d, &tx, &tw, &ty), MP_OK);
    assert_int_equal(ops->conv2d_backward_data(&d, &ty, &tw, &tx), MP_OK);
    assert_int_equal(ops->conv2d_backward_filter(&d, &tx, &ty, &tw), MP_OK);
    for (int i = 0; i < 36; i++)
        assert_true(w[i] == 0.0f);
    for (int i = 0; i < 36; i++)
        w[i] = 1.0f;
    float dw[36];
    mp_tensor tdw = mp_tensor_view(dw, MP_F32, 4, ws);
    memset(dw, 0xff, sizeof dw);
    assert_int_equal(ops->conv2d_backward(&d, &tx, &tw, &ty, &tdw, &tx), MP_OK);
    for (int i = 0; i < 36; i++)
        assert_true(dw[i] == 0.0f);
}

/* One op call on views of a scratch buffer with the given shapes; returns its status. */
static mp_status op_with(int op, const mp_conv_desc *d, const int64_t *xs, const int64_t *ws,
                         const int64_t *ys, mp_dtype xdt)
{
    static double buf[5][4096];
    mp_tensor x = mp_tensor_view(buf[0], xdt, 4, xs);
    mp_tensor w = mp_tensor_view(buf[1], MP_F32, 4, ws);
    mp_tensor y = mp_tensor_view(buf[2], MP_F32, 4, ys);
    mp_tensor dx = mp_tensor_view(buf[3], xdt, 4, xs);
    mp_tensor dw = mp_tensor_view(buf[4], MP_F32, 4, ws);
    mp_error_clear();
    if (op == 0)
        return ops->conv2d_forward(d, &x, &w, &y);
    if (op == 1)
        return ops->conv2d_backward_data(d, &y, &w, &x);
    if (op == 2)
        return ops->conv2d_backward_filter(d, &x, &y, &w);
    return ops->conv2d_backward(d, &x, &w, &y, &dw, &dx);
}

static void test_op_shape_errors(void **state)
{
    (void)state;
    /* The message names the op exactly (conv2d_backward is a prefix of the other two). */
    static const char *const names[4] = {"conv2d_forward:", "conv2d_backward_data:",
                                         "conv2d_backward_filter:", "conv2d_backward:"};
    mp_conv_desc d = {{2, 2}, {1, 1}, {1, 1}, 2};
    /* x (2, 6, 5, 4), w (6, 3, 3, 2), y (2, 3, 3, 6): valid. */
    int64_t xs[4] = {2, 6, 5, 4}, ws[4] = {6, 3, 3, 2}, ys[4] = {2, 3, 3, 6};
    for (int op = 0; op < 4; op++) {
        assert_int_equal(op_with(op, &d, xs, ws, ys, MP_F32), MP_OK);
        int64_t bad_p[4] = {2, 4, 3, 6}, bad_q[4] = {2, 3, 2, 6}, bad_k[4] = {2, 3, 3, 4};
        int64_t bad_n[4] = {1, 3, 3, 6}, bad_wc[4] = {6, 3, 3, 4}, bad_kg[4] = {5, 3, 3, 2};
        int64_t bad_c[4] = {2, 6, 5, 3};
        struct {
            const int64_t *x, *w, *y;
        } bad[] = {{xs, ws, bad_p}, {xs, ws, bad_q}, {xs, ws, bad_k},  {xs, ws, bad_n},
                   {xs, bad_wc, ys}, {xs, bad_kg, ys}, {bad_c, ws, ys}};
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            assert_int_equal(op_with(op, &d, bad[b].x, bad[b].w, bad[b].y, MP_F32),
                             MP_EINTERNAL);
            assert_non_null(strstr(mp_error_message(), names[op]));
        }
        /* FP64 does not mix with other dtypes. */
        assert_int_equal(op_with(op, &d, xs, ws, ys, MP_F64), MP_EINTERNAL);
        assert_non_null(strstr(mp_error_message(), names[op]));
        mp_conv_desc dd = d;
        dd.groups = 0;
        assert_int_equal(op_with(op, &dd, xs, ws, ys, MP_F32), MP_EINTERNAL);
        dd = d;
        dd.stride[1] = 0;
        assert_int_equal(op_with(op, &dd, xs, ws, ys, MP_F32), MP_EINTERNAL);
        dd = d;
        dd.dilation[0] = 0;
        assert_int_equal(op_with(op, &dd, xs, ws, ys, MP_F32), MP_EINTERNAL);
        dd = d;
        dd.pad[0] = -1;
        assert_int_equal(op_with(op, &dd, xs, ws, ys, MP_F32), MP_EINTERNAL);
        /* A kernel wider than the padded input: C division would say Q = 1 for -1 / 2 + 1. */
        int64_t xn[4] = {2, 6, 1, 4}, wn[4] = {6, 3, 4, 2}, yn[4] = {2, 3, 1, 6};
        dd = d;
        dd.pad[1] = 1;
        assert_int_equal(op_with(op, &dd, xn, wn, yn, MP_F32), MP_EINTERNAL);
        assert_non_null(strstr(mp_error_message(), names[op]));
    }
}

static mp_status init_with(int kh, int kw, int64_t out, int stride, int dil, int pad, int groups,
                           const int64_t in[3])
{
    mp_layer l;
    int kernel[2] = {kh, kw};
    mp_conv_desc d = {{stride, stride}, {pad, pad}, {dil, dil}, groups};
    mp_error_clear();
    return mp_layer_conv2d_init(&l, ops, "features.3", in, out, kernel, &d, true);
}

static void test_layer_init_errors(void **state)
{
    (void)state;
    int64_t in[3] = {5, 5, 6};
    assert_int_equal(init_with(3, 3, 4, 1, 1, 0, 2, in), MP_OK);
    struct {
        int kh, kw;
        int64_t out;
        int stride, dil, pad, groups;
        const char *what;
    } bad[] = {
        {3, 3, 4, 1, 1, 0, 4, "groups"},   /* 6 channels, groups 4 */
        {3, 3, 3, 1, 1, 0, 2, "groups"},   /* 3 outputs, groups 2 */
        {3, 3, 4, 1, 1, 0, 0, "groups"},
        {7, 3, 4, 1, 1, 0, 1, "empty"},    /* 7 > 5 without padding */
        {3, 3, 4, 1, 3, 0, 1, "empty"},    /* dilated extent 7 > 5 */
        {0, 3, 4, 1, 1, 0, 1, "kernel"},
        {3, -1, 4, 1, 1, 0, 1, "kernel"},
        {3, 3, 0, 1, 1, 0, 1, "out"},
        {3, 3, 4, 0, 1, 0, 1, "stride"},
        {3, 3, 4, 1, 0, 0, 1, "dilation"},
        {3, 3, 4, 1, 1, -1, 1, "padding"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(init_with(bad[i].kh, bad[i].kw, bad[i].out, bad[i].stride, bad[i].dil,
                                   bad[i].pad, bad[i].groups, in),
                         MP_EUSAGE);
        assert_non_null(strstr(mp_error_message(), "features.3"));
        assert_non_null(strstr(mp_error_message(), bad[i].what));
    }
    /* Padding makes the same kernel fit. */
    assert_int_equal(init_with(7, 3, 4, 1, 1, 1, 1, in), MP_OK);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck_all_cases),
        cmocka_unit_test(test_layer_params),
        cmocka_unit_test(test_layer_flat_tensors),
        cmocka_unit_test(test_chunked_against_direct),
        cmocka_unit_test(test_empty_batch),
        cmocka_unit_test(test_op_shape_errors),
        cmocka_unit_test(test_layer_init_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
