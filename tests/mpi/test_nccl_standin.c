// np: 2 4
/* The NCCL transport (comm/transport_nccl.c, the product's object code) on ranks without a GPU,
 * linked against the stand-in of tests/util/nccl_standin.h (issue 46): every collective of the
 * data plane in every dtype, whole blocked buffers and slices that cut the blocks, against the
 * MPI transport's bytes on the same inputs (bitwise on 2 ranks, where a sum is one rounding;
 * within the dtype's rounding of the rank-order sums on more); NCCL calls that stay in
 * progress for a while; a communicator that never forms on one rank (every rank fails alike
 * within comm.timeout_s); and an abort in the middle of a collective (the waiting caller is
 * released at once, and close frees everything); and bench-comm's bare communicator
 * (comm/nccl_raw.h): its collectives' bytes, and a wait that gives up; with log.trace on, each
 * collective a span on the "collectives" track.
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
#include "comm/nccl_raw.h"
#include "engine/clock.h"
#include "engine/trace.h"
#include "engine/ops.h"

#ifdef MP_HAVE_NCCL_STANDIN
#include "tests/util/nccl_standin.h"

static mp_comm comm;
static void *stream; /* the compute stream the transport orders (a stand-in stream) */

static int64_t total(int64_t local)
{
    int64_t all = 0;
    assert_int_equal(MPI_Allreduce(&local, &all, 1, MPI_INT64_T, MPI_SUM, comm.world),
                     MPI_SUCCESS);
    return all;
}

/* Rank r's element i: not a small integer, so half sums round. */
static double value(int64_t i, int r)
{
    return (double)((i * 37 + r * 11) % 101) / 7.0 - 6.0;
}

/* The unit roundoff of dt, doubled. */
static double eps(mp_dtype dt)
{
    switch (dt) {
    case MP_F16: return ldexp(1.0, -10);
    case MP_BF16: return ldexp(1.0, -7);
    case MP_F32: return ldexp(1.0, -23);
    case MP_F64: break;
    }
    return ldexp(1.0, -52);
}

/* Starts one collective of kind (op for all-reduce) over the n elements at buf (blocks of
 * `block`), as slices of `step` elements (0: whole), on route mem (NULL: host memory), then
 * orders and waits. */
static void run(const mp_ops *mem, mp_coll_kind kind, mp_redop op, void *buf, size_t n,
                mp_dtype dt, size_t block, size_t step)
{
    size_t elem = kind == MP_COLL_BCAST ? 1 : mp_dtype_size(dt);
    uint64_t ticket = 0;
    for (size_t lo = 0; lo < n; lo += step ? step : n) {
        size_t cnt = step && lo + step < n ? step : n - lo;
        char *at = (char *)buf + lo * elem;
        mp_coll c = kind == MP_COLL_ALLREDUCE || kind == MP_COLL_BCAST
                        ? mp_coll_of(kind, at, cnt, dt, op, "test collective")
                        : mp_coll_blocks(kind, at, cnt, dt, block, lo, "test collective");
        c.root = comm.size - 1;
        if (mp_comm_coll_start(&comm, mem, &c, &ticket) != MP_OK)
            fail_msg("%s", mp_error_message());
    }
    bool waited = false;
    if (mp_comm_coll_order(&comm, ticket, &waited) != MP_OK ||
        mp_comm_coll_wait(&comm, ticket) != MP_OK)
        fail_msg("%s", mp_error_message());
}

/* Elements where the NCCL route's result `got` differs from the MPI route's `want` beyond
 * what the order of a sum explains (nothing on 2 ranks, or for what is copied, not summed). */
static int64_t differ(mp_coll_kind kind, mp_redop op, const void *got, const void *want,
                      const void *before, size_t n, mp_dtype dt, size_t block)
{
    bool exact = comm.size == 2 || kind == MP_COLL_ALLGATHER || kind == MP_COLL_BCAST ||
                 op == MP_REDOP_MAX;
    if (kind == MP_COLL_BCAST)
        return memcmp(got, want, n) != 0;
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double g = mp_load(got, dt, i), w = mp_load(want, dt, i);
        if (kind == MP_COLL_REDUCE_SCATTER && i / block != (size_t)comm.rank) {
            bad += g != 0.0 && g != mp_load(before, dt, i); /* not summed: zero or kept */
            continue;
        }
        if (exact) {
            bad += memcmp((const char *)got + i * mp_dtype_size(dt),
                          (const char *)want + i * mp_dtype_size(dt), mp_dtype_size(dt)) != 0;
            continue;
        }
        double mass = 0;
        for (int r = 0; r < comm.size; r++)
            mass += fabs(value((int64_t)i, r));
        bad += !(fabs(g - w) <= (comm.size - 1) * eps(dt) * mass);
    }
    return bad;
}

/* Wrong elements of one collective: the same inputs through the MPI transport on host memory
 * and through the NCCL transport on staged memory. */
static int64_t compare(mp_coll_kind kind, mp_redop op, mp_dtype dt, size_t block, size_t step)
{
    const mp_ops *staged = mp_backend_cpu_staged();
    size_t n = block * (size_t)comm.size, bytes = n * mp_dtype_size(dt);
    if (kind == MP_COLL_BCAST)
        n = bytes; /* a broadcast counts bytes */
    char *before = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    for (size_t i = 0; i < block * (size_t)comm.size; i++)
        mp_store(before, dt, i, kind == MP_COLL_ALLGATHER && i / block != (size_t)comm.rank
                                    ? -1.0 /* an all-gather must overwrite it */
                                    : value((int64_t)i, comm.rank));
    memcpy(want, before, bytes);
    run(NULL, kind, op, want, n, dt, block, step);
    int64_t shape[1] = {(int64_t)bytes};
    mp_tensor x = mp_tensor_new(staged, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    assert_int_equal(staged->copy_in(x.data, before, bytes), MP_OK);
    run(staged, kind, op, x.data, n, dt, block, step);
    assert_int_equal(staged->copy_out(got, x.data, bytes), MP_OK);
    mp_tensor_delete(staged, &x);
    int64_t bad = differ(kind, op, got, want, before, kind == MP_COLL_BCAST ? bytes :
                         block * (size_t)comm.size, dt, block);
    free(before);
    free(want);
    free(got);
    return bad;
}

static void open_device(void)
{
    if (mp_comm_use_device(&comm, 0, stream) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_string_equal(comm.dtx.ops->name, "nccl");
}

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
                    int64_t bad = total(compare(kinds[k].kind, kinds[k].op, types[t], blocks[b],
                                                steps[s]));
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
    open_device();
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
    assert_int_equal(mp_trace_open(path, comm.rank, "standin", 0.0, mp_now()), MP_OK);
    const mp_ops *staged = mp_backend_cpu_staged();
    int64_t shape[1] = {1000};
    mp_tensor x = mp_tensor_new(staged, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    open_device();
    run(staged, MP_COLL_ALLREDUCE, MP_REDOP_SUM, x.data, 1000, MP_F32, 1000, 333); /* 4 */
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
    open_device();
    int64_t wrong = total(compare(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F16, 1000, 0)) +
                    total(compare(MP_COLL_REDUCE_SCATTER, MP_REDOP_SUM, MP_BF16, 7, 0)) +
                    total(compare(MP_COLL_REDUCE_SCATTER, MP_REDOP_SUM, MP_F32, 7, 5)) +
                    total(compare(MP_COLL_ALLGATHER, MP_REDOP_SUM, MP_F64, 7, 0));
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
                                    : value((int64_t)i, comm.rank));
    memcpy(want, before, bytes);
    run(NULL, kind, MP_REDOP_SUM, want, n, dt, block, 0);
    memcpy(got, before, bytes);
    mp_coll c = kind == MP_COLL_ALLREDUCE
                    ? mp_coll_of(kind, got, n, dt, MP_REDOP_SUM, "raw collective")
                    : mp_coll_blocks(kind, got, n, dt, block, 0, "raw collective");
    for (int k = 0; k < times; k++)
        if (mp_nccl_raw_start(raw, &c) != MP_OK)
            fail_msg("%s", mp_error_message());
    if (mp_nccl_raw_wait(raw, 10.0) != MP_OK)
        fail_msg("%s", mp_error_message());
    int64_t bad = differ(kind, MP_REDOP_SUM, got, want, before, n, dt, block);
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
                    wrong += total(raw_compare(raw, kinds[k], types[t], blocks[b],
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

/* The staged backend's table with graph_launch launching a stand-in graph on the compute
 * stream, as CUDA's does on the backend's stream. */
static mp_status launch_on_stream(void *graph)
{
    return mp_standin_graph_launch(graph, stream) ? MP_OK : MP_EINTERNAL;
}

static mp_ops graph_ops(void)
{
    mp_ops ops = *mp_backend_cpu_staged();
    ops.graph_launch = launch_on_stream;
    return ops;
}

/* Captures the step's collectives for the --drive loop and the test below: an all-reduce sum of
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

/* Step k's inputs: rank r's x[i] = value(i, r) * (k + 1), y[j] = r * 10 + j + k. */
static void step_inputs(const mp_ops *ops, mp_tensor *x, mp_tensor *y, int k)
{
    float hx[1000];
    double hy[10];
    for (int i = 0; i < 1000; i++)
        hx[i] = (float)(value(i, comm.rank) * (k + 1));
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
        float want = (float)(value(i, 0) * (k + 1));
        for (int r = 1; r < comm.size; r++)
            want += (float)(value(i, r) * (k + 1));
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
    open_device();
    mp_ops ops = graph_ops();
    int64_t shape[1] = {1000}, shape_y[1] = {10};
    mp_tensor x = mp_tensor_new(&ops, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    mp_tensor y = mp_tensor_new(&ops, MP_F64, 1, shape_y, MP_MEM_WORKSPACE);
    assert_int_equal(total(compare(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0)), 0);
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
        assert_true(hx[i] == (float)value(i, comm.rank));
    for (int k = 1; k <= 3; k++) {
        step_inputs(&ops, &x, &y, k);
        assert_int_equal(mp_comm_graph_launch(&comm, &ops, g, "the step's graph"), MP_OK);
        assert_int_equal(comm.dissued, before + (uint64_t)k);
        if (mp_comm_device_wait(&comm, comm.dissued) != MP_OK)
            fail_msg("%s", mp_error_message());
        assert_int_equal(total(step_wrong(&ops, &x, &y, k)), 0);
    }
    assert_int_equal(total(compare(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0)), 0);

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
    assert_int_equal(total(compare(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0)), 0);
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
    open_device();
    assert_int_equal(total(compare(MP_COLL_ALLREDUCE, MP_REDOP_SUM, MP_F32, 7, 0)), 0);
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
    mp_ops gops = graph_ops();
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
        cmocka_unit_test(test_raw_loop),
        cmocka_unit_test(test_raw_timeout),
        cmocka_unit_test(test_captured),
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
