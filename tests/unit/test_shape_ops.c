/* The small ops: flatten (a copy of (H, W, C) into (1, 1, H * W * C), forward and backward)
 * and elementwise add (same and mixed dtypes, rounded once to the output's dtype, in place). */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/layer.h"
#include "engine/rng.h"

static const mp_ops *ops;

static void test_flatten(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {2, 3, 4};
    assert_int_equal(mp_layer_flatten_init(&l, ops, "flat", in), MP_OK);
    int64_t want[3] = {1, 1, 24};
    assert_memory_equal(l.out_shape, want, sizeof want);
    assert_memory_equal(l.in_shape, in, sizeof in);
    assert_string_equal(l.cls->type, "flatten");
    assert_int_equal(l.nparams, 0);
    float xv[48], dyv[48];
    double yv[48], dxv[48];
    for (int i = 0; i < 48; i++) {
        xv[i] = (float)i / 3.0f;
        dyv[i] = 1.0f - (float)i / 7.0f;
    }
    int64_t xs[4] = {2, 2, 3, 4}, ys[2] = {2, 24};
    mp_tensor x = mp_tensor_view(xv, MP_F32, 4, xs), y = mp_tensor_view(yv, MP_F64, 2, ys);
    mp_tensor dy = mp_tensor_view(dyv, MP_F32, 2, ys), dx = mp_tensor_view(dxv, MP_F64, 4, xs);
    assert_int_equal(l.cls->forward(&l, &x, &y, true), MP_OK);
    assert_int_equal(l.cls->backward(&l, &x, &y, &dy, &dx), MP_OK);
    assert_int_equal(l.cls->backward(&l, &x, &y, &dy, NULL), MP_OK);
    for (int i = 0; i < 48; i++) {
        assert_true(yv[i] == (double)xv[i]);
        assert_true(dxv[i] == (double)dyv[i]);
    }
}

static void test_add_same_dtype_and_in_place(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 1, 0);
    double a[64], b[64], y[64];
    float af[64], bf[64];
    for (int i = 0; i < 64; i++) {
        a[i] = 2 * mp_rng_uniform(&r) - 1;
        b[i] = 2 * mp_rng_uniform(&r) - 1;
        af[i] = (float)a[i];
        bf[i] = (float)b[i];
    }
    int64_t s[2] = {8, 8};
    mp_tensor ta = mp_tensor_view(a, MP_F64, 2, s), tb = mp_tensor_view(b, MP_F64, 2, s);
    mp_tensor ty = mp_tensor_view(y, MP_F64, 2, s);
    assert_int_equal(ops->add(&ta, &tb, &ty), MP_OK);
    for (int i = 0; i < 64; i++)
        assert_true(y[i] == a[i] + b[i]);
    mp_tensor fa = mp_tensor_view(af, MP_F32, 2, s), fb = mp_tensor_view(bf, MP_F32, 2, s);
    assert_int_equal(ops->add(&fa, &fb, &fa), MP_OK); /* in place: a += b */
    for (int i = 0; i < 64; i++)
        assert_true(af[i] == (float)a[i] + (float)b[i]);
    int64_t s3[1] = {63};
    mp_tensor short_y = mp_tensor_view(y, MP_F64, 1, s3);
    assert_int_equal(ops->add(&ta, &tb, &short_y), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "add"));
}

/* Mixed dtypes: half operands widen exactly and the FP32 sum is rounded once to y. With
 * a = 1 and b = 2^-11 + 2^-22 (FP32), fp16 y is 1 + 2^-10; rounding b to fp16 first (a tie,
 * to 2^-11) and then the sum (again a tie, to 1) would give 1. */
static void test_add_mixed_dtypes_round_once(void **state)
{
    (void)state;
    float a = 1.0f, b = 0x1p-11f + 0x1p-22f;
    uint16_t y16;
    int64_t one[1] = {1};
    mp_tensor ta = mp_tensor_view(&a, MP_F32, 1, one), tb = mp_tensor_view(&b, MP_F32, 1, one);
    mp_tensor ty = mp_tensor_view(&y16, MP_F16, 1, one);
    assert_int_equal(ops->add(&ta, &tb, &ty), MP_OK);
    assert_true(mp_f16_to_f32(y16) == 1.0f + 0x1p-10f);

    mp_rng r;
    mp_rng_seed(&r, 2, 0);
    uint16_t h[32], bh[32];
    float yf[32];
    for (int i = 0; i < 32; i++) {
        h[i] = mp_f32_to_f16((float)(4 * mp_rng_uniform(&r) - 2));
        bh[i] = mp_f32_to_bf16((float)(4 * mp_rng_uniform(&r) - 2));
    }
    int64_t s[1] = {32};
    mp_tensor th = mp_tensor_view(h, MP_F16, 1, s), tbh = mp_tensor_view(bh, MP_BF16, 1, s);
    mp_tensor tyf = mp_tensor_view(yf, MP_F32, 1, s);
    assert_int_equal(ops->add(&th, &tbh, &tyf), MP_OK);
    for (int i = 0; i < 32; i++)
        assert_true(yf[i] == mp_f16_to_f32(h[i]) + mp_bf16_to_f32(bh[i]));
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_add_same_dtype_and_in_place),
        cmocka_unit_test(test_add_mixed_dtypes_round_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
