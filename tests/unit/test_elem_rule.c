/* The CUDA element-wise kernels' bodies (engine/elem_rule.h's mp_*_at, with engine/cast_rule.h's
 * loads and stores by runtime dtype) run here over whole tensors, element by element as a
 * grid-stride loop would, and must give the CPU ops' bits: for every dtype the GPU stores and
 * mixed dtypes, on values that include inf, NaN, -0, subnormals of each type, values that round
 * to inf in fp16, rounding ties, and for the 16-bit types every bit pattern. Where the op does
 * arithmetic, a NaN result only has to be a NaN: which operand's payload and sign an addition
 * keeps is up to the compiler (it may swap the operands) and the hardware (a GPU returns the
 * canonical NaN). */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/elem_rule.h"
#include "engine/ops.h"
#include "engine/rng.h"

enum { N = 65536 + 512 };

static const mp_ops *ops;
static const mp_dtype gpu_dtypes[] = {MP_F32, MP_F16, MP_BF16};

/* A value for element i: the 16-bit pattern i for i < 65536 in half types (every fp16 or bf16
 * value, NaNs with every payload included), else a special or a random value rounded to dt. */
static void fill_values(mp_tensor *t, mp_rng *r)
{
    static const double special[] = {
        INFINITY, -INFINITY, NAN, -NAN, 0.0, -0.0, 1e-40, -1e-45, 6e-8, 3e-8, 65504.0,
        65519.0, 65520.0, 70000.0, -1e6, 3.4e38, 1.0 + 0x1p-11, 1.0 + 0x1p-8, 0x1p-126, -2.5};
    int64_t n = mp_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (i < 65536 && t->dtype != MP_F32 && t->dtype != MP_F64) {
            ((uint16_t *)t->data)[i] = (uint16_t)i;
            continue;
        }
        double v = (i % 3 == 0) ? special[(i / 3) % (sizeof special / sizeof special[0])]
                                : 8 * mp_rng_uniform(r) - 4;
        mp_store(t->data, t->dtype, (size_t)i, v);
        if (t->dtype == MP_F32 && i < 65536 && i % 3 == 1) /* every fp16 value, widened */
            ((float *)t->data)[i] = mp_f16_to_f32((uint16_t)i);
    }
}

static mp_tensor make(mp_dtype dt, int64_t rows, int64_t cols, mp_rng *r)
{
    int64_t shape[2] = {rows, cols};
    mp_tensor t = mp_tensor_alloc(dt, 2, shape, MP_MEM_WORKSPACE);
    fill_values(&t, r);
    return t;
}

static mp_tensor clone(const mp_tensor *t)
{
    mp_tensor c = mp_tensor_alloc(t->dtype, t->ndim, t->shape, MP_MEM_WORKSPACE);
    memcpy(c.data, t->data, (size_t)mp_tensor_bytes(t));
    return c;
}

/* Fails naming the op, the dtypes and the first element whose bits differ (with any_nan, two
 * NaNs count as equal). */
static void check_bits(const mp_tensor *got, const mp_tensor *want, const char *op, mp_dtype a,
                       mp_dtype b, bool any_nan)
{
    size_t es = mp_dtype_size(got->dtype);
    for (int64_t i = 0; i < mp_tensor_numel(got); i++)
        if (memcmp((char *)got->data + (size_t)i * es, (char *)want->data + (size_t)i * es, es) &&
            !(any_nan && isnan(mp_load(got->data, got->dtype, (size_t)i)) &&
              isnan(mp_load(want->data, want->dtype, (size_t)i))))
            fail_msg("%s %s/%s: element %lld is %.9g, the CPU op's %.9g", op, mp_dtype_name(a),
                     mp_dtype_name(b), (long long)i, mp_load(got->data, got->dtype, (size_t)i),
                     mp_load(want->data, want->dtype, (size_t)i));
}

static void test_convert(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 41, 0);
    const mp_dtype all[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < 4; d++) {
            if (s == d) /* a byte copy on both backends */
                continue;
            mp_tensor src = make(all[s], 1, N, &r), want = make(all[d], 1, N, &r);
            mp_tensor got = clone(&want);
            assert_int_equal(ops->convert(&src, &want), MP_OK);
            for (int64_t i = 0; i < N; i++)
                mp_convert_at(src.data, src.dtype, got.data, got.dtype, i);
            check_bits(&got, &want, "convert", all[s], all[d], false);
            mp_tensor_free(&src);
            mp_tensor_free(&want);
            mp_tensor_free(&got);
        }
}

static void test_relu(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 42, 0);
    for (int d = 0; d < 3; d++) {
        mp_dtype dt = gpu_dtypes[d];
        mp_tensor x = make(dt, 1, N, &r), dy = make(dt, 1, N, &r);
        mp_tensor y = clone(&x), got = clone(&x);
        assert_int_equal(ops->relu_forward(&x, &y), MP_OK);
        for (int64_t i = 0; i < N; i++)
            mp_relu_forward_at(x.data, got.data, dt, i);
        check_bits(&got, &y, "relu_forward", dt, dt, false);
        /* backward against the forward's input as y: every sign, zero and NaN */
        mp_tensor dx = clone(&dy);
        assert_int_equal(ops->relu_backward(&x, &dy, &dx), MP_OK);
        for (int64_t i = 0; i < N; i++)
            mp_relu_backward_at(x.data, dy.data, got.data, dt, i);
        check_bits(&got, &dx, "relu_backward", dt, dt, false);
        mp_tensor *all[] = {&x, &dy, &y, &got, &dx};
        for (int i = 0; i < 5; i++)
            mp_tensor_free(all[i]);
    }
}

static void test_scale_and_fill(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 43, 0);
    const double alphas[] = {0.5, 1.0 / 3.0, 65536.0, 1e-30, -0.0};
    for (int d = 0; d < 3; d++) {
        mp_dtype dt = gpu_dtypes[d];
        for (int k = 0; k < 5; k++) {
            mp_tensor x = make(dt, 1, N, &r), got = clone(&x);
            assert_int_equal(ops->scale(&x, alphas[k]), MP_OK);
            for (int64_t i = 0; i < N; i++)
                mp_scale_at(got.data, dt, (float)alphas[k], i);
            check_bits(&got, &x, "scale", dt, dt, true);
            assert_int_equal(ops->fill(&x, alphas[k] * 3.1), MP_OK);
            for (int64_t i = 0; i < N; i++)
                mp_elem_store_f32(got.data, dt, i, (float)(alphas[k] * 3.1));
            check_bits(&got, &x, "fill", dt, dt, false);
            mp_tensor_free(&x);
            mp_tensor_free(&got);
        }
    }
}

static void test_add_mixed_dtypes(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 44, 0);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int d = 0; d < 3; d++) {
                mp_tensor x = make(gpu_dtypes[a], 1, N, &r), z = make(gpu_dtypes[b], 1, N, &r);
                mp_tensor y = make(gpu_dtypes[d], 1, N, &r), got = clone(&y);
                assert_int_equal(ops->add(&x, &z, &y), MP_OK);
                for (int64_t i = 0; i < N; i++)
                    mp_add_at(x.data, x.dtype, z.data, z.dtype, got.data, got.dtype, i);
                check_bits(&got, &y, "add", gpu_dtypes[a], gpu_dtypes[d], true);
                /* add_relu: the GPU's rule, and bitwise the unfused pair (NaN bits too) */
                mp_tensor fused = clone(&y);
                assert_int_equal(ops->add_relu(&x, &z, &fused), MP_OK);
                for (int64_t i = 0; i < N; i++)
                    mp_add_relu_at(x.data, x.dtype, z.data, z.dtype, got.data, got.dtype, i);
                check_bits(&got, &fused, "add_relu", gpu_dtypes[a], gpu_dtypes[d], true);
                assert_int_equal(ops->relu_forward(&y, &y), MP_OK);
                check_bits(&fused, &y, "add_relu against add, relu", gpu_dtypes[a],
                           gpu_dtypes[d], false);
                mp_tensor *all[] = {&x, &z, &y, &got, &fused};
                for (int i = 0; i < 5; i++)
                    mp_tensor_free(all[i]);
            }
}

/* bias_add over shapes whose rows are narrower, as wide as and wider than the CPU's tiles. */
static void test_bias_add(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 45, 0);
    const int64_t shapes[][2] = {{1, 1}, {7, 3}, {5, 1024}, {3, 1500}, {300, 17}};
    for (int y = 0; y < 3; y++)
        for (int b = 0; b < 3; b++)
            for (int s = 0; s < 5; s++) {
                int64_t rows = shapes[s][0], cols = shapes[s][1];
                mp_tensor v = make(gpu_dtypes[y], rows, cols, &r);
                mp_tensor bias = make(gpu_dtypes[b], 1, cols, &r), got = clone(&v);
                assert_int_equal(ops->bias_add(&v, &bias), MP_OK);
                for (int64_t i = 0; i < rows * cols; i++)
                    mp_bias_add_at(got.data, got.dtype, bias.data, bias.dtype, cols, i);
                check_bits(&got, &v, "bias_add", gpu_dtypes[y], gpu_dtypes[b], true);
                mp_tensor_free(&v);
                mp_tensor_free(&bias);
                mp_tensor_free(&got);
            }
}

/* ReLU commutes with rounding (elem_rule.h): for FP32 values around every boundary that matters
 * (tiny negatives that round to -0, subnormals, the largest finite halves, inf, NaN) and random
 * ones, storing relu(v) gives the bits of storing v and then relu of what was stored, in fp16
 * and bf16: what lets add_relu and BatchNorm with ReLU apply it before their one rounding. */
static void test_relu_commutes_with_rounding(void **state)
{
    (void)state;
    float edge[] = {-0.0f, 0.0f, -0x1p-26f, -0x1p-25f, -0x1.8p-25f, -0x1p-24f, 0x1p-26f,
                    0x1p-25f, -0x1p-134f, -0x1p-133f, 0x1p-134f, -1e-45f, 1e-45f, -65520.0f,
                    65520.0f, -3.4e38f, INFINITY, -INFINITY, NAN, -NAN, -1.0f, 1.0f};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 100000 + (int)(sizeof edge / sizeof edge[0]); i++) {
        float v;
        if (i < (int)(sizeof edge / sizeof edge[0])) {
            v = edge[i];
        } else {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t bits = (uint32_t)(s >> 32);
            memcpy(&v, &bits, sizeof v);
        }
        const mp_dtype dts[] = {MP_F16, MP_BF16};
        for (int d = 0; d < 2; d++) {
            uint64_t fused = 0, unfused = 0; /* wide enough for any dtype's store */
            mp_elem_store_f32(&fused, dts[d], 0, mp_relu_f32(v));
            mp_elem_store_f32(&unfused, dts[d], 0, v);
            float stored = mp_elem_load_f32(&unfused, dts[d], 0);
            mp_elem_store_f32(&unfused, dts[d], 0, mp_relu_f32(stored));
            if (isnan(v))
                assert_true(isnan(mp_elem_load_f32(&fused, dts[d], 0)));
            else if (fused != unfused)
                fail_msg("relu then round %04llx != round then relu %04llx for %a (%s)",
                         (unsigned long long)fused, (unsigned long long)unfused, (double)v,
                         mp_dtype_name(dts[d]));
        }
    }
}

/* The f64 rules are the f32 ones in double, and mp_elem_copy moves bits, NaN payloads included. */
static void test_rules_and_copy(void **state)
{
    (void)state;
    assert_true(mp_relu_f32(-0.0f) == 0.0f && !signbit(mp_relu_f32(-0.0f)));
    assert_true(isnan(mp_relu_f32(NAN)) && !signbit(mp_relu_f64(-0.0)));
    assert_true(mp_relu_f64(-2.0) == 0.0 && mp_relu_f64(INFINITY) == INFINITY);
    assert_false(mp_relu_passes_f32(0.0f) || mp_relu_passes_f32(NAN) || mp_relu_passes_f64(-1.0));
    assert_true(mp_relu_passes_f64(0x1p-1074));
    assert_true(mp_add_f64(0.1, 0.2) == 0.1 + 0.2 && mp_scale_f32(3.0f, 0.5f) == 1.5f);
    uint16_t h[2] = {0x7c01, 0}; /* a signalling fp16 NaN */
    mp_elem_copy(h, h, MP_F16, 1);
    mp_elem_copy(&h[1], h, MP_F16, 0);
    assert_int_equal(h[1], 0x7c01);
    double dsrc = -0x1.123456789abcdp-1000, ddst = 0;
    mp_elem_copy(&ddst, &dsrc, MP_F64, 0);
    assert_memory_equal(&ddst, &dsrc, 8);
    assert_true(mp_elem_load_f64(&dsrc, MP_F64, 0) == dsrc);
    assert_true(mp_elem_load_f32(&dsrc, MP_F64, 0) == (float)dsrc);
}

static int setup(void **state)
{
    (void)state;
    ops = mp_backend_cpu();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convert),          cmocka_unit_test(test_relu),
        cmocka_unit_test(test_scale_and_fill),   cmocka_unit_test(test_add_mixed_dtypes),
        cmocka_unit_test(test_bias_add),         cmocka_unit_test(test_rules_and_copy),
        cmocka_unit_test(test_relu_commutes_with_rounding),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
