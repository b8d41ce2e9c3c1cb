// np: 2
/* comm_hidden over NCCL (issue 46): the host never waits for the NCCL transport's sums, so
 * comm/buckets.c times them with the backend's clock marks (first start, backward's end, all
 * summed), two sets in turn, each read at the first start of the marked step after next. Here
 * the transport's own object code runs over the stand-in of tests/util/nccl_standin.h on the
 * staged CPU backend, whose marks are the host clock at the call: a step's "backward" sleeps
 * between its first and its other buckets, so the step two later must report at least that
 * sleep as comm_ms (first start to all summed) and less of it as exposed; the first two steps
 * report nothing; a step reports the step two before it, not its own; without overlap the first
 * start is backward's end, so the sleep is not in comm_ms; inside a capture nothing may be
 * marked; and after unmarked steps (graph launches) the next marked step reads the last marked
 * step's set. Built only where CUDA (and so NCCL's headers) is; elsewhere it exits 77. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdio.h>
#include <string.h>

#include "comm/buckets.h"
#include "comm/comm_device.h"
#include "comm/nap.h"
#include "engine/ops.h"
#include "engine/params.h"

#ifdef MP_HAVE_NCCL_STANDIN
#include "tests/util/nccl_standin.h"

static mp_comm comm;

/* 12 parameters of FP32 gradients on the staged backend (the device path of the communicator). */
static void make_params(mp_params *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        int64_t shape[1] = {1000 + 100 * i};
        mp_params_add(p, name, MP_GROUP_WEIGHTS, 1, shape);
    }
    mp_group_spec specs[MP_NGROUPS] = {{.model = MP_F32, .grad = MP_F32},
                                       {.model = MP_F32, .grad = MP_F32}};
    mp_params_alloc(p, mp_backend_cpu_staged(), specs);
}

/* One step: the first bucket ready, `sleep_s` of "backward", the rest ready, finished. */
static void step(mp_grad_sync *s, double sleep_s)
{
    mp_grad_sync_begin(s, false);
    assert_int_equal(mp_grad_sync_ready(s, s->params->count - 1), MP_OK);
    mp_nap(sleep_s);
    assert_int_equal(mp_grad_sync_ready(s, 0), MP_OK);
    mp_status st = mp_grad_sync_finish(s);
    if (st != MP_OK)
        fail_msg("%s", mp_error_message());
}

static void test_bucket_times(void **state)
{
    (void)state;
    mp_params p;
    make_params(&p);
    if (mp_comm_use_device(&comm, 0, mp_standin_stream()) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_string_equal(comm.dtx.ops->name, "nccl");
    assert_true(mp_comm_device_orders(&comm));
    mp_grad_sync s;
    mp_grad_sync_config cfg = {4096, 4096, -1, 1.0, true, false, false};
    assert_int_equal(mp_grad_sync_init(&s, &comm, mp_backend_cpu_staged(), &p, &cfg), MP_OK);
    assert_true(s.nbuckets > 2);
    step(&s, 0.02);
    assert_false(s.timed); /* the first two steps: nothing read yet */
    assert_true(s.comm_ms == 0.0 && s.exposed_ms == 0.0);
    step(&s, 0.12);
    assert_false(s.timed);
    step(&s, 0.0);
    assert_true(s.timed);
    assert_true(s.comm_ms >= 20.0 && s.comm_ms < 120.0); /* step 1's, its sleep included */
    assert_true(s.exposed_ms >= 0.0 && s.exposed_ms < s.comm_ms - 19.0);
    step(&s, 0.0);
    assert_true(s.timed && s.comm_ms >= 120.0); /* step 2's */
    /* inside a capture nothing may be marked (a mark waits for the host) */
    comm.capture = mp_backend_cpu_staged();
    assert_false(mp_comm_device_orders(&comm));
    comm.capture = NULL;
    s.cfg.overlap = false; /* every bucket starts at backward's end */
    step(&s, 0.05);
    assert_true(s.timed && s.comm_ms < 20.0); /* steps 3 and 4 had no sleep */
    step(&s, 0.0);
    assert_true(s.timed && s.comm_ms < 20.0);
    step(&s, 0.0);
    assert_true(s.timed && s.comm_ms < 20.0); /* step 5's: its sleep came before the first start */
    /* steps without marks (graph launches) between two marked steps: the next one reads the
     * last marked step's set, not the one before it */
    s.cfg.overlap = true;
    step(&s, 0.06);
    step(&s, 0.0);
    mp_grad_sync_unmarked(&s);
    step(&s, 0.0);
    assert_true(s.timed && s.comm_ms < 20.0); /* step 8's, not step 7's 60 ms */
    step(&s, 0.0);
    assert_false(s.timed); /* the older set was dropped: nothing to read */
    step(&s, 0.0);
    assert_true(s.timed && s.comm_ms < 20.0);
    step(&s, 0.05);
    mp_grad_sync_unmarked(&s); /* both sets pending: the older one dropped */
    step(&s, 0.0);
    assert_true(s.timed && s.comm_ms >= 50.0); /* the last marked step's, not the one before */
    mp_grad_sync_free(&s);
    mp_comm_drop_device(&comm);
    mp_params_free(&p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_times),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}

#else

int main(void)
{
    fprintf(stderr, "test_nccl_overlap: this build has no CUDA, so no NCCL headers: skipped\n");
    return 77;
}

#endif
