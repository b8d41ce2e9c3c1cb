// np: 1 2
/* The step never waits for the device between host points (issue 7), checked on the CPU
 * backend with staged memory (MPDIST_CPU_STAGED=1: memory declared device-like, so every host
 * access takes the copy path a GPU takes and is counted) at O2 fp16 with SGD and clipping and
 * at O3 bf16 with Adam. On 2 ranks the trainer sums buckets and agrees on the device path
 * (comm/comm_device.c: a second MPI transport stands in for NCCL on staged memory), and the two
 * cases share one communicator, so the second fails unless the first trainer closed the device
 * transport it opened (issue 17, finding 2). tests/gpu/test_cuda_nosync.c runs the same check
 * on a GPU. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdlib.h>

#include "tests/util/test_nosync.h"

static mp_comm comm;

static void test_o2_fp16_sgd(void **state)
{
    (void)state;
    mp_nosync_check(&comm, "cpu", mp_nosync_o2_fp16_sgd);
}

static void test_o3_bf16_adam(void **state)
{
    (void)state;
    mp_nosync_check(&comm, "cpu", mp_nosync_o3_bf16_adam);
}

int main(int argc, char **argv)
{
    setenv("MPDIST_CPU_STAGED", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_o2_fp16_sgd),
        cmocka_unit_test(test_o3_bf16_adam),
    };
    return mp_test_mpi_main(&comm, &argc, &argv, tests, sizeof tests / sizeof tests[0]);
}
