/* Graphs on the staged CPU backend (engine/backend_cpu/graph.c; engine/op_list.h's graph ops),
 * which record and replay as CUDA's stream capture does:
 *   - nothing runs while capturing; a launch runs the ops in order and gives the eager bits, and
 *     reads memory as it is at the launch (a new batch copied into the same buffer, copy_in's
 *     host block as it is then);
 *   - what was passed by value is fixed at the capture: a scalar or a tensor struct the host
 *     changes afterwards is not seen, while a rate and a step index set with amp_step_values
 *     before each launch are (the optimizer with mp_optim_args.lr_from_state; dropout given
 *     &st->mask_step), bitwise as eager steps with those rates and host offsets;
 *   - ops that wait for the host or hand it a value fail inside a capture, which then fails at
 *     graph_end with their message; softmax_xent is captured without a result for the host;
 *   - a capture is the calling thread's: another thread's fence wait runs meanwhile;
 *   - the plain CPU backend has no graphs (MP_EUSAGE). */
#include "tests/util/test_util.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "engine/ops.h"
#include "engine/rng.h"

static const mp_ops *ops;

static mp_tensor vec(mp_dtype dt, int64_t n, double lo, double hi, uint64_t seed)
{
    mp_rng r;
    mp_rng_seed(&r, 33, seed);
    int64_t s[1] = {n};
    return mp_test_rand(dt, 1, s, &r, lo, hi);
}

static bool same(const mp_tensor *a, const mp_tensor *b)
{
    return mp_tensor_bytes(a) == mp_tensor_bytes(b) &&
           memcmp(a->data, b->data, (size_t)mp_tensor_bytes(a)) == 0;
}

/* y = relu(2.5 (a + b)) by add, scale and relu_forward, then its copy into z. */
static mp_status chain(const mp_tensor *a, const mp_tensor *b, mp_tensor *y, mp_tensor *z,
                       double alpha)
{
    MP_TRY(ops->add(a, b, y));
    MP_TRY(ops->scale(y, alpha));
    MP_TRY(ops->relu_forward(y, y));
    return ops->copy(z->data, y->data, (size_t)mp_tensor_bytes(y));
}

static void test_replay_reads_memory_at_launch(void **state)
{
    (void)state;
    mp_tensor a = vec(MP_F16, 1000, -1, 1, 1), b = vec(MP_F16, 1000, -1, 1, 2);
    mp_tensor y = vec(MP_F16, 1000, 0, 0, 3), z = vec(MP_F16, 1000, 0, 0, 4);
    mp_tensor want = vec(MP_F16, 1000, 0, 0, 5), wz = vec(MP_F16, 1000, 0, 0, 6);
    double alpha = 2.5;
    mp_tensor ya = y; /* the struct the capture sees; pointed elsewhere afterwards */
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(chain(&a, &b, &ya, &z, alpha), MP_OK);
    void *g = NULL;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    assert_non_null(g);
    mp_tensor zero = vec(MP_F16, 1000, 0, 0, 7);
    assert_true(same(&z, &zero)); /* nothing ran */
    alpha = -1.0;       /* by value: the capture keeps 2.5 */
    ya.data = want.data; /* the struct was copied: the capture keeps y's storage */
    for (int round = 0; round < 2; round++) {
        assert_int_equal(ops->graph_launch(g), MP_OK);
        assert_int_equal(chain(&a, &b, &want, &wz, 2.5), MP_OK);
        assert_true(same(&y, &want));
        assert_true(same(&z, &wz));
        mp_tensor next = vec(MP_F16, 1000, -1, 1, 8 + (uint64_t)round); /* a new batch */
        memcpy(a.data, next.data, (size_t)mp_tensor_bytes(&a));
        mp_tensor_free(&next);
    }
    ops->graph_free(g);
    mp_tensor *all[] = {&a, &b, &y, &z, &want, &wz, &zero};
    for (int i = 0; i < 7; i++)
        mp_tensor_free(all[i]);
}

/* copy_in's host block (host_alloc's: pinned on a GPU) is read at each launch, as a CUDA memcpy
 * node reads it; a copy from other host memory, and memory allocated or freed, fail the capture
 * as on a GPU. */
static void test_copy_in_reads_host_at_launch(void **state)
{
    (void)state;
    float *host = ops->host_alloc(4 * sizeof(float), MP_MEM_WORKSPACE);
    float *dev = ops->mem_alloc(4 * sizeof(float), MP_MEM_WORKSPACE), pageable[4] = {0};
    host[0] = 1, host[2] = 3;
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->copy_in(dev, host, 4 * sizeof(float)), MP_OK);
    void *g;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    host[2] = 30;
    assert_int_equal(ops->graph_launch(g), MP_OK);
    assert_true(dev[0] == 1 && dev[2] == 30);
    ops->graph_free(g);
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->copy_in(dev, pageable, sizeof pageable), MP_EINTERNAL);
    assert_int_equal(ops->graph_end(&g), MP_EINTERNAL);
    assert_non_null(strstr(mp_error_message(), "not from host_alloc"));
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ops->graph_begin(), MP_OK);
        void *p = k == 0 ? ops->mem_alloc(64, MP_MEM_WORKSPACE) : NULL;
        if (k == 1)
            ops->mem_free(dev);
        assert_int_equal(ops->graph_end(&g), MP_EINTERNAL);
        assert_non_null(strstr(mp_error_message(), k == 0 ? "mem_alloc" : "mem_free"));
        ops->mem_free(p);
    }
    ops->host_free(host);
}

/* A graph is valid until a workspace moves (a later op at a larger shape grows one). */
static void test_valid_until_a_workspace_moves(void **state)
{
    (void)state;
    mp_tensor a = vec(MP_F32, 100, -1, 1, 31), y = vec(MP_F32, 100, 0, 0, 32);
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->relu_forward(&a, &y), MP_OK);
    void *g;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    assert_true(ops->graph_valid(g));
    assert_int_equal(ops->graph_launch(g), MP_OK);
    assert_true(ops->graph_valid(g));
    /* BatchNorm + ReLU's backward without dx takes a workspace of dy's size: a new one grows */
    int64_t s[2] = {4096, 3}, cs[1] = {3};
    mp_tensor g1 = mp_test_rand(MP_F32, 1, cs, NULL, 1, 1);
    mp_tensor d1 = mp_test_rand(MP_F32, 1, cs, NULL, 0, 0);
    mp_tensor d2 = mp_test_rand(MP_F32, 1, cs, NULL, 0, 0);
    mp_bn_args bn = {.eps = 1e-5, .relu = true};
    for (int k = 0; k < 2 && ops->graph_valid(g); k++) {
        s[0] *= 4;
        mp_tensor big = mp_test_rand(MP_F32, 2, s, NULL, 1, 1);
        assert_int_equal(ops->batchnorm_backward(&bn, &big, &big, &big, &g1, &g1, &g1, NULL, &d1,
                                                 &d2),
                         MP_OK);
        mp_tensor_free(&big);
    }
    assert_false(ops->graph_valid(g));
    assert_false(mp_backend_cpu()->graph_valid(g));
    ops->graph_free(g);
    mp_tensor *all[] = {&a, &y, &g1, &d1, &d2};
    for (int i = 0; i < 5; i++)
        mp_tensor_free(all[i]);
}

/* SGD with momentum for 4 steps at rates r_k set with amp_step_values before each launch of one captured
 * step equals 4 eager steps at those rates, bit for bit; the rate in mp_optim_args is the one
 * the capture saw and goes unused. */
static void test_rate_from_state(void **state)
{
    (void)state;
    const double rates[4] = {0.1, 0.07, 0.02, 0.5};
    mp_tensor w1 = vec(MP_F32, 777, -1, 1, 11), m1 = vec(MP_F32, 777, 0, 0, 12);
    mp_tensor w2 = vec(MP_F32, 777, -1, 1, 11), m2 = vec(MP_F32, 777, 0, 0, 12);
    mp_tensor gr = vec(MP_F16, 777, -1, 1, 13);
    mp_amp_state *st = ops->mem_alloc(sizeof *st, MP_MEM_WORKSPACE);
    mp_amp_state *est = ops->mem_alloc(sizeof *est, MP_MEM_WORKSPACE);
    st->scaler.scale = est->scaler.scale = 1.0;
    mp_optim_args a = {.kind = MP_OPTIM_SGD, .lr = 123.0, .momentum = 0.9, .weight_decay = 1e-4,
                       .grad_scale = 1.0, .lr_from_state = true};
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->optim_step(&a, st, &w1, NULL, &gr, &m1, NULL), MP_OK);
    void *g;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    for (int k = 0; k < 4; k++) {
        st->steps = est->steps = k; /* the optimizer counts this step as steps + 1 */
        assert_int_equal(ops->amp_step_values(st, rates[k], k), MP_OK);
        assert_int_equal(ops->graph_launch(g), MP_OK);
        mp_optim_args e = a;
        e.lr = rates[k];
        e.lr_from_state = false;
        assert_int_equal(ops->optim_step(&e, est, &w2, NULL, &gr, &m2, NULL), MP_OK);
        assert_true(same(&w1, &w2));
        assert_true(same(&m1, &m2));
    }
    ops->graph_free(g);
    ops->mem_free(st);
    ops->mem_free(est);
    mp_tensor *all[] = {&w1, &m1, &w2, &m2, &gr};
    for (int i = 0; i < 5; i++)
        mp_tensor_free(all[i]);
}

/* Dropout captured with the step read from st->mask_step (offset 0) and launched after
 * amp_step_values(st, ., k) for steps k gives, forward and backward, the eager ops' bits at the
 * host offset k 2^32; successive steps draw different masks. */
static void test_mask_step_from_state(void **state)
{
    (void)state;
    const int64_t steps[3] = {0, 7, 123456789};
    mp_tensor x = vec(MP_F16, 5000, 0.5, 1, 31), y = vec(MP_F16, 5000, 0, 0, 32);
    mp_tensor dx = vec(MP_F16, 5000, 0, 0, 33), want = vec(MP_F16, 5000, 0, 0, 34);
    mp_tensor wdx = vec(MP_F16, 5000, 0, 0, 35), last = vec(MP_F16, 5000, 0, 0, 36);
    mp_amp_state *st = ops->mem_alloc(sizeof *st, MP_MEM_WORKSPACE);
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->dropout_forward(0.4, 99, 0, &st->mask_step, &x, &y), MP_OK);
    assert_int_equal(ops->dropout_backward(0.4, 99, 0, &st->mask_step, &x, &dx), MP_OK);
    void *g;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ops->amp_step_values(st, 0.1, steps[k]), MP_OK);
        assert_int_equal(ops->graph_launch(g), MP_OK);
        uint64_t off = (uint64_t)steps[k] << 32;
        assert_int_equal(ops->dropout_forward(0.4, 99, off, NULL, &x, &want), MP_OK);
        assert_int_equal(ops->dropout_backward(0.4, 99, off, NULL, &x, &wdx), MP_OK);
        assert_int_equal(ops->sync(), MP_OK);
        assert_true(same(&y, &want));
        assert_true(same(&dx, &wdx));
        if (k > 0)
            assert_false(same(&y, &last));
        assert_int_equal(ops->copy(last.data, y.data, (size_t)mp_tensor_bytes(&y)), MP_OK);
        assert_int_equal(ops->sync(), MP_OK);
    }
    ops->graph_free(g);
    ops->mem_free(st);
    mp_tensor *all[] = {&x, &y, &dx, &want, &wdx, &last};
    for (int i = 0; i < 6; i++)
        mp_tensor_free(all[i]);
}

/* Each op that waits or hands the host a value fails inside a capture, and graph_end then fails
 * with its message; the backend is usable afterwards. */
static void test_host_waits_refused(void **state)
{
    (void)state;
    mp_tensor x = vec(MP_F32, 64, -1, 1, 21), logits = vec(MP_F32, 40, -1, 1, 22);
    logits.ndim = 2, logits.shape[0] = 4, logits.shape[1] = 10;
    mp_tensor dl = logits;
    dl.data = ops->mem_alloc((size_t)mp_tensor_bytes(&logits), MP_MEM_WORKSPACE);
    int32_t labels[4] = {1, 2, 3, 4};
    float host[64];
    double sumsq;
    bool bad;
    void *fence = NULL;
    mp_xent_result res;
    for (int k = 0; k < 6; k++) {
        assert_int_equal(ops->graph_begin(), MP_OK);
        mp_status st = k == 0   ? ops->copy_out(host, x.data, sizeof host)
                       : k == 1 ? ops->sync()
                       : k == 2 ? ops->grad_stats(&x, 1.0, &sumsq, &bad)
                       : k == 3 ? ops->fence_record(&fence)
                       : k == 4 ? ops->softmax_xent(&logits, labels, 0.0, 1.0, NULL, &res, &dl)
                                : ops->mark_record(&fence);
        assert_int_equal(st, MP_EINTERNAL);
        assert_non_null(strstr(mp_error_message(), "graph capture"));
        void *g = (void *)1;
        assert_int_equal(ops->graph_end(&g), MP_EINTERNAL);
        assert_null(g);
        assert_non_null(strstr(mp_error_message(), "which a graph cannot hold"));
    }
    /* the loss without a result for the host is captured */
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->softmax_xent(&logits, labels, 0.0, 1.0, NULL, NULL, &dl), MP_OK);
    void *g;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    assert_int_equal(ops->graph_launch(g), MP_OK);
    ops->graph_free(g);
    assert_int_equal(ops->copy_out(host, x.data, sizeof host), MP_OK); /* usable again */
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->graph_begin(), MP_EINTERNAL); /* one capture at a time */
    assert_int_equal(ops->graph_end(&g), MP_OK);
    ops->graph_free(g);
    assert_int_equal(ops->graph_end(&g), MP_EINTERNAL); /* none open */
    ops->mem_free(dl.data);
    mp_tensor_free(&x);
    mp_tensor_free(&logits);
}

static void *other_thread(void *arg)
{
    void **fence = arg;
    return (void *)(intptr_t)ops->fence_wait(*fence);
}

/* A capture is the calling thread's: a loader thread's fence wait meanwhile runs. */
static void test_capture_is_per_thread(void **state)
{
    (void)state;
    void *fence = NULL;
    assert_int_equal(ops->fence_record(&fence), MP_OK);
    assert_int_equal(ops->graph_begin(), MP_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, &fence), 0);
    void *rc;
    pthread_join(th, &rc);
    assert_int_equal((int)(intptr_t)rc, MP_OK);
    void *g;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    ops->graph_free(g);
    ops->fence_free(fence);
}

/* graph_call's callee: adds the argument's step to the counter it points at. */
typedef struct call_arg {
    int *counter;
    int step;
} call_arg;

static mp_status count_call(const void *arg)
{
    const call_arg *a = arg;
    *a->counter += a->step;
    return a->step < 0 ? mp_fail(MP_ECOMM, "the call failed") : MP_OK;
}

/* graph_call (a collective in a staged graph): recorded with a copy of its argument, called at
 * each launch in its place among the ops (after the op before it, before the one after), not at
 * the capture; a failure it returns fails the launch. Outside a capture it runs at once. */
static void test_host_call_at_launch(void **state)
{
    (void)state;
    float *dev = ops->mem_alloc(sizeof(float), MP_MEM_WORKSPACE);
    int64_t shape[1] = {1};
    mp_tensor x = mp_tensor_view(dev, MP_F32, 1, shape);
    int counter = 0;
    call_arg a = {&counter, 5};
    assert_int_equal(ops->graph_call(count_call, &a, sizeof a), MP_OK);
    assert_int_equal(counter, 5);
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->fill(&x, 2.0), MP_OK);
    assert_int_equal(ops->graph_call(count_call, &a, sizeof a), MP_OK);
    a.step = 100; /* the graph holds its copy */
    assert_int_equal(ops->scale(&x, 3.0), MP_OK);
    void *g;
    assert_int_equal(ops->graph_end(&g), MP_OK);
    assert_int_equal(counter, 5);
    for (int k = 1; k <= 2; k++) {
        assert_int_equal(ops->graph_launch(g), MP_OK);
        assert_int_equal(counter, 5 + 5 * k);
        assert_true(*dev == 6.0f);
    }
    ops->graph_free(g);
    a.step = -1;
    assert_int_equal(ops->graph_begin(), MP_OK);
    assert_int_equal(ops->graph_call(count_call, &a, sizeof a), MP_OK);
    assert_int_equal(ops->graph_end(&g), MP_OK);
    assert_int_equal(ops->graph_launch(g), MP_ECOMM);
    assert_non_null(strstr(mp_error_message(), "the call failed"));
    ops->graph_free(g);
    ops->mem_free(dev);
}

static void test_plain_cpu_has_none(void **state)
{
    (void)state;
    assert_int_equal(mp_backend_cpu()->graph_begin(), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "MPDIST_CPU_STAGED=1"));
}

int main(void)
{
    ops = mp_backend_cpu_staged();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_reads_memory_at_launch),
        cmocka_unit_test(test_copy_in_reads_host_at_launch),
        cmocka_unit_test(test_valid_until_a_workspace_moves),
        cmocka_unit_test(test_rate_from_state),
        cmocka_unit_test(test_mask_step_from_state),
        cmocka_unit_test(test_host_waits_refused),
        cmocka_unit_test(test_capture_is_per_thread),
        cmocka_unit_test(test_host_call_at_launch),
        cmocka_unit_test(test_plain_cpu_has_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
