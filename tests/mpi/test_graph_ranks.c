// np: 2 3
/* A step's capture on several ranks (src/train_graph.c: mp_train_graph_run), on the staged CPU
 * backend with the device path's second MPI transport (comm/comm_device.c): the ranks agree
 * after each capture whether every rank's succeeded, so that all launch the graph or none does.
 * The last rank's body asks the host for a value (copy_out, which no capture holds, as a
 * library call CUDA cannot capture): under "auto" every rank, also those whose capture
 * succeeded, drops its graph and runs the step eagerly, and no capture is tried again; under
 * "on" every rank fails, the last with the op's message, the others naming the last rank. When
 * every capture succeeds, the graph holds the body's all-reduce: the capture runs nothing, and
 * each launch sums what the ranks hold at that launch. When a workspace moved on the last rank
 * alone (an op at a larger shape in the steps between), every rank captures again before the
 * next launch of each kind (also the second kind of a step of two micro-batches). */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdio.h>
#include <string.h>

static mp_comm comm;

enum { ONE = MP_GRAPH_FIRST | MP_GRAPH_LAST }; /* a step of one micro-batch */

typedef struct body_state {
    int calls;
    bool wait;  /* the body asks the host for a value (copy_out): no capture holds that */
    float *dev; /* 4 elements of staged memory */
    float host;
} body_state;

/* dev[i] = rank + calls, summed over the ranks by a device all-reduce; with `wait`, dev[0] to
 * the host. */
static mp_status body(mp_trainer *t, void *arg)
{
    body_state *b = arg;
    b->calls++;
    mp_tensor x = {.data = b->dev, .dtype = MP_F32, .ndim = 1, .shape = {4}};
    MP_TRY(t->ops->fill(&x, (double)(t->comm->rank + b->calls)));
    mp_coll c = mp_coll_of(MP_COLL_ALLREDUCE, b->dev, 4, MP_F32, MP_REDOP_SUM, "the body's sum");
    uint64_t ticket = 0;
    bool waited = false;
    MP_TRY(mp_comm_coll_start(t->comm, t->ops, &c, &ticket));
    MP_TRY(mp_comm_coll_order(t->comm, ticket, &waited));
    return b->wait ? t->ops->copy_out(&b->host, b->dev, sizeof b->host) : MP_OK;
}

static void trainer(mp_trainer *t, bool insist)
{
    memset(t, 0, sizeof *t);
    t->ops = mp_backend_cpu_staged();
    t->comm = &comm;
    t->graph = (mp_train_graph){
        .allowed = true, .insist = insist, .captured_at = -1, .launched_at = {-1, -1, -1, -1}};
}

/* The sum over ranks of rank + calls. */
static float sum(int calls)
{
    return (float)(comm.size * calls + comm.size * (comm.size - 1) / 2);
}

static void test_one_rank_fails(void **state)
{
    (void)state;
    assert_int_equal(mp_comm_use_device(&comm, 0, NULL), MP_OK);
    bool last = comm.rank == comm.size - 1;
    for (int insist = 0; insist < 2; insist++) {
        mp_trainer t;
        trainer(&t, insist);
        assert_true(mp_comm_can_capture(&comm, t.ops));
        body_state b = {.wait = last};
        b.dev = t.ops->mem_alloc(4 * sizeof(float), MP_MEM_WORKSPACE);
        mp_status st = mp_train_graph_run(&t, 4, ONE, 8, 1, body, &b);
        assert_null(t.graph.exec[ONE]);
        assert_int_equal(t.graph.launches, 0);
        if (insist) {
            assert_int_equal(st, MP_EINTERNAL);
            char want[64];
            snprintf(want, sizeof want, "the capture failed on rank %d", comm.size - 1);
            assert_non_null(strstr(mp_error_message(), last ? "copy_out" : want));
            assert_int_equal(b.calls, 1);
        } else {
            assert_int_equal(st, MP_OK);
            assert_int_equal(b.calls, 2); /* captured (or tried), then run eagerly */
            assert_true(b.dev[0] == sum(2) && b.dev[3] == sum(2));
            assert_false(t.graph.allowed);
            assert_false(mp_train_graph_wanted(&t));
        }
        assert_false(comm.broken);
        t.ops->mem_free(b.dev);
    }
    mp_comm_drop_device(&comm);
}

static void test_all_capture(void **state)
{
    (void)state;
    assert_int_equal(mp_comm_use_device(&comm, 0, NULL), MP_OK);
    mp_trainer t;
    trainer(&t, true);
    body_state b = {0};
    b.dev = t.ops->mem_alloc(4 * sizeof(float), MP_MEM_WORKSPACE);
    for (int step = 0; step < 3; step++) {
        mp_tensor x = {.data = b.dev, .dtype = MP_F32, .ndim = 1, .shape = {4}};
        assert_int_equal(t.ops->fill(&x, -100.0), MP_OK);
        assert_int_equal(mp_train_graph_run(&t, step, ONE, 8, 1, body, &b), MP_OK);
        assert_true(b.dev[0] == sum(1) && b.dev[3] == sum(1)); /* the capture's fill, summed */
    }
    assert_int_equal(b.calls, 1);
    assert_int_equal(t.graph.launches, 3);
    mp_train_graph_free(&t);
    t.ops->mem_free(b.dev);
    mp_comm_drop_device(&comm);
}

/* Grows a workspace of the staged backend (BatchNorm + ReLU's mask without dx at a size larger
 * at each call). */
static void move_workspace(const mp_ops *ops)
{
    static int64_t rows = 1 << 16;
    rows *= 2;
    int64_t s[2] = {rows, 2}, cs[1] = {2};
    mp_tensor big = mp_test_rand(MP_F32, 2, s, NULL, 1, 1);
    mp_tensor c = mp_test_rand(MP_F32, 1, cs, NULL, 1, 1);
    mp_bn_args bn = {.eps = 1e-5, .relu = true};
    assert_int_equal(ops->batchnorm_backward(&bn, &big, &big, &big, &c, &c, &c, NULL, &c, &c),
                     MP_OK);
    mp_tensor_free(&big);
    mp_tensor_free(&c);
}

/* Steps 0-2 launched, a workspace moved on the last rank alone, then step 4: with one kind of
 * micro-batch (ONE), and with two (FIRST then LAST: a step of 2 micro-batches, where the second
 * kind's launch follows the first's within the step). */
static void test_recapture_together(void **state)
{
    (void)state;
    assert_int_equal(mp_comm_use_device(&comm, 0, NULL), MP_OK);
    double timeout = comm.timeout_s;
    comm.timeout_s = 10.0; /* a rank left alone in a collective fails soon */
    for (int kinds = 1; kinds <= 2; kinds++) {
        const int kind[2] = {kinds == 1 ? ONE : MP_GRAPH_FIRST, MP_GRAPH_LAST};
        mp_trainer t;
        trainer(&t, true);
        body_state b = {0};
        b.dev = t.ops->mem_alloc(4 * sizeof(float), MP_MEM_WORKSPACE);
        for (int step = 0; step < 3; step++)
            for (int i = 0; i < kinds; i++)
                assert_int_equal(mp_train_graph_run(&t, step, kind[i], 8, kinds, body, &b), MP_OK);
        if (comm.rank == comm.size - 1) /* an eager step's op at another shape, here alone */
            move_workspace(t.ops);
        assert_int_equal(t.ops->graph_valid(t.graph.exec[kind[0]]), comm.rank != comm.size - 1);
        for (int i = 0; i < kinds; i++)
            assert_int_equal(mp_train_graph_run(&t, 4, kind[i], 8, kinds, body, &b), MP_OK);
        assert_int_equal(b.calls, 2 * kinds); /* every rank captured each kind again */
        assert_int_equal(t.graph.captures, 2 * kinds);
        assert_true(b.dev[0] == sum(2 * kinds) && b.dev[3] == sum(2 * kinds));
        assert_int_equal(t.graph.launches, 4 * kinds);
        mp_train_graph_free(&t);
        t.ops->mem_free(b.dev);
    }
    comm.timeout_s = timeout;
    mp_comm_drop_device(&comm);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_fails),
        cmocka_unit_test(test_all_capture),
        cmocka_unit_test(test_recapture_together),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
