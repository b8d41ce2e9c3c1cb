/* comm/device_bind: the rank -> GPU binding and the choice between NCCL and MPI, from made-up
 * GPU ids (no GPU, no MPI): distinct GPUs on two hosts with the same bus id, two ranks sharing
 * one GPU, one rank (no NCCL communicator to make), CPU runs, builds without NCCL, the
 * explicit backends, and comm.share_gpu's choice and environment. Outputs start filled with
 * values no call writes, so a call that writes nothing fails. */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/device_bind.h"

#define BUS "0000:65:00.0"

typedef struct choice {
    mp_status st;
    int use_nccl;
    char why[256];
} choice;

static choice choose_shared(const char *requested, bool gpu, bool nccl_built, bool share,
                            int size, const mp_gpu_id *ids)
{
    choice c;
    c.use_nccl = -1;
    memset(c.why, 'x', sizeof c.why - 1);
    c.why[sizeof c.why - 1] = '\0';
    mp_error_clear();
    c.st = mp_comm_choose(requested, gpu, nccl_built, share, size, ids, &c.use_nccl, c.why,
                          sizeof c.why);
    return c;
}

static choice choose(const char *requested, bool gpu, bool nccl_built, int size,
                     const mp_gpu_id *ids)
{
    return choose_shared(requested, gpu, nccl_built, false, size, ids);
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
                               "needs one GPU per rank (comm.share_gpu = true lets them share "
                               "for tests)");
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

/* comm.share_gpu: ranks sharing a GPU take NCCL, and the banner says it is a testing mode; the
 * other reasons still come first, and one rank still takes MPI. */
static void test_share_gpu_choice(void **state)
{
    (void)state;
    choice c = choose_shared("auto", true, true, true, 2, shared);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 1);
    assert_string_equal(c.why, "NCCL: 2 ranks sharing 1 GPU (comm.share_gpu: a testing mode, "
                               "each rank a host of its own to NCCL, over sockets; no speed)");
    mp_gpu_id four[4] = {{"h1", BUS}, {"h1", "0000:b3:00.0"}, {"h1", BUS}, {"h1", BUS}};
    c = choose_shared("nccl", true, true, true, 4, four);
    assert_int_equal(c.st, MP_OK);
    assert_int_equal(c.use_nccl, 1);
    expect_text(c.why, "NCCL: 4 ranks sharing 2 GPUs");
    c = choose_shared("auto", true, true, true, 2, two_hosts); /* nothing shared */
    assert_string_equal(c.why, "NCCL: 2 ranks, one GPU each");
    c = choose_shared("auto", false, true, true, 2, shared);
    assert_string_equal(c.why, "MPI: amp.device is cpu");
    c = choose_shared("mpi", true, true, true, 2, shared);
    assert_int_equal(c.use_nccl, 0);
    c = choose_shared("auto", true, true, true, 1, shared);
    assert_int_equal(c.use_nccl, 0);
}

/* The environment comm.share_gpu gives a rank: its own NCCL_HOSTID (overwriting the job's), the
 * socket transport, loopback on one host only, and what the user set kept; nothing at all when
 * no GPU is shared. */
static void test_share_gpu_env(void **state)
{
    (void)state;
    const char *names[] = {"NCCL_HOSTID", "NCCL_NET", "NCCL_MNNVL_ENABLE", "NCCL_SOCKET_IFNAME"};
    for (int i = 0; i < 4; i++)
        unsetenv(names[i]);
    bool applied = true;
    assert_int_equal(mp_comm_share_gpu_env(1, 2, two_hosts, &applied), MP_OK);
    assert_false(applied);
    for (int i = 0; i < 4; i++)
        assert_null(getenv(names[i]));
    setenv("NCCL_HOSTID", "the-job", 1);
    setenv("NCCL_NET", "MyPlugin", 1);
    assert_int_equal(mp_comm_share_gpu_env(1, 2, shared, &applied), MP_OK);
    assert_true(applied);
    assert_string_equal(getenv("NCCL_HOSTID"), "mpdist-share-gpu-h1-rank-1");
    assert_string_equal(getenv("NCCL_NET"), "MyPlugin");
    assert_string_equal(getenv("NCCL_MNNVL_ENABLE"), "0");
    assert_string_equal(getenv("NCCL_SOCKET_IFNAME"), "lo");
    for (int i = 0; i < 4; i++)
        unsetenv(names[i]);
    mp_gpu_id spread[3] = {{"h1", BUS}, {"h1", BUS}, {"h2", BUS}}; /* two hosts: no loopback */
    assert_int_equal(mp_comm_share_gpu_env(0, 3, spread, NULL), MP_OK);
    assert_string_equal(getenv("NCCL_HOSTID"), "mpdist-share-gpu-h1-rank-0");
    assert_string_equal(getenv("NCCL_NET"), "Socket");
    assert_null(getenv("NCCL_SOCKET_IFNAME"));
    assert_int_equal(mp_gpu_count_distinct(3, spread), 2);
    mp_gpu_id none[2] = {{"h1", ""}, {"h1", ""}};
    assert_int_equal(mp_gpu_count_distinct(2, none), 0);
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
        cmocka_unit_test(test_explicit_mpi),     cmocka_unit_test(test_share_gpu_choice),
        cmocka_unit_test(test_share_gpu_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
