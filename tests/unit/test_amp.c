/* The opt-level table of docs/ARCHITECTURE.md §3 (Apex's semantics) as mp_amp_resolve produces it
 * from each level's defaults, and the overrides. */
#include "tests/util/test_util.h"

#include "engine/amp.h"

static mp_amp_policy level(mp_opt_level l, mp_dtype half)
{
    mp_amp_defaults d = mp_amp_level_defaults(l, half);
    return mp_amp_resolve(l, half, d.keep_batchnorm_fp32, d.master_weights, d.loss_scale, false);
}

static void test_table(void **state)
{
    (void)state;
    /* level: weights, master, GEMM, BN params, input, loss scale (fp16) */
    const struct {
        mp_opt_level l;
        mp_dtype weights, compute, norm, input;
        bool master, cast;
        double scale_fp16;
    } rows[] = {
        {MP_O0, MP_F32, MP_F32, MP_F32, MP_F32, false, false, 1.0},
        {MP_O1, MP_F32, MP_F16, MP_F32, MP_F32, false, true, 0.0},
        {MP_O2, MP_F16, MP_F16, MP_F32, MP_F16, true, false, 0.0},
        {MP_O3, MP_F16, MP_F16, MP_F16, MP_F16, false, false, 1.0},
    };
    for (int i = 0; i < 4; i++) {
        mp_amp_policy p = level(rows[i].l, MP_F16);
        assert_int_equal(p.weights, rows[i].weights);
        assert_int_equal(p.compute, rows[i].compute);
        assert_int_equal(p.norm, rows[i].norm);
        assert_int_equal(p.input, rows[i].input);
        assert_int_equal(p.master_weights, rows[i].master);
        assert_int_equal(p.cast_weights, rows[i].cast);
        assert_true(p.loss_scale == rows[i].scale_fp16);
        /* bf16: the same dtypes with bf16 for fp16, and no loss scaling by default */
        mp_amp_policy b = level(rows[i].l, MP_BF16);
        assert_int_equal(b.compute, rows[i].compute == MP_F16 ? MP_BF16 : MP_F32);
        assert_true(b.loss_scale == 1.0);
    }
}

static void test_overrides(void **state)
{
    (void)state;
    mp_amp_policy p = mp_amp_resolve(MP_O3, MP_F16, true, false, 128.0, true);
    assert_int_equal(p.norm, MP_F32); /* keep_batchnorm_fp32 at O3 */
    assert_true(p.loss_scale == 128.0);
    assert_true(p.allow_tf32);
    p = mp_amp_resolve(MP_O2, MP_F16, false, false, 0.0, false);
    assert_false(p.master_weights); /* O2 without masters updates the half weights */
    assert_int_equal(p.norm, MP_F16);
    p = mp_amp_resolve(MP_O3, MP_BF16, false, true, 1.0, false);
    assert_true(p.master_weights); /* O3 with masters */
    p = mp_amp_resolve(MP_O0, MP_F16, true, true, 1.0, false);
    assert_false(p.master_weights); /* FP32 weights are their own masters */
    mp_opt_level l;
    assert_int_equal(mp_opt_level_parse("O2", &l), 0);
    assert_int_equal(l, MP_O2);
    assert_int_equal(mp_opt_level_parse("O4", &l), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_overrides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
