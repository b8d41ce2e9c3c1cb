/* The CPU backend's convolution ops on stored dtypes: FP32, fp16, bf16 and mixed storage
 * against FP64 on the same rounded inputs with tolerances from each dtype's epsilon; the fused
 * backward against the two single ops, byte for byte; half tensors convolved a chunk of images
 * at a time against FP32 ops on their widened chunks, byte for byte; the workspace the
 * conversions take, counted and steady. Runs on oneDNN where it is built in and again on
 * im2col (test_conv2d_storage_im2col). */
#include "tests/util/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "tests/util/test_conv.h"

static const mp_ops *ops;

/* All three ops with x, w and the output side stored in xt, wt, yt against FP64 on the same
 * rounded values. */
static void check_dtypes(const mp_test_conv_case *cc, mp_dtype xt, mp_dtype wt, mp_dtype yt,
                         uint64_t seed)
{
    mp_rng rng;
    mp_rng_seed(&rng, 47, seed);
    mp_conv_desc d = mp_test_conv_desc(cc);
    int64_t xs[4], ws[4], ys[4];
    mp_test_conv_shapes(cc, xs, ws, ys);
    mp_tensor x, x64, w, w64, dy, dy64, y, y64, dx, dx64, dw, dw64;
    mp_test_random_pair(xt, xs, &rng, &x, &x64);
    mp_test_random_pair(wt, ws, &rng, &w, &w64);
    mp_test_random_pair(yt, ys, &rng, &dy, &dy64);
    mp_test_random_pair(yt, ys, &rng, &y, &y64);   /* outputs start as garbage: ops overwrite */
    mp_test_random_pair(xt, xs, &rng, &dx, &dx64);
    mp_test_random_pair(wt, ws, &rng, &dw, &dw64);
    assert_int_equal(ops->conv2d_forward(&d, &x, &w, &y), MP_OK);
    assert_int_equal(ops->conv2d_forward(&d, &x64, &w64, &y64), MP_OK);
    assert_int_equal(ops->conv2d_backward_data(&d, &dy, &w, &dx), MP_OK);
    assert_int_equal(ops->conv2d_backward_data(&d, &dy64, &w64, &dx64), MP_OK);
    assert_int_equal(ops->conv2d_backward_filter(&d, &x, &dy, &dw), MP_OK);
    assert_int_equal(ops->conv2d_backward_filter(&d, &x64, &dy64, &dw64), MP_OK);
    int64_t taps = cc->kernel[0] * cc->kernel[1];
    mp_test_check_dtype(&y, &y64, taps * (cc->c / cc->groups));
    mp_test_check_dtype(&dx, &dx64, taps * (cc->k / cc->groups));
    mp_test_check_dtype(&dw, &dw64, cc->n * cc->p * cc->q);
    mp_tensor *all[] = {&x, &x64, &w, &w64, &dy, &dy64, &y, &y64, &dx, &dx64, &dw, &dw64};
    for (int i = 0; i < 12; i++)
        mp_tensor_free(all[i]);
}

static void test_dtypes_against_fp64(void **state)
{
    (void)state;
    mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16};
    const int which[] = {0, 1, 3, 4, 5, 6, 10};
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < (int)(sizeof which / sizeof which[0]); i++)
            check_dtypes(&mp_test_conv_cases[which[i]], dts[d], dts[d], dts[d], (uint64_t)(d * 16 + i));
    /* Mixed storage (O1 casts on the fly): each tensor widened and rounded on its own. */
    check_dtypes(&mp_test_conv_cases[4], MP_BF16, MP_F32, MP_F16, 100);
    check_dtypes(&mp_test_conv_cases[1], MP_F32, MP_F16, MP_BF16, 101);
    check_dtypes(&mp_test_conv_cases[6], MP_F16, MP_BF16, MP_F32, 102);
}

/* conv2d_backward(x, w, dy) -> dw, dx against the two single ops on the same tensors, byte for
 * byte (the fused op converts dy once for both), and with dx NULL against the filter gradient
 * alone; dt: the dtypes of x, w, dy, dw and dx; outputs start as different garbage. */
static void check_fused(const mp_test_conv_case *cc, const mp_dtype dt[5], uint64_t seed)
{
    mp_rng rng;
    mp_rng_seed(&rng, 59, seed);
    mp_conv_desc d = mp_test_conv_desc(cc);
    int64_t xs[4], ws[4], ys[4];
    mp_test_conv_shapes(cc, xs, ws, ys);
    mp_tensor t[10], scratch; /* x, w, dy, then dw and dx of the single ops, fused, filter only */
    const int64_t *shapes[10] = {xs, ws, ys, ws, xs, ws, xs, ws, xs, ws};
    const int kind[10] = {0, 1, 2, 3, 4, 3, 4, 3, 4, 3};
    for (int i = 0; i < 10; i++) {
        mp_test_random_pair(dt[kind[i]], shapes[i], &rng, &t[i], &scratch);
        mp_tensor_free(&scratch);
    }
    assert_int_equal(ops->conv2d_backward_filter(&d, &t[0], &t[2], &t[3]), MP_OK);
    assert_int_equal(ops->conv2d_backward_data(&d, &t[2], &t[1], &t[4]), MP_OK);
    assert_int_equal(ops->conv2d_backward(&d, &t[0], &t[1], &t[2], &t[5], &t[6]), MP_OK);
    assert_int_equal(ops->conv2d_backward(&d, &t[0], NULL, &t[2], &t[7], NULL), MP_OK);
    assert_memory_equal(t[5].data, t[3].data, (size_t)mp_tensor_bytes(&t[3]));
    assert_memory_equal(t[6].data, t[4].data, (size_t)mp_tensor_bytes(&t[4]));
    assert_memory_equal(t[7].data, t[3].data, (size_t)mp_tensor_bytes(&t[3]));
    for (int i = 0; i < 10; i++)
        mp_tensor_free(&t[i]);
}

static void test_fused_backward_bitwise(void **state)
{
    (void)state;
    const mp_dtype dts[] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < MP_TEST_CONV_NCASES; i++) {
            const mp_dtype one[5] = {dts[k], dts[k], dts[k], dts[k], dts[k]};
            check_fused(&mp_test_conv_cases[i], one, (uint64_t)(k * 100 + i));
        }
    /* O1: half x, w and dy with an FP32 weight gradient, dx in FP32 or half; a free mix. */
    const mp_dtype o1[3][5] = {{MP_F16, MP_F16, MP_F16, MP_F32, MP_F32},
                               {MP_BF16, MP_BF16, MP_BF16, MP_F32, MP_BF16},
                               {MP_BF16, MP_F32, MP_F16, MP_F16, MP_F32}};
    for (int m = 0; m < 3; m++) {
        check_fused(&mp_test_conv_cases[4], o1[m], (uint64_t)(500 + m));
        check_fused(&mp_test_conv_cases[1], o1[m], (uint64_t)(510 + m));
    }
    /* Several im2col chunks. */
    const mp_test_conv_case big = {3, 32, 32, 64, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false, 32, 32};
    const mp_dtype half[5] = {MP_F16, MP_F16, MP_F16, MP_F16, MP_F16};
    const mp_dtype f32[5] = {MP_F32, MP_F32, MP_F32, MP_F32, MP_F32};
    check_fused(&big, half, 520);
    check_fused(&big, f32, 521);
    check_fused(&big, o1[0], 522);
    /* Half chunks (MP_CPU_CONV_HALF_CHUNK_BYTES): four of 16 images for both gradients and
     * for each alone, where the filter gradient's own x and dy would fit two (dropping dx from
     * the rule fails here); bf16's data gradient runs per chunk on oneDNN's bf16 kernels. The
     * data gradient alone takes the same chunks by construction (backward_chunk): oneDNN 2.6's
     * data gradients gave the same bits at 16 and 32 images, so this cannot show it. */
    const mp_test_conv_case chunky = {64, 32, 32, 16, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false, 32, 32};
    const mp_dtype bf16[5] = {MP_BF16, MP_BF16, MP_BF16, MP_BF16, MP_BF16};
    check_fused(&chunky, half, 523);
    check_fused(&chunky, bf16, 524);
    check_fused(&chunky, o1[1], 525);
}

/* With O1's dtypes (half x, w, dy; FP32 dw and dx) the single ops need dy's and x's working
 * copies (filter) or dy's and w's (data); both gradients at once must not hold more. The shape
 * is larger than any other here, so the single ops set the workspace this test compares with. */
static void test_fused_workspace_o1(void **state)
{
    (void)state;
    const mp_test_conv_case cc = {4, 48, 48, 32, 32, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false, 48, 48};
    mp_conv_desc d = mp_test_conv_desc(&cc);
    const mp_dtype dt[5] = {MP_F16, MP_F16, MP_F16, MP_F32, MP_F32};
    mp_tensor t[5];
    mp_test_conv_tensors(&cc, dt, t);
    mp_tensor *x = &t[0], *w = &t[1], *dy = &t[2], *dw = &t[3], *dx = &t[4];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ops->conv2d_backward_filter(&d, x, dy, dw), MP_OK);
        assert_int_equal(ops->conv2d_backward_data(&d, dy, w, dx), MP_OK);
    }
    int64_t held = mp_mem_current(MP_MEM_WORKSPACE);
    assert_int_equal(ops->conv2d_backward(&d, x, w, dy, dw, dx), MP_OK);
    assert_int_equal(mp_mem_current(MP_MEM_WORKSPACE), held);
    for (int i = 0; i < 5; i++)
        mp_tensor_free(&t[i]);
}

/* A copy of images n0 .. n0 + nb - 1 of t widened (exactly) to FP32. */
static mp_tensor widen_images(const mp_tensor *t, int64_t n0, int64_t nb)
{
    int64_t shape[4] = {nb, t->shape[1], t->shape[2], t->shape[3]};
    mp_tensor f = mp_tensor_alloc(MP_F32, 4, shape, MP_MEM_WORKSPACE);
    size_t per = (size_t)(mp_tensor_numel(t) / t->shape[0]);
    mp_convert(f.data, MP_F32, (const char *)t->data + per * (size_t)n0 * mp_dtype_size(t->dtype),
               t->dtype, per * (size_t)nb);
    return f;
}

/* Bytes nb images of t take in its dtype. */
static size_t images_bytes(const mp_tensor *t, int64_t nb)
{
    return (size_t)(mp_tensor_numel(t) / t->shape[0] * nb) * mp_dtype_size(t->dtype);
}

/* Half tensors that the ops widen go a chunk of images at a time. On a batch that the rule
 * cuts into two chunks of 20 images for every op here, byte for byte: each chunk's forward and
 * data gradient are those of FP32 ops on its widened images, rounded once (offsets and
 * rounding; the chunks' sizes show only where oneDNN's sums depend on the batch); the filter
 * gradient is the two chunks' FP32 filter gradients added in chunk order and rounded once
 * (this pins the chunks: 21 + 19 images fail) and within the FP64 tolerance; the fused
 * backward's filter gradient is the single op's. fp16 widens for all three ops. bf16 widens
 * for the filter gradient, and only that is checked here: its forward runs whole on oneDNN's
 * bf16 kernels where they exist, and its data gradient on them per chunk, which check_fused
 * compares with the data gradient alone. The two asserts on the budget make this fail, to be
 * re-derived, when MP_CPU_CONV_HALF_CHUNK_BYTES changes. */
static void test_half_chunks(void **state)
{
    (void)state;
    const mp_test_conv_case cc = {40, 32, 32, 16, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false, 32, 32};
    const int64_t image = 32 * 32 * 16 * (int64_t)sizeof(float), half_n = 20;
    assert_int_equal(MP_CPU_CONV_HALF_CHUNK_BYTES / (2 * image), 32); /* forward, data: 2 chunks */
    assert_int_equal(MP_CPU_CONV_HALF_CHUNK_BYTES / (3 * image), 21); /* backward: 2 chunks */
    mp_conv_desc d = mp_test_conv_desc(&cc);
    int64_t xs[4], ws[4], ys[4];
    mp_test_conv_shapes(&cc, xs, ws, ys);
    const mp_dtype dts[2] = {MP_F16, MP_BF16};
    for (int k = 0; k < 2; k++) {
        mp_dtype dt = dts[k];
        mp_rng rng;
        mp_rng_seed(&rng, 61, (uint64_t)k);
        mp_tensor x, x64, w, w64, dy, dy64, t[4], scratch; /* t: y, dx, dw, dw alone */
        mp_test_random_pair(dt, xs, &rng, &x, &x64);
        mp_test_random_pair(dt, ws, &rng, &w, &w64);
        mp_test_random_pair(dt, ys, &rng, &dy, &dy64);
        const int64_t *shapes[4] = {ys, xs, ws, ws};
        for (int i = 0; i < 4; i++) { /* outputs start as garbage: the ops overwrite them */
            mp_test_random_pair(dt, shapes[i], &rng, &t[i], &scratch);
            mp_tensor_free(&scratch);
        }
        mp_tensor *y = &t[0], *dx = &t[1], *dw = &t[2];
        assert_int_equal(ops->conv2d_forward(&d, &x, &w, y), MP_OK);
        assert_int_equal(ops->conv2d_backward_filter(&d, &x, &dy, &t[3]), MP_OK);
        assert_int_equal(ops->conv2d_backward(&d, &x, &w, &dy, dw, dx), MP_OK);
        assert_memory_equal(dw->data, t[3].data, (size_t)mp_tensor_bytes(dw));
        mp_tensor short_dx = *dx; /* one image short: refused before any chunk is written */
        short_dx.shape[0] = cc.n - 1;
        assert_int_equal(ops->conv2d_backward(&d, &x, &w, &dy, &t[3], &short_dx), MP_EINTERNAL);

        mp_tensor wf = widen_images(&w, 0, cc.k);
        mp_tensor sum = mp_tensor_alloc(MP_F32, 4, ws, MP_MEM_WORKSPACE);
        mp_tensor part = mp_tensor_alloc(MP_F32, 4, ws, MP_MEM_WORKSPACE);
        mp_tensor got = mp_tensor_alloc(dt, 4, xs, MP_MEM_WORKSPACE); /* the largest output */
        for (int64_t n0 = 0; n0 < cc.n; n0 += half_n) {
            mp_tensor xc = widen_images(&x, n0, half_n), dyc = widen_images(&dy, n0, half_n);
            mp_tensor yc = widen_images(y, n0, half_n), dxc = widen_images(dx, n0, half_n);
            assert_int_equal(ops->conv2d_forward(&d, &xc, &wf, &yc), MP_OK);
            assert_int_equal(ops->conv2d_backward_data(&d, &dyc, &wf, &dxc), MP_OK);
            if (dt == MP_F16) {
                mp_convert(got.data, dt, yc.data, MP_F32, (size_t)mp_tensor_numel(&yc));
                assert_memory_equal((char *)y->data + images_bytes(y, n0), got.data,
                                    images_bytes(y, half_n));
                mp_convert(got.data, dt, dxc.data, MP_F32, (size_t)mp_tensor_numel(&dxc));
                assert_memory_equal((char *)dx->data + images_bytes(dx, n0), got.data,
                                    images_bytes(dx, half_n));
            }
            assert_int_equal(ops->conv2d_backward_filter(&d, &xc, &dyc, n0 ? &part : &sum), MP_OK);
            for (int64_t i = 0; n0 && i < mp_tensor_numel(&sum); i++)
                ((float *)sum.data)[i] += ((float *)part.data)[i];
            mp_tensor *c[] = {&xc, &dyc, &yc, &dxc};
            for (int i = 0; i < 4; i++)
                mp_tensor_free(c[i]);
        }
        mp_convert(got.data, dt, sum.data, MP_F32, (size_t)mp_tensor_numel(dw));
        assert_memory_equal(dw->data, got.data, (size_t)mp_tensor_bytes(dw));
        mp_tensor rdw = mp_tensor_alloc(MP_F64, 4, ws, MP_MEM_WORKSPACE);
        mp_test_conv_ref(&cc, x64.data, w64.data, NULL, dy64.data, NULL, NULL, rdw.data);
        mp_test_check_dtype(dw, &rdw, cc.n * cc.p * cc.q);
        mp_tensor *all[] = {&x, &x64, &w, &w64, &dy, &dy64, &t[0], &t[1], &t[2], &t[3], &wf,
                            &sum, &part, &got, &rdw};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            mp_tensor_free(all[i]);
    }
}

/* The ops' scratch (half inputs widened to FP32, the im2col patches) is counted as workspace,
 * and repeated calls of the same shapes hold no more memory: it is reused, neither leaked nor
 * grown again. The tensors here are counted as data so that they are not mistaken for it. */
static void test_workspace_counted_and_steady(void **state)
{
    (void)state;
    const mp_test_conv_case cc = {1, 24, 24, 16, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, 24, 24};
    mp_conv_desc d = mp_test_conv_desc(&cc);
    const mp_dtype dt[5] = {MP_F16, MP_F16, MP_F16, MP_F16, MP_F16};
    mp_tensor t[5];
    mp_test_conv_tensors(&cc, dt, t);
    mp_tensor *x = &t[0], *w = &t[1], *y = &t[2], *gw = &t[3], *gx = &t[4];
    assert_int_equal(ops->conv2d_forward(&d, x, w, y), MP_OK);
    assert_int_equal(ops->conv2d_backward_data(&d, y, w, x), MP_OK);
    assert_int_equal(ops->conv2d_backward_filter(&d, x, y, w), MP_OK);
    int64_t held = mp_mem_current(MP_MEM_WORKSPACE);
    int64_t need = (mp_tensor_numel(x) + cc.p * cc.q * 9 * cc.c) * (int64_t)sizeof(float);
    assert_true(held >= need);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ops->conv2d_forward(&d, x, w, y), MP_OK);
        assert_int_equal(ops->conv2d_backward_data(&d, y, w, x), MP_OK);
        assert_int_equal(ops->conv2d_backward_filter(&d, x, y, w), MP_OK);
    }
    /* Both gradients at once fit in what either took alone. */
    assert_int_equal(ops->conv2d_backward(&d, x, w, y, gw, gx), MP_OK);
    assert_int_equal(mp_mem_current(MP_MEM_WORKSPACE), held);
    for (int i = 0; i < 5; i++)
        mp_tensor_free(&t[i]);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes_against_fp64),
        cmocka_unit_test(test_fused_backward_bitwise),
        cmocka_unit_test(test_fused_workspace_o1),
        cmocka_unit_test(test_half_chunks),
        cmocka_unit_test(test_workspace_counted_and_steady),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
