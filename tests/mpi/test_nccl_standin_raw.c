// np: 2 4
/* bench-comm's bare NCCL communicator (comm/nccl_raw.h) on ranks without a GPU, over the stand-in
 * of tests/util/nccl_standin.h (issue 46): its all-reduce, reduce-scatter and all-gather in
 * each dtype give the MPI transport's bytes, with NCCL's ncclInProgress answers too; a slice of
 * a blocked buffer is refused; a collective that never finishes makes the wait give up after its
 * limit naming the rank. Built only where CUDA (and so NCCL's headers) is; elsewhere it exits 77
 * (skipped). */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/nccl_raw.h"
#include "engine/clock.h"

#ifdef MP_HAVE_NCCL_STANDIN
#include "tests/util/nccl_standin.h"
#include "tests/util/nccl_standin_cases.h"

/* Wrong elements of one collective of bench-comm's bare communicator (comm/nccl_raw.h), queued
 * `times` over (idempotent for all-gather only) before one wait, against the MPI transport's
 * bytes on the same inputs. */
static int64_t raw_compare(mp_nccl_raw *raw, mp_coll_kind kind, mp_dtype dt, size_t block,
                           int times)
{
    size_t n = block * (size_t)comm.size, bytes = n * mp_dtype_size(dt);
    char *before = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    for (size_t i = 0; i < n; i++)
        mp_store(before, dt, i, kind == MP_COLL_ALLGATHER && i / block != (size_t)comm.rank
                                    ? -1.0
                                    : standin_value((int64_t)i, comm.rank));
    memcpy(want, before, bytes);
    standin_run(NULL, kind, MP_REDOP_SUM, want, n, dt, block, 0);
    memcpy(got, before, bytes);
    mp_coll c = kind == MP_COLL_ALLREDUCE
                    ? mp_coll_of(kind, got, n, dt, MP_REDOP_SUM, "raw collective")
                    : mp_coll_blocks(kind, got, n, dt, block, 0, "raw collective");
    for (int k = 0; k < times; k++)
        if (mp_nccl_raw_start(raw, &c) != MP_OK)
            fail_msg("%s", mp_error_message());
    if (mp_nccl_raw_wait(raw, 10.0) != MP_OK)
        fail_msg("%s", mp_error_message());
    int64_t bad = standin_differ(kind, MP_REDOP_SUM, got, want, before, n, dt, block);
    free(before);
    free(want);
    free(got);
    return bad;
}

/* bench-comm's raw rows: the bare communicator's all-reduce, reduce-scatter and all-gather in
 * each dtype give the MPI transport's bytes (all-gathers queued three deep), NCCL's
 * ncclInProgress answers included; a slice of a blocked buffer is refused. */
static void test_raw_loop(void **state)
{
    (void)state;
    const mp_dtype types[] = {MP_F32, MP_F16, MP_BF16};
    const mp_coll_kind kinds[] = {MP_COLL_ALLREDUCE, MP_COLL_REDUCE_SCATTER, MP_COLL_ALLGATHER};
    const size_t blocks[] = {1, 7, 1000};
    for (int pass = 0; pass < 2; pass++) {
        mp_standin_fault(pass ? "inprogress:3" : NULL);
        long before = mp_standin_launches();
        mp_nccl_raw *raw = NULL;
        if (mp_nccl_raw_open(&raw, &comm.peers, 0) != MP_OK)
            fail_msg("%s", mp_error_message());
        int64_t wrong = 0;
        for (size_t t = 0; t < 3; t++)
            for (size_t k = 0; k < 3; k++)
                for (size_t b = 0; b < 3; b++)
                    wrong += standin_total(raw_compare(raw, kinds[k], types[t], blocks[b],
                                               kinds[k] == MP_COLL_ALLGATHER ? 3 : 1));
        char buf[64];
        mp_coll slice = mp_coll_blocks(MP_COLL_ALLGATHER, buf, 4, MP_F32, 4, 2, "a slice");
        assert_int_equal(mp_nccl_raw_start(raw, &slice), MP_EINTERNAL);
        mp_nccl_raw_close(raw);
        assert_int_equal(wrong, 0);
        assert_true(mp_standin_launches() >= before + 27);
    }
    mp_standin_fault(NULL);
}

/* A raw collective that never finishes: the wait gives up after its limit with MP_ECOMM naming
 * the rank, every later call fails at once, and close frees the aborted communicator. */
static void test_raw_timeout(void **state)
{
    (void)state;
    mp_standin_fault("hang:*:1");
    mp_nccl_raw *raw = NULL;
    if (mp_nccl_raw_open(&raw, &comm.peers, 0) != MP_OK)
        fail_msg("%s", mp_error_message());
    float x[8] = {0};
    mp_coll c = mp_coll_of(MP_COLL_ALLREDUCE, x, 8, MP_F32, MP_REDOP_SUM, "stuck raw sum");
    assert_int_equal(mp_nccl_raw_start(raw, &c), MP_OK);
    double t0 = mp_now();
    assert_int_equal(mp_nccl_raw_wait(raw, 0.5), MP_ECOMM);
    double took = mp_now() - t0;
    char want[64];
    snprintf(want, sizeof want, "[rank %d @", comm.rank);
    assert_non_null(strstr(mp_error_message(), want));
    assert_non_null(strstr(mp_error_message(), "timed out after"));
    assert_true(took >= 0.5 && took < 5.0);
    assert_int_equal(mp_nccl_raw_start(raw, &c), MP_ECOMM);
    mp_nccl_raw_close(raw);
    mp_standin_fault(NULL);
    assert_int_equal(MPI_Barrier(comm.world), MPI_SUCCESS);
}

int main(int argc, char **argv)
{
    stream = mp_standin_stream();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_loop),
        cmocka_unit_test(test_raw_timeout),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}

#else

int main(void)
{
    fprintf(stderr, "test_nccl_standin_raw: this build has no CUDA, so no NCCL headers: skipped\n");
    return 77;
}

#endif
