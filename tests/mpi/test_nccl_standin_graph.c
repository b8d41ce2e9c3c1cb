// np: 2 4
/* The NCCL transport's collectives captured into a graph of the compute stream (capture mode:
 * comm/transport_nccl.c, the product's object code) on ranks without a GPU, over the stand-in of
 * tests/util/nccl_standin.h (issue 48's graphs with NCCL): the capture runs nothing; each launch
 * sums and maxes the inputs written before it; inside a capture a host collective and a host
 * wait are refused, an unjoined collective fails the capture alone, and
 * NCCL_GRAPH_MIXING_SUPPORT=0 refuses one. Built only where CUDA (and so NCCL's headers) is;
 * elsewhere it exits 77 (skipped). */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/nap.h"
#include "engine/ops.h"

#ifdef MP_HAVE_NCCL_STANDIN
#include "tests/util/nccl_standin.h"
#include "tests/util/nccl_standin_cases.h"

/* Captures the step's collectives for the test below: an all-reduce sum of
 * x in slices of 333 and a max over y, each ordered, into a graph of the compute stream; NULL
 * with the reason in the message when the capture failed. */
static void *capture_step(const mp_ops *ops, mp_tensor *x, mp_tensor *y)
{
    mp_status st = mp_comm_capture_begin(&comm, ops);
    mp_standin_capture_begin(stream);
    uint64_t ticket = 0;
    bool waited = true;
    for (size_t lo = 0; lo < 1000 && st == MP_OK; lo += 333) {
        mp_coll c = mp_coll_of(MP_COLL_ALLREDUCE, (float *)x->data + lo, lo + 333 < 1000 ? 333
                               : 1000 - lo, MP_F32, MP_REDOP_SUM, "the captured sum");
        st = mp_comm_coll_start(&comm, ops, &c, &ticket);
    }
    if (st == MP_OK)
        st = mp_comm_coll_order(&comm, ticket, &waited);
    mp_coll m = mp_coll_of(MP_COLL_ALLREDUCE, y->data, 10, MP_F64, MP_REDOP_MAX,
                           "the captured max");
    if (st == MP_OK)
        st = mp_comm_coll_start(&comm, ops, &m, &ticket);
    if (st == MP_OK)
        st = mp_comm_coll_order(&comm, ticket, &waited);
    if (st == MP_OK && waited)
        st = mp_fail(MP_EINTERNAL, "the host waited inside the capture");
    mp_status end = mp_comm_capture_end(&comm);
    void *g = mp_standin_capture_end(stream);
    if (st == MP_OK && end != MP_OK)
        st = end;
    if (st == MP_OK && !g)
        st = mp_fail(MP_EINTERNAL, "the stand-in refused the capture");
    if (st != MP_OK) {
        mp_standin_graph_free(g);
        return NULL;
    }
    return g;
}

/* Step k's inputs: rank r's x[i] = standin_value(i, r) * (k + 1), y[j] = r * 10 + j + k. */
static void step_inputs(const mp_ops *ops, mp_tensor *x, mp_tensor *y, int k)
{
    float hx[1000];
    double hy[10];
    for (int i = 0; i < 1000; i++)
        hx[i] = (float)(standin_value(i, comm.rank) * (k + 1));
    for (int j = 0; j < 10; j++)
        hy[j] = comm.rank * 10 + j + k;
    assert_int_equal(ops->copy_in(x->data, hx, sizeof hx), MP_OK);
    assert_int_equal(ops->copy_in(y->data, hy, sizeof hy), MP_OK);
}

/* Wrong elements of step k's results: the rank-order float sum, the max. */
static int step_wrong(const mp_ops *ops, const mp_tensor *x, const mp_tensor *y, int k)
{
    float hx[1000];
    double hy[10];
    assert_int_equal(ops->copy_out(hx, x->data, sizeof hx), MP_OK);
    assert_int_equal(ops->copy_out(hy, y->data, sizeof hy), MP_OK);
    int wrong = 0;
    for (int i = 0; i < 1000; i++) {
        float want = (float)(standin_value(i, 0) * (k + 1));
        for (int r = 1; r < comm.size; r++)
            want += (float)(standin_value(i, r) * (k + 1));
        wrong += hx[i] != want;
    }
    for (int j = 0; j < 10; j++)
        wrong += hy[j] != (double)((comm.size - 1) * 10 + j + k);
    return wrong;
}

/* A graph of the compute stream holding the NCCL transport's collectives (capture mode): the
 * capture runs nothing and issues no ticket; each of three launches, with new inputs written
 * before it, sums and maxes them (the values of the launch, not of the capture), as one ticket
 * the host can wait for; an eager collective after the launches still works. Inside a capture,
 * a host collective and a host wait are refused, and a capture whose collectives are not
 * joined back fails at its end; NCCL_GRAPH_MIXING_SUPPORT=0 refuses a capture (MP_EUSAGE). */
static void test_captured(void **state)
{
    (void)state;
    standin_open_device();
    mp_ops ops = standin_graph_ops();
    int64_t shape[1] = {1000}, shape_y[1] = {10};
    mp_tensor x = mp_tensor_new(&ops, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    mp_tensor y = mp_tensor_new(&ops, MP_F64, 1, shape_y, MP_MEM_WORKSPACE);
    assert_int_equal(standin_wrong(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0), 0);
    uint64_t before = comm.dissued;
    long launches = mp_standin_launches();
    step_inputs(&ops, &x, &y, 0);
    void *g = capture_step(&ops, &x, &y);
    if (!g)
        fail_msg("%s", mp_error_message());
    assert_int_equal(comm.dissued, before); /* captured, not issued */
    assert_int_equal(mp_standin_launches(), launches + 5);
    mp_nap(0.05); /* time for a stream that ran it anyway */
    float hx[1000];
    assert_int_equal(ops.copy_out(hx, x.data, sizeof hx), MP_OK);
    for (int i = 0; i < 1000; i++)
        assert_true(hx[i] == (float)standin_value(i, comm.rank));
    for (int k = 1; k <= 3; k++) {
        step_inputs(&ops, &x, &y, k);
        assert_int_equal(mp_comm_graph_launch(&comm, &ops, g, "the step's graph"), MP_OK);
        assert_int_equal(comm.dissued, before + (uint64_t)k);
        if (mp_comm_device_wait(&comm, comm.dissued) != MP_OK)
            fail_msg("%s", mp_error_message());
        assert_int_equal(standin_total(step_wrong(&ops, &x, &y, k)), 0);
    }
    assert_int_equal(standin_wrong(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0), 0);

    assert_int_equal(mp_comm_capture_begin(&comm, &ops), MP_OK);
    mp_standin_capture_begin(stream);
    double one = 1.0;
    uint64_t ticket = 0;
    mp_coll h = mp_coll_of(MP_COLL_ALLREDUCE, &one, 1, MP_F64, MP_REDOP_SUM, "a host sum");
    assert_int_equal(mp_comm_coll_start(&comm, NULL, &h, &ticket), MP_EINTERNAL);
    mp_coll c = mp_coll_of(MP_COLL_ALLREDUCE, x.data, 10, MP_F32, MP_REDOP_SUM, "unjoined");
    assert_int_equal(mp_comm_coll_start(&comm, &ops, &c, &ticket), MP_OK);
    assert_int_equal(mp_comm_coll_wait(&comm, ticket), MP_EINTERNAL);
    comm.capture = NULL; /* ends the mode without joining the collective back */
    assert_null(mp_standin_capture_end(stream));
    assert_int_equal(mp_comm_capture_begin(&comm, &ops), MP_EINTERNAL); /* the transport's mode */
    /* the mode ends; the join, now outside the capture, fails the capture alone */
    assert_int_not_equal(comm.dtx.ops->capture(comm.dtx.self, false), MP_OK);
    assert_false(comm.broken);
    assert_int_equal(standin_wrong(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0), 0);
    setenv("NCCL_GRAPH_MIXING_SUPPORT", "0", 1); /* eager collectives beside a graph's: refused */
    assert_int_equal(mp_comm_capture_begin(&comm, &ops), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "NCCL_GRAPH_MIXING_SUPPORT=0"));
    assert_null(comm.capture);
    unsetenv("NCCL_GRAPH_MIXING_SUPPORT");
    mp_standin_graph_free(g);
    mp_comm_drop_device(&comm);
    mp_tensor_delete(&ops, &x);
    mp_tensor_delete(&ops, &y);
}

int main(int argc, char **argv)
{
    stream = mp_standin_stream();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_captured),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}

#else

int main(void)
{
    fprintf(stderr, "test_nccl_standin_graph: this build has no CUDA, so no NCCL headers: "
                    "skipped\n");
    return 77;
}

#endif
