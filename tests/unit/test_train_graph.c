/* A step's capture that fails (src/train_graph.c: mp_train_graph_run), on the staged CPU
 * backend, with a body whose op waits for the host as a library call CUDA cannot capture would:
 * under "auto" the run goes on eagerly (the body runs once more, now for real, and no capture
 * is tried again); under "on" the op's error (naming the op) ends the run. A body that captures
 * is launched, and the launch is what runs it; a batch of other rows, or of a step of another
 * number of micro-batches, runs eagerly; each kind of micro-batch has a graph of its own; once
 * a workspace moves, the step is captured anew before the next launch. */
#include "tests/util/test_util.h"

#include <string.h>

#include "src/train.h"

enum { ONE = MP_GRAPH_FIRST | MP_GRAPH_LAST }; /* a step of one micro-batch */

typedef struct body_state {
    int calls;
    bool wait; /* the body asks the host for a value (copy_out): no capture holds that */
    float *dev, host;
} body_state;

static mp_status body(mp_trainer *t, void *arg)
{
    body_state *b = arg;
    b->calls++;
    MP_TRY(t->ops->fill(&(mp_tensor){.data = b->dev, .dtype = MP_F32, .ndim = 1, .shape = {1}},
                        (double)b->calls));
    return b->wait ? t->ops->copy_out(&b->host, b->dev, sizeof b->host) : MP_OK;
}

static void trainer(mp_trainer *t, mp_comm *comm, bool insist)
{
    memset(t, 0, sizeof *t);
    memset(comm, 0, sizeof *comm);
    t->ops = mp_backend_cpu_staged();
    t->comm = comm;
    t->graph = (mp_train_graph){
        .allowed = true, .insist = insist, .captured_at = -1, .launched_at = {-1, -1, -1, -1}};
}

static void test_failed_capture(void **state)
{
    (void)state;
    mp_trainer t;
    mp_comm comm;
    for (int insist = 0; insist < 2; insist++) {
        trainer(&t, &comm, insist);
        body_state b = {.wait = true};
        b.dev = t.ops->mem_alloc(sizeof(float), MP_MEM_WORKSPACE);
        assert_true(mp_train_graph_wanted(&t));
        mp_status st = mp_train_graph_run(&t, 4, ONE, 8, 1, body, &b);
        if (insist) {
            assert_int_equal(st, MP_EINTERNAL);
            assert_non_null(strstr(mp_error_message(), "copy_out"));
            assert_int_equal(b.calls, 1);
            assert_true(*b.dev == 0.0f); /* the captured fill never ran */
        } else {
            assert_int_equal(st, MP_OK);
            assert_int_equal(b.calls, 2);
            assert_true(*b.dev == 2.0f && b.host == 2.0f); /* the eager run's */
            assert_false(t.graph.allowed);
            assert_false(mp_train_graph_wanted(&t));
        }
        assert_null(t.graph.exec[ONE]);
        assert_int_equal(t.graph.launches, 0);
        t.ops->mem_free(b.dev);
    }
}

static void test_capture_then_launch(void **state)
{
    (void)state;
    mp_trainer t;
    mp_comm comm;
    trainer(&t, &comm, true);
    body_state b = {0};
    b.dev = t.ops->mem_alloc(sizeof(float), MP_MEM_WORKSPACE);
    for (int step = 0; step < 3; step++)
        assert_int_equal(mp_train_graph_run(&t, step, ONE, 8, 1, body, &b), MP_OK);
    assert_int_equal(b.calls, 1); /* captured once, its fill of 1 launched three times */
    assert_true(*b.dev == 1.0f);
    assert_int_equal(t.graph.launches, 3);
    assert_int_equal(t.graph.captured_at, 0);
    assert_int_equal(mp_train_graph_run(&t, 3, ONE, 7, 1, body, &b), MP_OK);
    assert_int_equal(b.calls, 2); /* a shorter batch ran eagerly: its fill of 2 */
    assert_true(*b.dev == 2.0f);
    assert_int_equal(t.graph.launches, 3);
    assert_int_equal(mp_train_graph_run(&t, 3, MP_GRAPH_FIRST, 8, 2, body, &b), MP_OK);
    assert_int_equal(b.calls, 3); /* another kind: a graph of its own (its fill of 3) */
    assert_true(*b.dev == 3.0f);
    assert_int_equal(t.graph.captures, 2);
    assert_int_equal(mp_train_graph_run(&t, 3, MP_GRAPH_FIRST, 8, 3, body, &b), MP_OK);
    assert_int_equal(b.calls, 4); /* a step of 3 micro-batches, not 2: eagerly (its fill of 4) */
    assert_true(*b.dev == 4.0f);
    assert_int_equal(t.graph.launches, 4);
    assert_int_equal(mp_train_graph_run(&t, 3, ONE, 8, 1, body, &b), MP_OK);
    assert_true(*b.dev == 1.0f); /* ONE's graph is still its own */
    /* an op at a larger shape grows a workspace (BatchNorm + ReLU's mask without dx) */
    int64_t s[2] = {1 << 16, 2}, cs[1] = {2};
    mp_tensor big = mp_test_rand(MP_F32, 2, s, NULL, 1, 1);
    mp_tensor c = mp_test_rand(MP_F32, 1, cs, NULL, 1, 1);
    mp_bn_args bn = {.eps = 1e-5, .relu = true};
    assert_int_equal(t.ops->batchnorm_backward(&bn, &big, &big, &big, &c, &c, &c, NULL, &c, &c),
                     MP_OK);
    assert_false(t.ops->graph_valid(t.graph.exec[ONE]));
    assert_int_equal(mp_train_graph_run(&t, 4, ONE, 8, 1, body, &b), MP_OK);
    assert_int_equal(b.calls, 5); /* captured again (its fill of 5), then launched */
    assert_true(*b.dev == 5.0f);
    assert_int_equal(t.graph.captures, 3);
    assert_int_equal(t.graph.captured_at, 0);
    assert_int_equal(t.graph.launches, 6);
    mp_tensor_free(&big);
    mp_tensor_free(&c);
    mp_train_graph_free(&t);
    assert_null(t.graph.exec[ONE]);
    assert_null(t.graph.exec[MP_GRAPH_FIRST]);
    t.ops->mem_free(b.dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_capture),
        cmocka_unit_test(test_capture_then_launch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
