/* A label outside [0, C) on the CUDA backend (issue 17, finding 3), which cannot refuse it
 * without waiting: the row's dlogits are zeroed (not left from the previous step), the other
 * rows are the bits a run with valid labels gives, the state's found_inf is raised so that the
 * step is skipped, and the next call that returns a result fails with the count, once. The row
 * rule itself runs on the CPU in tests/unit/test_xent_rule.c. Skipped (exit 77) without a GPU. */
#include "tests/util/test_gpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 6, COLS = 37 };

static const mp_ops *gpu;

static void check_bad_labels(mp_dtype dt)
{
    mp_rng r;
    mp_rng_seed(&r, 171, (uint64_t)dt);
    int64_t s[2] = {ROWS, COLS};
    size_t es = mp_dtype_size(dt);
    mp_gpu_pair z = mp_gpu_random(dt, 2, s, &r, -3, 3);
    mp_gpu_pair ref = mp_gpu_poisoned(dt, 2, s), dz = mp_gpu_poisoned(dt, 2, s);
    const int32_t bad[ROWS] = {3, -1, COLS - 1, COLS, 0, INT32_MIN};
    int32_t good[ROWS];
    for (int i = 0; i < ROWS; i++)
        good[i] = bad[i] >= 0 && bad[i] < COLS ? bad[i] : 0;
    int32_t *dbad = mp_gpu_alloc(sizeof bad), *dgood = mp_gpu_alloc(sizeof good);
    mp_gpu_put(dbad, bad, sizeof bad);
    mp_gpu_put(dgood, good, sizeof good);
    mp_amp_state hs, got;
    memset(&hs, 0, sizeof hs);
    hs.scaler.scale = 8.0;
    mp_amp_state *ds = mp_gpu_alloc(sizeof hs);
    mp_gpu_put(ds, &hs, sizeof hs);

    assert_int_equal(gpu->softmax_xent(&z.dev, dgood, 0.1, 0.5, ds, NULL, &ref.dev), MP_OK);
    mp_gpu_get(&got, ds, sizeof got);
    assert_true(got.found_inf == 0.0);
    assert_int_equal(gpu->softmax_xent(&z.dev, dbad, 0.1, 0.5, ds, NULL, &dz.dev), MP_OK);
    mp_gpu_get(&got, ds, sizeof got);
    assert_true(got.found_inf != 0.0 && got.scaler.scale == 8.0);

    unsigned char *want = mp_gpu_bytes(&ref.dev), *have = mp_gpu_bytes(&dz.dev);
    for (int i = 0; i < ROWS; i++) {
        size_t row = (size_t)i * COLS * es;
        if (bad[i] == good[i]) {
            assert_memory_equal(have + row, want + row, COLS * es);
            continue;
        }
        for (int j = 0; j < COLS; j++) {
            double v = mp_load(have + row, dt, (size_t)j);
            assert_true(v == 0.0 && !signbit(v));
        }
    }
    free(want);
    free(have);

    mp_xent_result res;
    assert_int_equal(gpu->softmax_xent(&z.dev, dgood, 0.0, 1.0, NULL, &res, NULL), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "3 labels outside [0, 37)"));
    assert_int_equal(gpu->softmax_xent(&z.dev, dgood, 0.0, 1.0, NULL, &res, NULL), MP_OK);

    gpu->mem_free(ds);
    gpu->mem_free(dbad);
    gpu->mem_free(dgood);
    mp_gpu_pair_free(&z);
    mp_gpu_pair_free(&ref);
    mp_gpu_pair_free(&dz);
}

static void test_bad_labels(void **state)
{
    (void)state;
    for (int d = 0; d < MP_GPU_NDTYPES; d++)
        check_bad_labels(mp_gpu_dtypes[d]);
}

int main(void)
{
    gpu = mp_gpu_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
