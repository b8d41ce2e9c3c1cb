/* The collective sweep (see bench_comm.h). Each row: the communicator's in-place collective
 * (all-reduce or reduce-scatter summing, or all-gather) of `count` elements of one dtype on host
 * memory or a backend's (--device), and the raw call doing the same over the same bytes: on
 * NCCL the library's own (ncclAllReduce, ncclReduceScatter, ncclAllGather on a bare
 * communicator, comm/nccl_raw.h), else MPI's with MPI's own type of that width (MPI_FLOAT for
 * fp32, MPI_INT16_T for the half types: MPI_Allreduce, MPI_Reduce_scatter_block,
 * MPI_Allgather), timed alternately in rounds; a row's time is the
 * best round's mean, the slowest rank's (with --blocking: the median over all rounds of single
 * collectives, each the least time over the ranks, as training measures its all-reduce); which
 * of the two goes first alternates from round to round, so neither gains from a warm cache or a
 * quiet machine. As in nccl-tests, size is the
 * whole buffer (a reduce-scatter's input, an all-gather's output: count elements, a multiple of
 * the ranks), and busbw = algbw * 2(n-1)/n for all-reduce, algbw * (n-1)/n for the other two.
 * After timing, one more collective of small integers (exact in any order) counts wrong
 * elements over all ranks. */
#include "src/bench_comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/alloc.h"
#include "io/memcheck.h"

/* The dtypes of a sweep, in order: bit k of -d for TYPES[k], named mp_bench_type_names[k]. */
static const mp_dtype TYPES[3] = {MP_F32, MP_F16, MP_BF16};
_Static_assert(MP_BENCH_BFLOAT16 == 1u << 2, "a dtype's bit and its place in TYPES go together");

/* The collectives, in the order of their MP_BENCH_* bits: bit k for OPS[k], named
 * mp_bench_op_names[k]. */
static const struct {
    const char *title;
    mp_coll_kind kind;
} OPS[3] = {{"all-reduce (sum)", MP_COLL_ALLREDUCE},
            {"reduce-scatter (sum)", MP_COLL_REDUCE_SCATTER},
            {"all-gather", MP_COLL_ALLGATHER}};
_Static_assert(MP_BENCH_ALLGATHER == 1u << 2, "a collective's bit and its place in OPS go together");

typedef struct row {
    int op; /* index into OPS */
    int64_t bytes, count;
    mp_dtype dt;
    double us, raw_us;
    int64_t wrong;
} row;

/* One run: the communicator, the options, the memory, and from it the buffer and its host copy
 * for the checks (the buffer itself on host memory). */
typedef struct bench {
    mp_comm *c;
    const mp_bench_comm_opts *o;
    const mp_bench_mem *m;
    void *buf, *host;
} bench;

static const char *type_name(mp_dtype dt)
{
    return mp_bench_type_names[dt == MP_F32 ? 0 : dt == MP_F16 ? 1 : 2];
}

/* Whether the buffer is not host memory (a copy travels between it and b->host). */
static bool on_device(const bench *b)
{
    return b->m->ops && !b->m->ops->host_memory;
}

/* The first `bytes` of b->host into the buffer, finished before any stream reads it. */
static mp_status put(bench *b, size_t bytes)
{
    if (!on_device(b))
        return MP_OK;
    MP_TRY(b->m->ops->copy_in(b->buf, b->host, bytes));
    return b->m->ops->sync();
}

/* The communicator's collective of row r over the whole (blocked) buffer. */
static mp_coll coll_of(const bench *b, const row *r, const char *what)
{
    mp_coll_kind kind = OPS[r->op].kind;
    if (kind == MP_COLL_ALLREDUCE)
        return mp_coll_of(kind, b->buf, (size_t)r->count, r->dt, MP_REDOP_SUM, what);
    return mp_coll_blocks(kind, b->buf, (size_t)r->count, r->dt, (size_t)(r->count / b->c->size),
                          0, what);
}

/* Starts row r's collective through the communicator, on the buffer's route. */
static mp_status ours_start(bench *b, const row *r, const char *what, uint64_t *ticket)
{
    mp_coll coll = coll_of(b, r, what);
    return mp_comm_coll_start(b->c, b->m->ops, &coll, ticket);
}

/* Mean seconds per collective over o->iters after o->warmup, the slowest rank's. Like
 * nccl-tests on a stream, the iterations are queued back to back on the transport and waited
 * for once. */
static mp_status time_ours(bench *b, const row *r, double *s)
{
    uint64_t ticket = 0;
    for (int i = 0; i < b->o->warmup; i++)
        MP_TRY(ours_start(b, r, "bench-comm collective", &ticket));
    if (ticket)
        MP_TRY(mp_comm_coll_wait(b->c, ticket));
    MPI_CHECK(MPI_Barrier(b->c->world));
    *s = MPI_Wtime();
    for (int i = 0; i < b->o->iters; i++)
        MP_TRY(ours_start(b, r, "bench-comm collective", &ticket));
    MP_TRY(mp_comm_coll_wait(b->c, ticket));
    *s = (MPI_Wtime() - *s) / b->o->iters;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE, MPI_MAX, b->c->world));
    return MP_OK;
}

/* Starts one raw call doing row r's collective in place over the buffer: enqueued on the bare
 * NCCL communicator, or the MPI call itself, which returns when it is done. */
static mp_status raw_start(bench *b, const row *r)
{
    if (b->m->raw) {
        mp_coll coll = coll_of(b, r, "bench-comm raw collective");
        return mp_nccl_raw_start(b->m->raw, &coll);
    }
    MPI_Datatype type = r->dt == MP_F32 ? MPI_FLOAT : MPI_INT16_T;
    int n = (int)r->count, block = (int)(r->count / b->c->size);
    switch (OPS[r->op].kind) {
    case MP_COLL_REDUCE_SCATTER:
        MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, b->buf, block, type, MPI_SUM,
                                           b->c->world));
        break;
    case MP_COLL_ALLGATHER:
        MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->buf, block, type,
                                b->c->world));
        break;
    default:
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, b->buf, n, type, MPI_SUM, b->c->world));
        break;
    }
    return MP_OK;
}

/* Waits for the raw calls started (NCCL's stream; MPI's are done). */
static mp_status raw_finish(bench *b)
{
    return b->m->raw ? mp_nccl_raw_wait(b->m->raw, b->c->timeout_s) : MP_OK;
}

static mp_status time_raw(bench *b, const row *r, double *s)
{
    for (int i = 0; i < b->o->warmup; i++)
        MP_TRY(raw_start(b, r));
    MP_TRY(raw_finish(b));
    MPI_CHECK(MPI_Barrier(b->c->world));
    *s = MPI_Wtime();
    for (int i = 0; i < b->o->iters; i++)
        MP_TRY(raw_start(b, r));
    MP_TRY(raw_finish(b));
    *s = (MPI_Wtime() - *s) / b->o->iters;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE, MPI_MAX, b->c->world));
    return MP_OK;
}

/* One collective of row r through the communicator, waited for. */
static mp_status one_ours(bench *b, const row *r)
{
    uint64_t ticket;
    MP_TRY(ours_start(b, r, "bench-comm collective", &ticket));
    return mp_comm_coll_wait(b->c, ticket);
}

/* One raw call of row r, waited for. */
static mp_status one_raw(bench *b, const row *r)
{
    MP_TRY(raw_start(b, r));
    return raw_finish(b);
}

/* Keeps a core busy for `us` microseconds, as a rank still computing does. */
static void busy(int us)
{
    double until = MPI_Wtime() + 1e-6 * us;
    while (MPI_Wtime() < until)
        ;
}

/* --blocking: o->iters collectives after o->warmup, each (`one`) timed on its own and the
 * least time over the ranks kept (MIN: the time the last rank to start saw, as training's
 * comm_last_ms), appended at t[*n]. A lower bound where ranks start apart: the last one may
 * find its peers' data already sent (an all-gather's most of all); meant for all-reduce. With
 * --skew the last rank computes that long before each timed collective while the others wait
 * in it, as in a step whose ranks finish backward apart. */
static mp_status time_each(bench *b, const row *r, mp_status (*one)(bench *, const row *),
                           double *t, int64_t *n)
{
    mp_comm *c = b->c;
    for (int i = 0; i < b->o->warmup; i++)
        MP_TRY(one(b, r));
    for (int i = 0; i < b->o->iters; i++) {
        if (b->o->skew_us > 0 && c->rank == c->size - 1)
            busy(b->o->skew_us);
        double s = MPI_Wtime();
        MP_TRY(one(b, r));
        s = MPI_Wtime() - s;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MIN, c->world));
        t[(*n)++] = s;
    }
    return MP_OK;
}

/* qsort's order of doubles, ascending. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of t[0 .. n - 1] (n > 0), which it sorts in place. */
static double median(double *t, int64_t n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* --blocking: row r's times as the median over every round's iterations, ours and raw
 * alternating as in measure. */
static mp_status measure_each(bench *b, row *r)
{
    int64_t cap = (int64_t)b->o->rounds * b->o->iters, n[2] = {0, 0};
    double *t = mp_alloc((size_t)(2 * cap) * sizeof *t, MP_MEM_WORKSPACE);
    mp_status st = MP_OK;
    for (int k = 0; k < b->o->rounds && st == MP_OK; k++)
        for (int j = 0; j < 2 && st == MP_OK; j++) { /* ours first in even rounds */
            int which = (j + k) % 2;
            st = time_each(b, r, which == 0 ? one_ours : one_raw, t + which * cap, &n[which]);
        }
    if (st == MP_OK) {
        r->us = 1e6 * median(t, n[0]);
        r->raw_us = 1e6 * median(t + cap, n[1]);
    }
    mp_free(t);
    return st;
}

/* Small integers whose sum over up to 85 ranks is below 256: exact in every dtype, any order. */
static double input(int64_t i, int rank) { return (double)((i % 3) + (rank % 2)); }

/* What element i holds after the check's collective: the sum over ranks, or (all-gather) the
 * owner's input. */
static double expected(const mp_comm *c, const row *r, int64_t i)
{
    if (OPS[r->op].kind == MP_COLL_ALLGATHER)
        return input(i, (int)(i / (r->count / c->size)));
    double want = 0;
    for (int k = 0; k < c->size; k++)
        want += input(i, k);
    return want;
}

/* One more collective through the communicator, on inputs whose result is exact; the wrong
 * elements over all ranks into r->wrong. */
static mp_status check(bench *b, row *r)
{
    mp_comm *c = b->c;
    int64_t block = r->count / c->size, lo = 0, hi = r->count;
    for (int64_t i = 0; i < r->count; i++) /* an all-gather must overwrite the -1 */
        mp_store(b->host, r->dt, (size_t)i,
                 OPS[r->op].kind == MP_COLL_ALLGATHER && i / block != c->rank ? -1.0
                                                                              : input(i, c->rank));
    MP_TRY(put(b, (size_t)r->bytes));
    uint64_t ticket;
    MP_TRY(ours_start(b, r, "bench-comm check", &ticket));
    MP_TRY(mp_comm_coll_wait(c, ticket));
    if (on_device(b))
        MP_TRY(b->m->ops->copy_out(b->host, b->buf, (size_t)r->bytes));
    if (OPS[r->op].kind == MP_COLL_REDUCE_SCATTER) { /* only the rank's block is defined */
        lo = c->rank * block;
        hi = lo + block;
    }
    int64_t wrong = 0;
    for (int64_t i = lo; i < hi; i++)
        wrong += mp_load(b->host, r->dt, (size_t)i) != expected(c, r, i);
    MPI_CHECK(MPI_Allreduce(&wrong, &r->wrong, 1, MPI_INT64_T, MPI_SUM, c->world));
    return MP_OK;
}

static mp_status measure(bench *b, row *r)
{
    r->us = r->raw_us = 1e30;
    memset(b->host, 0, (size_t)r->bytes);
    MP_TRY(put(b, (size_t)r->bytes));
    if (b->o->blocking) {
        MP_TRY(measure_each(b, r));
        return check(b, r);
    }
    for (int k = 0; k < b->o->rounds; k++)
        for (int j = 0; j < 2; j++) { /* ours first in even rounds, raw first in odd ones */
            double s;
            if ((j + k) % 2 == 0) {
                MP_TRY(time_ours(b, r, &s));
                r->us = fmin(r->us, s * 1e6);
            } else {
                MP_TRY(time_raw(b, r, &s));
                r->raw_us = fmin(r->raw_us, s * 1e6);
            }
        }
    return check(b, r);
}

/* nccl-tests' bus bandwidth factor of the row's collective on n ranks. */
static double bus_factor(const row *r, int n)
{
    return (OPS[r->op].kind == MP_COLL_ALLREDUCE ? 2.0 : 1.0) * (n - 1) / n;
}

static void print_row(FILE *out, const bench *b, const row *r)
{
    double bus = bus_factor(r, b->c->size);
    double alg = (double)r->bytes / r->us / 1e3, raw = (double)r->bytes / r->raw_us / 1e3;
    const char *rawt = b->m->raw ? type_name(r->dt) : r->dt == MP_F32 ? "float" : "int16";
    const char *redop = OPS[r->op].kind == MP_COLL_ALLGATHER ? "none" : "sum";
    if (b->o->csv)
        fprintf(out, "%s,%lld,%lld,%s,%s,%.2f,%.3f,%.3f,%lld,%s,%.2f,%.3f,%.3f,%.3f\n",
                mp_bench_op_names[r->op], (long long)r->bytes, (long long)r->count,
                type_name(r->dt), redop, r->us, alg, alg * bus, (long long)r->wrong, rawt,
                r->raw_us, raw, raw * bus, alg / raw);
    else
        fprintf(out, "%12lld %12lld %9s %5s %10.1f %7.2f %7.2f %6lld   %8s %10.1f %7.2f %7.2f "
                     "%6.2f\n",
                (long long)r->bytes, (long long)r->count, type_name(r->dt), redop, r->us, alg,
                alg * bus, (long long)r->wrong, rawt, r->raw_us, raw, raw * bus, alg / raw);
}

static void print_header(FILE *out, const bench *b, int op)
{
    const mp_comm *c = b->c;
    const mp_bench_comm_opts *o = b->o;
    if (o->csv) {
        if (op < 0)
            fprintf(out, "op,size_bytes,count,type,redop,time_us,algbw_gbs,busbw_gbs,wrong,"
                         "raw_type,raw_time_us,raw_algbw_gbs,raw_busbw_gbs,busbw_ratio\n");
        return;
    }
    if (op < 0)
        return;
    int hosts = 1;
    for (int r = 1; r < c->size; r++)
        hosts += strcmp(mp_comm_host(c, r), mp_comm_host(c, r - 1)) != 0;
    static const char *mpi[3] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Allgather"};
    static const char *nccl[3] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather"};
    char how[256], late[64] = "", where[200] = "";
    if (o->skew_us > 0)
        snprintf(late, sizeof late, ", the last rank computing %d us first", o->skew_us);
    if (o->blocking)
        snprintf(how, sizeof how, "blocking iterations after %d warm-up in each of %d "
                 "alternating rounds, the median as the last rank to start saw it%s",
                 o->warmup, o->rounds, late);
    else
        snprintf(how, sizeof how, "iterations after %d warm-up, best of %d alternating rounds",
                 o->warmup, o->rounds);
    if (b->m->ops)
        snprintf(where, sizeof where, " on %s", b->m->where);
    fprintf(out,
            "# mpdist bench-comm: in-place %s, %d ranks on %d host%s, transport "
            "%s%s; %d %s\n"
            "#\n"
            "#                                          ---- mpdist communicator ----          "
            "---- raw %s, same bytes ----\n"
            "#       size        count      type redop       time   algbw   busbw #wrong       "
            "type       time   algbw   busbw  ratio\n"
            "#        (B)   (elements)                       (us)  (GB/s)  (GB/s)              "
            "           (us)  (GB/s)  (GB/s)\n",
            OPS[op].title, c->size, hosts, hosts > 1 ? "s" : "",
            on_device(b) ? c->dtx.ops->name : c->tx.ops->name, where, o->iters, how,
            b->m->raw ? nccl[op] : mpi[op]);
}

/* The rows of collective `op` in one dtype; adds their wrong elements to *wrong. */
static mp_status sweep(bench *b, int op, mp_dtype dt, FILE *out, int64_t *wrong)
{
    const mp_bench_comm_opts *o = b->o;
    int n = b->c->size;
    double sum[2] = {0, 0};
    int nbig = 0, rows = 0;
    bool over = false; /* a size past the collectives' 2^31 - 1 elements */
    int64_t last = 0;
    for (int64_t size = o->min_bytes; size <= o->max_bytes;
         size = o->step_bytes > 0 ? size + o->step_bytes : size * o->factor) {
        row r = {.op = op, .dt = dt};
        r.count = size / (int64_t)mp_dtype_size(dt);
        if (OPS[op].kind != MP_COLL_ALLREDUCE)
            r.count -= r.count % n; /* whole blocks */
        over = over || r.count > 2147483647LL;
        if (r.count < 1 || r.count > 2147483647LL || r.count == last)
            continue; /* a step smaller than an element (or a block) repeats no row */
        last = r.count;
        r.bytes = r.count * (int64_t)mp_dtype_size(dt);
        MP_TRY(measure(b, &r));
        *wrong += r.wrong;
        if (b->c->rank == 0)
            print_row(out, b, &r);
        rows++;
        if (r.bytes >= 1048576) { /* one rank moves nothing between ranks: its bus factor is
                                     0, so it averages the algorithm bandwidth */
            double f = n > 1 ? bus_factor(&r, n) : 1.0;
            sum[0] += (double)r.bytes / r.us / 1e3 * f;
            sum[1] += (double)r.bytes / r.raw_us / 1e3 * f;
            nbig++;
        }
    }
    if (b->c->rank == 0 && !o->csv && rows == 0)
        fprintf(out, "# %s, %s: no size from -b %lld to -e %lld holds %s (left out)\n",
                mp_bench_op_names[op], type_name(dt), (long long)o->min_bytes,
                (long long)o->max_bytes,
                over ? "at most 2^31 - 1 elements"
                : OPS[op].kind == MP_COLL_ALLREDUCE ? "an element"
                                                    : "an element for each rank");
    if (b->c->rank == 0 && !o->csv && nbig > 0)
        fprintf(out, "# Avg %s bandwidth, %s, %s, sizes >= 1 MiB: communicator %.3f GB/s, raw "
                     "%.3f GB/s, ratio %.3f\n",
                n > 1 ? "bus" : "algorithm (1 rank)", mp_bench_op_names[op], type_name(dt),
                sum[0] / nbig, sum[1] / nbig, sum[0] / sum[1]);
    return MP_OK;
}

mp_status mp_bench_comm_check_memory(const mp_comm *c, const mp_bench_comm_opts *o)
{
    char what[160];
    snprintf(what, sizeof what, "-e %lld: the buffer and the collective's working copy, for each "
             "of the %d rank(s) on this host", (long long)o->max_bytes, c->local_size);
    int64_t f[3] = {o->max_bytes, 2, c->local_size > 0 ? c->local_size : 1};
    return mp_data_mem_check("bench-comm", what, 3, f, NULL);
}

mp_status mp_bench_comm_run(mp_comm *c, const mp_bench_comm_opts *o, const mp_bench_mem *m,
                            FILE *out)
{
    c->timeout_s = o->timeout_s;
    bench b = {.c = c, .o = o, .m = m, .buf = m->buf, .host = m->host};
    mp_status st = MP_OK;
    if (c->rank == 0)
        print_header(out, &b, -1);
    int64_t wrong = 0;
    for (int op = 0; op < 3 && st == MP_OK; op++) {
        if (!(o->ops & 1u << op))
            continue;
        if (c->rank == 0)
            print_header(out, &b, op);
        for (int k = 0; k < 3 && st == MP_OK; k++)
            if (o->types & 1u << k)
                st = sweep(&b, op, TYPES[k], out, &wrong);
    }
    if (st == MP_OK && wrong > 0)
        st = mp_fail(MP_ECOMM, "bench-comm: %lld wrong elements in the result checks",
                     (long long)wrong);
    if (c->rank == 0)
        fflush(out);
    return st;
}
