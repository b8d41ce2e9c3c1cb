// np: 2 4
/* The NCCL transport (comm/transport_nccl.c, the product's object code) on ranks without a GPU,
 * linked against the stand-in of tests/util/nccl_standin.h (issue 46): every collective of the
 * data plane in every dtype, whole blocked buffers and slices that cut the blocks, against the
 * MPI transport's bytes on the same inputs (bitwise on 2 ranks, where a sum is one rounding;
 * within the dtype's rounding of the rank-order sums on more); NCCL calls that stay in
 * progress for a while; a communicator that never forms on one rank (every rank fails alike
 * within comm.timeout_s); and an abort in the middle of a collective (the waiting caller is
 * released at once, and close frees everything); with log.trace on, each collective a span on
 * the "collectives" track. bench-comm's bare communicator: test_nccl_standin_raw.c; collectives
 * captured into a graph: test_nccl_standin_graph.c (the helpers they share:
 * tests/util/nccl_standin_cases.h).
 *   test_nccl_standin --drive STEPS   trains-like loop for tests/integration/nccl_standin.sh:
 *                                     STEPS all-reduces under the faults of MPDIST_NCCL_STANDIN,
 *                                     comm.timeout_s from MPDIST_STANDIN_TIMEOUT (default 3),
 *                                     MPDIST_STANDIN_STEP_S seconds of "compute" per step;
 *                                     a failure ends every rank as mpdist does (exit 6)
 * Built only where CUDA (and so NCCL's headers) is; elsewhere it exits 77 (skipped). */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/nap.h"
#include "engine/clock.h"
#include "engine/trace.h"
#include "engine/ops.h"

#ifdef MP_HAVE_NCCL_STANDIN
#include "tests/util/nccl_standin.h"
#include "tests/util/nccl_standin_cases.h"

/* Every collective, dtype, block size and slicing; returns the wrong elements over all ranks
 * and prints the first case that differs. */
static int64_t every_collective(void)
{
    const mp_dtype types[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const size_t blocks[] = {1, 7, 1000}, steps[] = {0, 5, 333};
    const struct { mp_coll_kind kind; mp_redop op; const char *name; } kinds[] = {
        {MP_COLL_REDUCE_SCATTER, MP_REDOP_SUM, "reduce-scatter"},
        {MP_COLL_ALLGATHER, MP_REDOP_SUM, "all-gather"},
        {MP_COLL_ALLREDUCE, MP_REDOP_SUM, "all-reduce sum"},
        {MP_COLL_ALLREDUCE, MP_REDOP_MAX, "all-reduce max"},
        {MP_COLL_BCAST, MP_REDOP_SUM, "broadcast"}};
    int64_t wrong = 0;
    for (size_t t = 0; t < 4; t++)
        for (size_t k = 0; k < 5; k++)
            for (size_t b = 0; b < 3; b++)
                for (size_t s = 0; s < 3; s++) {
                    bool half = types[t] == MP_F16 || types[t] == MP_BF16;
                    if (kinds[k].op == MP_REDOP_MAX && half) /* MPI sums halves only */
                        continue;
                    if ((kinds[k].kind == MP_COLL_ALLREDUCE || kinds[k].kind == MP_COLL_BCAST) &&
                        s > 0 && blocks[b] < 1000)
                        continue;
                    int64_t bad = standin_wrong(kinds[k].kind, kinds[k].op, types[t], blocks[b],
                                                steps[s]);
                    if (bad && !wrong && comm.rank == 0)
                        fprintf(stderr, "%s of %s, blocks of %zu, slices of %zu: %lld wrong "
                                "elements\n", kinds[k].name, mp_dtype_name(types[t]),
                                blocks[b], steps[s], (long long)bad);
                    wrong += bad;
                }
    return wrong;
}

static void test_every_collective(void **state)
{
    (void)state;
    long before = mp_standin_launches();
    standin_open_device();
    int64_t wrong = every_collective();
    mp_comm_drop_device(&comm);
    if (wrong)
        fail_msg("%lld elements differ from the MPI transport's", (long long)wrong);
    assert_true(mp_standin_launches() > before + 100); /* they went through the stand-in */
}

/* With a trace open, every collective of the NCCL transport is one span on the collectives
 * track (tid 1) under its own name, from its start to when the host saw it done. */
static void test_traced(void **state)
{
    (void)state;
    const char *dir = getenv("MPDIST_TEST_TMP");
    char path[512];
    snprintf(path, sizeof path, "%s/nccl-trace-%d-%d.json", dir && *dir ? dir : "/tmp",
             (int)getpid(), comm.rank);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    assert_int_equal(mp_trace_open(out, path, comm.rank, "standin", 0.0, mp_now()), MP_OK);
    const mp_ops *staged = mp_backend_cpu_staged();
    int64_t shape[1] = {1000};
    mp_tensor x = mp_tensor_new(staged, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    standin_open_device();
    standin_run(staged, MP_COLL_ALLREDUCE, MP_REDOP_SUM, x.data, 1000, MP_F32, 1000, 333); /* 4 */
    mp_comm_drop_device(&comm);
    mp_tensor_delete(staged, &x);
    assert_int_equal(mp_trace_close(), MP_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int spans = 0;
    while (fgets(line, sizeof line, f))
        spans += strstr(line, "{\"name\":\"test collective\",\"cat\":\"collective\"") &&
                 strstr(line, "\"tid\":1") != NULL;
    fclose(f);
    remove(path);
    assert_int_equal(spans, 4);
}

/* NCCL answers ncclInProgress for a while on every call: the transport polls, and the results
 * are the same. */
static void test_in_progress(void **state)
{
    (void)state;
    mp_standin_fault("inprogress:3");
    standin_open_device();
    int64_t wrong = standin_wrong(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F16, 1000, 0) +
                    standin_wrong(MP_COLL_REDUCE_SCATTER, MP_REDOP_SUM, MP_BF16, 7, 0) +
                    standin_wrong(MP_COLL_REDUCE_SCATTER, MP_REDOP_SUM, MP_F32, 7, 5) +
                    standin_wrong(MP_COLL_ALLGATHER, MP_REDOP_SUM, MP_F64, 7, 0);
    mp_comm_drop_device(&comm);
    mp_standin_fault(NULL);
    assert_int_equal(wrong, 0);
}

/* One rank's communicator never forms: every rank fails alike, naming the wait, within
 * comm.timeout_s (and a little). */
static void test_init_stuck(void **state)
{
    (void)state;
    mp_standin_fault("initstuck:1");
    double limit = comm.timeout_s, t0 = mp_now();
    comm.timeout_s = 1.0;
    mp_status st = mp_comm_use_device(&comm, 0, stream);
    double took = mp_now() - t0;
    comm.timeout_s = limit;
    mp_standin_fault(NULL);
    assert_int_equal(st, MP_ECOMM);
    assert_non_null(strstr(mp_error_message(), "did not finish creating the communicator"));
    assert_non_null(strstr(mp_error_message(), "[rank 1 @"));
    assert_true(took < 5.0);
    assert_false(mp_comm_has_device(&comm));
}

static void *abort_later(void *arg)
{
    (void)arg;
    mp_nap(0.3);
    comm.dtx.ops->abort(comm.dtx.self);
    return NULL;
}

/* A collective that never finishes is aborted from another thread (as mp_comm_abort does when
 * another part of the job failed): the caller waiting for it is released at once with the
 * abort's message, and closing frees everything. Runs last: the communicator ends broken. */
static void test_abort_midway(void **state)
{
    (void)state;
    mp_standin_fault("hang:*:2");
    standin_open_device();
    assert_int_equal(standin_wrong(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0), 0);
    const mp_ops *staged = mp_backend_cpu_staged();
    int64_t shape[1] = {16};
    mp_tensor x = mp_tensor_new(staged, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    mp_coll c = mp_coll_of(MP_COLL_ALLREDUCE, x.data, 16, MP_F32, MP_REDOP_SUM, "stuck sum");
    uint64_t ticket = 0;
    assert_int_equal(mp_comm_coll_start(&comm, staged, &c, &ticket), MP_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, abort_later, NULL), 0);
    double t0 = mp_now();
    mp_status st = mp_comm_coll_wait(&comm, ticket);
    double took = mp_now() - t0;
    pthread_join(th, NULL);
    assert_int_equal(st, MP_ECOMM);
    assert_non_null(strstr(mp_error_message(), "was aborted"));
    assert_true(took < 0.3 + 5.0 && took < comm.timeout_s);
    mp_comm_drop_device(&comm);
    mp_tensor_delete(staged, &x);
    mp_standin_fault(NULL);
    comm.broken = false; /* only the device transport broke; the host one still serves */
    comm.report = false;
}

/* The --drive loop's collective on x (queued; its ticket in *ticket) and its ordering. */
static mp_status drive_sum(const mp_ops *ops, mp_tensor *x, uint64_t *ticket)
{
    mp_coll c = mp_coll_of(MP_COLL_ALLREDUCE, x->data, 1000, MP_F16, MP_REDOP_SUM,
                           "the gradient bucket");
    bool waited = false;
    MP_TRY(mp_comm_coll_start(&comm, ops, &c, ticket));
    return mp_comm_coll_order(&comm, *ticket, &waited);
}

/* The --drive loop's step as a graph of the compute stream (MPDIST_STANDIN_GRAPH). */
static mp_status drive_capture(const mp_ops *ops, mp_tensor *x, void **graph)
{
    uint64_t ticket = 0;
    MP_TRY(mp_comm_capture_begin(&comm, ops));
    mp_standin_capture_begin(stream);
    mp_status st = drive_sum(ops, x, &ticket);
    mp_status end = mp_comm_capture_end(&comm);
    *graph = mp_standin_capture_end(stream);
    MP_TRY(st);
    MP_TRY(end);
    return *graph ? MP_OK : mp_fail(MP_EINTERNAL, "the stand-in refused the capture");
}

/* The --drive loop: `steps` f16 all-reduces of 1000 elements through the NCCL transport, each
 * checked, with MPDIST_STANDIN_GRAPH set each a launch of a graph that holds it (captured
 * before the first step); a failure ends the job as mpdist's fail_midway does. Returns the
 * exit code. */
static int drive(int steps)
{
    const char *limit = getenv("MPDIST_STANDIN_TIMEOUT"), *pause = getenv("MPDIST_STANDIN_STEP_S");
    comm.timeout_s = limit ? atof(limit) : 3.0;
    mp_status st = mp_comm_use_device(&comm, 0, stream);
    if (st != MP_OK) {
        if (comm.rank == 0)
            fprintf(stderr, "mpdist: error: %s\n", mp_error_message());
        mp_comm_finalize(&comm);
        return (int)st;
    }
    mp_ops gops = standin_graph_ops();
    const mp_ops *staged = &gops;
    int64_t shape[1] = {1000};
    mp_tensor x = mp_tensor_new(staged, MP_F16, 1, shape, MP_MEM_WORKSPACE);
    uint16_t h[1000];
    void *graph = NULL;
    if (getenv("MPDIST_STANDIN_GRAPH"))
        st = drive_capture(staged, &x, &graph);
    for (int s = 0; s < steps && st == MP_OK; s++) {
        comm.step = s;
        if (pause) /* the step's compute */
            mp_nap(atof(pause));
        for (size_t i = 0; i < 1000; i++)
            mp_store(h, MP_F16, i, (double)((i + (size_t)comm.rank) % 4));
        st = staged->copy_in(x.data, h, sizeof h);
        uint64_t ticket = 0;
        if (st == MP_OK && graph)
            st = mp_comm_graph_launch(&comm, staged, graph, "the step's graph");
        if (st == MP_OK && graph)
            st = mp_comm_device_wait(&comm, comm.dissued);
        else if (st == MP_OK)
            st = drive_sum(staged, &x, &ticket);
        if (st == MP_OK && !graph)
            st = mp_comm_coll_wait(&comm, ticket);
        if (st == MP_OK)
            st = staged->copy_out(h, x.data, sizeof h);
        for (size_t i = 0; i < 1000 && st == MP_OK; i++) {
            double want = 0;
            for (int r = 0; r < comm.size; r++)
                want += (double)((i + (size_t)r) % 4);
            if (mp_load(h, MP_F16, i) != want)
                st = mp_fail(MP_EINTERNAL, "step %d: element %zu is %g, not %g", s, i,
                             mp_load(h, MP_F16, i), want);
        }
    }
    if (st != MP_OK) {
        if (comm.report || st != MP_ECOMM)
            fprintf(stderr, "mpdist: error: %s\n", mp_error_message());
        mp_comm_abort(&comm, (int)st);
    }
    printf("rank %d: %d steps through the NCCL transport%s\n", comm.rank, steps,
           graph ? ", each a graph's launch" : "");
    mp_standin_graph_free(graph);
    mp_tensor_delete(staged, &x);
    mp_comm_finalize(&comm);
    return 0;
}

int main(int argc, char **argv)
{
    stream = mp_standin_stream();
    if (argc == 3 && strcmp(argv[1], "--drive") == 0) {
        int steps = atoi(argv[2]);
        if (mp_comm_init(&comm, &argc, &argv) != MP_OK) {
            fprintf(stderr, "%s\n", mp_error_message());
            return 1;
        }
        return drive(steps);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_collective),
        cmocka_unit_test(test_traced),
        cmocka_unit_test(test_in_progress),
        cmocka_unit_test(test_init_stuck),
        cmocka_unit_test(test_abort_midway),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}

#else

int main(void)
{
    fprintf(stderr, "test_nccl_standin: this build has no CUDA, so no NCCL headers: skipped\n");
    return 77;
}

#endif
