/* comm/device_bind: the rank -> GPU binding and the choice between NCCL and MPI, from made-up
 * GPU ids (no GPU, no MPI): distinct GPUs on two hosts with the same bus id, two ranks sharing
 * one GPU, one rank (no NCCL communicator to make), CPU runs, builds without NCCL, and the
 * explicit backends. Outputs start filled with
 * values no call writes, so a call that writes nothing fails. */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <string.h>

#include "comm/device_bind.h"

#define BUS "0000:65:00.0"

typedef struct choice {
    mp_status st;
    int use_nccl;
    char why[256];
} choice;

static choice choose(const char *requested, bool gpu, bool nccl_built, int size,
                     const mp_gpu_id *ids)
{
    choice c;
    c.use_nccl = -1;
    memset(c.why, 'x', sizeof c.why - 1);
    c.why[sizeof c.why - 1] = '\0';
    mp_error_clear();
    c.st = mp_comm_choose(requested, gpu, nccl_built, size, ids, &c.use_nccl, c.why,
                          sizeof c.why);
    return c;
}

static void expect_text(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("\"%s\" lacks \"%s\"", text, part);
}

static const mp_gpu_id two_hosts[2] = {{"h1", BUS}, {"h2", BUS}};
static const mp_gpu_id shared[2] = {{"h1", BUS}, {"h1", BUS}};

static void test_modulo_binding(void **state)
{
    (void)state;
    assert_int_equal(mp_device_for_local_rank(0, 4), 0);
    assert_int_equal(mp_device_for_local_rank(3, 4), 3);
    assert_int_equal(mp_device_for_local_rank(5, 4), 1);
    assert_int_equal(mp_device_for_local_rank(7, 2), 1);
    assert_int_equal(mp_device_for_local_rank(2, 1), 0);
}

static void test_no_devices(void **state)
{
    (void)state;
    assert_int_equal(mp_device_for_local_rank(0, 0), -1);
    assert_int_equal(mp_device_for_local_rank(3, 0), -1);
}

static void test_auto_distinct_gpus(void **state)
{
    (void)state;
    choice c = choose("auto", true, true, 2, two_hosts);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 1);
    assert_string_equal(c.why, "NCCL: 2 ranks, one GPU each");
}

static void test_auto_shared_gpu(void **state)
{
    (void)state;
    choice c = choose("auto", true, true, 2, shared);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, "MPI: ranks 0 and 1 share the GPU " BUS " on host h1, and NCCL "
                               "needs one GPU per rank");
    /* ranks 0 and 2 share one of the two GPUs: rank 1 has the other */
    mp_gpu_id three[3] = {{"h1", BUS}, {"h1", "0000:b3:00.0"}, {"h1", BUS}};
    c = choose("auto", true, true, 3, three);
    assert_int_equal(c.use_nccl, 0);
    expect_text(c.why, "ranks 0 and 2 share the GPU " BUS " on host h1");
    /* the same bus id on another host is another GPU */
    snprintf(three[2].host, sizeof three[2].host, "h2");
    c = choose("auto", true, true, 3, three);
    assert_int_equal(c.use_nccl, 1);
    assert_string_equal(c.why, "NCCL: 3 ranks, one GPU each");
}

/* One rank exchanges nothing: no NCCL communicator, under "auto" and "nccl" alike, and the
 * reasons a CPU run or a build without NCCL gives still come first. */
static void test_one_rank(void **state)
{
    (void)state;
    static const char one_rank[] = "MPI: one rank, so no collective runs and no NCCL "
                                   "communicator is made";
    choice c = choose("auto", true, true, 1, two_hosts);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, one_rank);
    c = choose("nccl", true, true, 1, two_hosts);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, one_rank);
    c = choose("auto", false, true, 1, two_hosts);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, "MPI: amp.device is cpu");
    c = choose("auto", true, false, 1, two_hosts);
    assert_string_equal(c.why, "MPI: this build has no NCCL");
    c = choose("nccl", false, true, 1, two_hosts);
    assert_int_equal(c.st, MP_EUSAGE);
    expect_text(mp_error_message(), "amp.device is cpu");
}

static void test_no_gpu(void **state)
{
    (void)state;
    choice c = choose("auto", false, true, 2, two_hosts);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, "MPI: amp.device is cpu");
    mp_gpu_id ids[2] = {two_hosts[0], {"h2", ""}}; /* a rank that found no device */
    c = choose("auto", true, true, 2, ids);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, "MPI: rank 1 on host h2 has no GPU");
}

static void test_no_nccl_build(void **state)
{
    (void)state;
    choice c = choose("auto", true, false, 2, two_hosts);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, "MPI: this build has no NCCL");
}

static void test_nccl_refused(void **state)
{
    (void)state;
    choice c = choose("nccl", true, true, 2, shared);
    assert_int_equal(c.st, MP_EUSAGE);
    assert_int_equal(c.use_nccl, 0);
    expect_text(mp_error_message(), "comm.backend = nccl, but ranks 0 and 1 share the GPU " BUS);
    expect_text(c.why, "NCCL needs one GPU per rank");
    c = choose("nccl", false, true, 2, two_hosts);
    assert_int_equal(c.st, MP_EUSAGE);
    expect_text(mp_error_message(), "amp.device is cpu");
    c = choose("nccl", true, false, 2, two_hosts);
    assert_int_equal(c.st, MP_EUSAGE);
    expect_text(mp_error_message(), "this build has no NCCL");
    c = choose("nccl", true, true, 2, two_hosts);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 1);
}

static void test_explicit_mpi(void **state)
{
    (void)state;
    choice c = choose("mpi", true, true, 2, two_hosts);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 0);
    assert_string_equal(c.why, "MPI: comm.backend = mpi");
    c = choose("gloo", true, true, 2, two_hosts);
    assert_int_equal(c.st, MP_EUSAGE);
    expect_text(mp_error_message(), "\"gloo\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modulo_binding),   cmocka_unit_test(test_no_devices),
        cmocka_unit_test(test_auto_distinct_gpus), cmocka_unit_test(test_auto_shared_gpu),
        cmocka_unit_test(test_one_rank),         cmocka_unit_test(test_no_gpu),
        cmocka_unit_test(test_no_nccl_build),    cmocka_unit_test(test_nccl_refused),
        cmocka_unit_test(test_explicit_mpi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
