/* What the NCCL stand-in's MPI tests share (see nccl_standin_cases.h). */
#include "tests/util/nccl_standin_cases.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util/nccl_standin.h"
#include "tests/util/test_util.h"

mp_comm comm;
void *stream;

int64_t standin_total(int64_t local)
{
    int64_t all = 0;
    assert_int_equal(MPI_Allreduce(&local, &all, 1, MPI_INT64_T, MPI_SUM, comm.world),
                     MPI_SUCCESS);
    return all;
}

/* Rank r's element i: not a small integer, so half sums round. */
double standin_value(int64_t i, int r)
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
void standin_run(const mp_ops *mem, mp_coll_kind kind, mp_redop op, void *buf, size_t n,
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
int64_t standin_differ(mp_coll_kind kind, mp_redop op, const void *got, const void *want,
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
            mass += fabs(standin_value((int64_t)i, r));
        bad += !(fabs(g - w) <= (comm.size - 1) * eps(dt) * mass);
    }
    return bad;
}

/* Wrong elements of one collective: the same inputs through the MPI transport on host memory
 * and through the NCCL transport on staged memory. */
int64_t standin_compare(mp_coll_kind kind, mp_redop op, mp_dtype dt, size_t block,
                        size_t step)
{
    const mp_ops *staged = mp_backend_cpu_staged();
    size_t n = block * (size_t)comm.size, bytes = n * mp_dtype_size(dt);
    if (kind == MP_COLL_BCAST)
        n = bytes; /* a broadcast counts bytes */
    char *before = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    for (size_t i = 0; i < block * (size_t)comm.size; i++)
        mp_store(before, dt, i, kind == MP_COLL_ALLGATHER && i / block != (size_t)comm.rank
                                    ? -1.0 /* an all-gather must overwrite it */
                                    : standin_value((int64_t)i, comm.rank));
    memcpy(want, before, bytes);
    standin_run(NULL, kind, op, want, n, dt, block, step);
    int64_t shape[1] = {(int64_t)bytes};
    mp_tensor x = mp_tensor_new(staged, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    assert_int_equal(staged->copy_in(x.data, before, bytes), MP_OK);
    standin_run(staged, kind, op, x.data, n, dt, block, step);
    assert_int_equal(staged->copy_out(got, x.data, bytes), MP_OK);
    mp_tensor_delete(staged, &x);
    int64_t bad = standin_differ(kind, op, got, want, before, kind == MP_COLL_BCAST ? bytes :
                         block * (size_t)comm.size, dt, block);
    free(before);
    free(want);
    free(got);
    return bad;
}

int64_t standin_wrong(mp_coll_kind kind, mp_redop op, mp_dtype dt, size_t block, size_t step)
{
    return standin_total(standin_compare(kind, op, dt, block, step));
}

void standin_open_device(void)
{
    if (mp_comm_use_device(&comm, 0, stream) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_string_equal(comm.dtx.ops->name, "nccl");
}

/* The staged backend's table with graph_launch launching a stand-in graph on the compute
 * stream, as CUDA's does on the backend's stream. */
static mp_status launch_on_stream(void *graph)
{
    return mp_standin_graph_launch(graph, stream) ? MP_OK : MP_EINTERNAL;
}

mp_ops standin_graph_ops(void)
{
    mp_ops ops = *mp_backend_cpu_staged();
    ops.graph_launch = launch_on_stream;
    return ops;
}

