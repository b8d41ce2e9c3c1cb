/* The CPU backend's parallel loops (engine/backend_cpu/parallel.h) give the bits of one thread:
 * every op of tests/util/test_cpu_ops.h (element-wise ops, pooling with NaN in the input,
 * both attention paths, BatchNorm, the optimizer step, the gradient statistics), in every dtype,
 * on tensors large enough to be split, computed with 1 and with 3 threads and compared byte for
 * byte (the (T, T) attention path failed it in FP64 while OpenBLAS threaded its products).
 * Whole-tensor dtype conversions (the convert op; convolutions, GEMMs and attention widen and
 * round through the same split) give mp_convert's bits for every pair of dtypes. */
#include "tests/util/test_util.h"

#include <cblas.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/tensor.h"
#include "tests/util/test_cpu_ops.h"

static const mp_ops *ops;

/* Every op of tests/util/test_cpu_ops.h on the same inputs (drawn from one seed) with `threads`
 * threads. */
static void run_all(mp_dtype dt, int threads, mp_test_outputs *o)
{
    mp_backend_cpu_threads(threads);
#ifdef _OPENMP
    assert_int_equal(omp_get_max_threads(), threads);
#endif
    mp_test_cpu_ops_run(ops, dt, 48, o);
}

static void test_threads_give_one_threads_bits(void **state)
{
    (void)state;
#ifndef _OPENMP
    skip(); /* built without OpenMP: every loop runs on one thread */
#endif
    if (openblas_get_parallel() != OPENBLAS_OPENMP) {
        print_message("OpenBLAS's pthread build: it may thread products inside our loops\n");
        skip();
    }
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    for (int k = 0; k < 4; k++) {
        mp_test_outputs one, many;
        run_all(dts[k], 1, &one);
        run_all(dts[k], 3, &many);
        mp_test_outputs_same(&one, &many, "between 1 and 3 threads", dts[k]);
    }
    mp_backend_cpu_threads(1);
}

/* The convert op splits a tensor into one piece per thread: with 3 threads, every pair of
 * dtypes and lengths around the pieces' edges (and below the grain, where it does not split),
 * on random bit patterns (NaNs with payloads, infinities, subnormals), it gives mp_convert's
 * bytes, and writes nothing past the end. */
static void test_convert_bulk_is_mp_convert(void **state)
{
    (void)state;
    mp_backend_cpu_threads(3);
#ifdef _OPENMP
    assert_int_equal(omp_get_max_threads(), 3); /* so the long ones are cut in 3 */
#endif
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const int64_t lens[5] = {5, 32768 * 3 - 1, 32768 * 3, 32768 * 3 + 77, 32768 * 5 + 64};
    mp_rng r;
    mp_rng_seed(&r, 2026, 1);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int k = 0; k < 5; k++) {
                int64_t n = lens[k];
                int64_t padded = n + 64; /* a guard tail that must stay untouched */
                mp_tensor src = mp_tensor_alloc(dts[a], 1, &n, MP_MEM_ACTIVATIONS);
                mp_tensor got = mp_tensor_alloc(dts[b], 1, &padded, MP_MEM_ACTIVATIONS);
                mp_tensor want = mp_tensor_alloc(dts[b], 1, &padded, MP_MEM_ACTIVATIONS);
                unsigned char *bytes = src.data;
                for (int64_t i = 0; i < mp_tensor_bytes(&src); i++)
                    bytes[i] = (unsigned char)mp_rng_next(&r);
                memset(got.data, 0xa5, (size_t)mp_tensor_bytes(&got));
                memset(want.data, 0xa5, (size_t)mp_tensor_bytes(&want));
                mp_convert(want.data, dts[b], src.data, dts[a], (size_t)n);
                mp_tensor view = got;
                view.shape[0] = n;
                assert_int_equal(ops->convert(&src, &view), MP_OK);
                if (memcmp(got.data, want.data, (size_t)mp_tensor_bytes(&got)) != 0)
                    fail_msg("convert %s -> %s of %lld elements differs from mp_convert",
                             mp_dtype_name(dts[a]), mp_dtype_name(dts[b]), (long long)n);
                mp_tensor_free(&src);
                mp_tensor_free(&got);
                mp_tensor_free(&want);
            }
    mp_backend_cpu_threads(1);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_give_one_threads_bits),
        cmocka_unit_test(test_convert_bulk_is_mp_convert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
