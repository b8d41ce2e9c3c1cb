/* The step never waits for the GPU between host points (issue 7): the check of
 * tests/util/test_nosync.h on the CUDA backend, one rank (which makes no NCCL communicator: NCCL's
 * device path needs a GPU per rank; tests/mpi/test_nosync.c runs that path's logic on 2 ranks of
 * the staged CPU backend), at O2 fp16 with SGD and clipping and at O3 bf16 with Adam. Skipped
 * (exit 77) without a GPU. */
#include "tests/util/test_gpu.h"

#include <stdio.h>

#include "tests/util/test_nosync.h"

static mp_comm comm;

static void test_o2_fp16_sgd(void **state)
{
    (void)state;
    mp_nosync_check(&comm, "cuda", mp_nosync_o2_fp16_sgd);
}

static void test_o3_bf16_adam(void **state)
{
    (void)state;
    mp_nosync_check(&comm, "cuda", mp_nosync_o3_bf16_adam);
}

int main(int argc, char **argv)
{
    mp_gpu_or_skip();
    if (mp_comm_init(&comm, &argc, &argv) != MP_OK) {
        fprintf(stderr, "%s\n", mp_error_message());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_o2_fp16_sgd),
        cmocka_unit_test(test_o3_bf16_adam),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mp_comm_finalize(&comm);
    return rc;
}
