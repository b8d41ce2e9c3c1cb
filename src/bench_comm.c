/* The collective sweep (see bench_comm.h). Each row: the communicator's in-place collective
 * (all-reduce or reduce-scatter summing, or all-gather) of `count` elements of one dtype on host
 * memory, and the raw MPI call doing the same over the same bytes with MPI's own type of that
 * width (MPI_FLOAT for fp32, MPI_INT16_T for the half types: MPI_Allreduce,
 * MPI_Reduce_scatter_block, MPI_Allgather), timed alternately in rounds; a row's time is the
 * best round's mean, the slowest rank's (with --blocking: the median over all rounds of single
 * collectives, each the least time over the ranks, as training measures its all-reduce); which
 * of the two goes first alternates from round to round, so neither gains from a warm cache or a
 * quiet machine. As in nccl-tests, size is the
 * whole buffer (a reduce-scatter's input, an all-gather's output: count elements, a multiple of
 * the ranks), and busbw = algbw * 2(n-1)/n for all-reduce, algbw * (n-1)/n for the other two.
 * After timing, one more collective of small integers (exact in any order) counts wrong
 * elements over all ranks. */
#include "src/bench_comm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/alloc.h"
#include "io/memcheck.h"

static mp_status parse_size(const char *opt, const char *v, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    double mult = 1;
    if (end && *end) {
        switch (*end) {
        case 'K': case 'k': mult = 1024.0; break;
        case 'M': case 'm': mult = 1048576.0; break;
        case 'G': case 'g': mult = 1073741824.0; break;
        default: end = NULL; break;
        }
        if (end && end[1] != '\0')
            end = NULL;
    }
    if (!end || end == v || errno || !(x * mult >= 2) || x * mult > 68719476736.0)
        return mp_fail(MP_EUSAGE, "bench-comm: %s takes a size from 2 bytes to 64G (e.g. 8, 64K, "
                                  "16M), not '%s'", opt, v);
    *out = (int64_t)(x * mult);
    return MP_OK;
}

static mp_status parse_int(const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!end || end == v || *end || errno || x < lo || x > hi)
        return mp_fail(MP_EUSAGE, "bench-comm: %s takes an integer from %d to %d, not '%s'", opt,
                       lo, hi, v);
    *out = (int)x;
    return MP_OK;
}

/* The dtypes of a sweep, in order, and their names (nccl-tests'); bit k of -d for TYPES[k]. */
static const mp_dtype TYPES[3] = {MP_F32, MP_F16, MP_BF16};
static const char *const TYPE_NAMES[3] = {"float", "half", "bfloat16"};

_Static_assert(sizeof TYPES / sizeof TYPES[0] == sizeof TYPE_NAMES / sizeof TYPE_NAMES[0] &&
                   MP_BENCH_BFLOAT16 == 1u << 2,
               "a dtype's bit, its name and its place in TYPES go together");

/* The collectives, in the order of their MP_BENCH_* bits (bit k for OPS[k], OP_NAMES[k]). */
static const char *const OP_NAMES[3] = {"allreduce", "reduce_scatter", "all_gather"};
static const struct {
    const char *title;
    mp_coll_kind kind;
} OPS[3] = {{"all-reduce (sum)", MP_COLL_ALLREDUCE},
            {"reduce-scatter (sum)", MP_COLL_REDUCE_SCATTER},
            {"all-gather", MP_COLL_ALLGATHER}};
_Static_assert(sizeof OPS / sizeof OPS[0] == sizeof OP_NAMES / sizeof OP_NAMES[0] &&
                   MP_BENCH_ALLGATHER == 1u << 2,
               "a collective's bit, its name and its place in OPS go together");

/* A comma-separated list of names[0..n), or "all": bit k of *out for names[k]. Empty items
 * and lists of 128 characters or more are usage errors. */
static mp_status parse_names(const char *opt, const char *v, const char *const *names, int n,
                             unsigned *out)
{
    *out = 0;
    char list[128];
    size_t len = strlen(v);
    if (len >= sizeof list)
        return mp_fail(MP_EUSAGE, "bench-comm: %s takes a list of at most %zu characters",
                       opt, sizeof list - 1);
    bool empty = len == 0 || v[0] == ',' || v[len - 1] == ',' || strstr(v, ",,") != NULL;
    snprintf(list, sizeof list, "%s", v);
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name && !empty; name = strtok_r(NULL, ",", &save)) {
        unsigned bit = strcmp(name, "all") == 0 ? (1u << n) - 1 : 0;
        for (int k = 0; k < n; k++)
            bit |= strcmp(name, names[k]) == 0 ? 1u << k : 0;
        if (!bit) {
            *out = 0;
            break;
        }
        *out |= bit;
    }
    if (*out == 0 || empty) {
        char known[128] = "";
        for (int k = 0; k < n; k++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                     k == 0 ? "" : ", ", names[k]);
        return mp_fail(MP_EUSAGE, "bench-comm: %s takes %s or all, comma-separated, not '%s'",
                       opt, known, v);
    }
    return MP_OK;
}

mp_status mp_bench_comm_parse(mp_bench_comm_opts *o, int argc, char **argv, int first)
{
    *o = (mp_bench_comm_opts){
        .min_bytes = 1024, .max_bytes = 16 << 20, .factor = 2, .iters = 20, .warmup = 5,
        .rounds = 3, .timeout_s = MP_COMM_DEFAULT_TIMEOUT_S,
        .ops = MP_BENCH_ALLREDUCE | MP_BENCH_REDUCE_SCATTER | MP_BENCH_ALLGATHER,
        .types = MP_BENCH_FLOAT | MP_BENCH_HALF | MP_BENCH_BFLOAT16};
    bool factor_given = false;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--csv") == 0) {
            o->csv = true;
            continue;
        }
        if (strcmp(a, "--blocking") == 0) {
            o->blocking = true;
            continue;
        }
        const char *known[] = {"-b", "--min-bytes", "-e", "--max-bytes", "-f", "--factor", "-n",
                               "--iters", "-w", "--warmup", "-r", "--rounds", "--timeout", "--op",
                               "--skew", "-d", "--datatype", "-i", "--step-bytes"};
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok = ok || strcmp(a, known[k]) == 0;
        if (!ok)
            return mp_fail(MP_EUSAGE, "bench-comm: unknown option '%s' (see mpdist --help)", a);
        if (i + 1 >= argc)
            return mp_fail(MP_EUSAGE, "bench-comm: %s needs a value (see mpdist --help)", a);
        const char *v = argv[++i];
        int t = 0;
        if (strcmp(a, "-b") == 0 || strcmp(a, "--min-bytes") == 0)
            MP_TRY(parse_size(a, v, &o->min_bytes));
        else if (strcmp(a, "-e") == 0 || strcmp(a, "--max-bytes") == 0)
            MP_TRY(parse_size(a, v, &o->max_bytes));
        else if (strcmp(a, "-f") == 0 || strcmp(a, "--factor") == 0) {
            MP_TRY(parse_int(a, v, 2, 1024, &o->factor));
            factor_given = true;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--iters") == 0)
            MP_TRY(parse_int(a, v, 1, 1000000, &o->iters));
        else if (strcmp(a, "-w") == 0 || strcmp(a, "--warmup") == 0)
            MP_TRY(parse_int(a, v, 0, 1000000, &o->warmup));
        else if (strcmp(a, "-r") == 0 || strcmp(a, "--rounds") == 0)
            MP_TRY(parse_int(a, v, 1, 1000, &o->rounds));
        else if (strcmp(a, "--op") == 0)
            MP_TRY(parse_names(a, v, OP_NAMES, 3, &o->ops));
        else if (strcmp(a, "-d") == 0 || strcmp(a, "--datatype") == 0)
            MP_TRY(parse_names(a, v, TYPE_NAMES, 3, &o->types));
        else if (strcmp(a, "-i") == 0 || strcmp(a, "--step-bytes") == 0)
            MP_TRY(parse_size(a, v, &o->step_bytes));
        else if (strcmp(a, "--skew") == 0)
            MP_TRY(parse_int(a, v, 0, 10000000, &o->skew_us));
        else {
            MP_TRY(parse_int(a, v, 1, 604800, &t)); /* --timeout */
            o->timeout_s = t;
        }
    }
    if (o->min_bytes > o->max_bytes)
        return mp_fail(MP_EUSAGE, "bench-comm: -b (%lld) is larger than -e (%lld)",
                       (long long)o->min_bytes, (long long)o->max_bytes);
    if (factor_given && o->step_bytes > 0)
        return mp_fail(MP_EUSAGE, "bench-comm: give -f (sizes times a factor) or -i (sizes plus "
                                  "a step), not both");
    if (o->step_bytes > 0 && (o->max_bytes - o->min_bytes) / o->step_bytes >= MP_BENCH_MAX_SIZES)
        return mp_fail(MP_EUSAGE, "bench-comm: -i %lld from -b %lld to -e %lld makes more than %d "
                                  "sizes", (long long)o->step_bytes, (long long)o->min_bytes,
                       (long long)o->max_bytes, MP_BENCH_MAX_SIZES);
    if (o->skew_us > 0 && !o->blocking)
        return mp_fail(MP_EUSAGE, "bench-comm: --skew needs --blocking (queued collectives have "
                                  "no single start to delay)");
    if (o->blocking && (int64_t)o->iters * o->rounds > MP_BENCH_BLOCKING_MAX)
        return mp_fail(MP_EUSAGE, "bench-comm: --blocking keeps every iteration's time: -n times "
                                  "-r (%lld) may be at most %d",
                       (long long)o->iters * o->rounds, MP_BENCH_BLOCKING_MAX);
    return MP_OK;
}

typedef struct row {
    int op; /* index into OPS */
    int64_t bytes, count;
    mp_dtype dt;
    double us, raw_us;
    int64_t wrong;
} row;

static const char *type_name(mp_dtype dt)
{
    return TYPE_NAMES[dt == MP_F32 ? 0 : dt == MP_F16 ? 1 : 2];
}

/* The communicator's collective of row r over buf (host memory, whole blocked buffer). */
static mp_coll coll_of(const mp_comm *c, const row *r, void *buf, const char *what)
{
    mp_coll_kind kind = OPS[r->op].kind;
    if (kind == MP_COLL_ALLREDUCE)
        return mp_coll_of(kind, buf, (size_t)r->count, r->dt, MP_REDOP_SUM, what);
    return mp_coll_blocks(kind, buf, (size_t)r->count, r->dt, (size_t)(r->count / c->size), 0,
                          what);
}

/* Mean seconds per collective over o->iters after o->warmup, the slowest rank's. Like
 * nccl-tests on a stream, the iterations are queued back to back on the transport and waited
 * for once. */
static mp_status time_ours(mp_comm *c, const mp_bench_comm_opts *o, void *buf, row *r, double *s)
{
    uint64_t ticket = 0;
    mp_coll coll = coll_of(c, r, buf, "bench-comm collective");
    for (int i = 0; i < o->warmup; i++)
        MP_TRY(mp_comm_coll_start(c, NULL, &coll, &ticket));
    if (ticket)
        MP_TRY(mp_comm_coll_wait(c, ticket));
    MPI_CHECK(MPI_Barrier(c->world));
    *s = MPI_Wtime();
    for (int i = 0; i < o->iters; i++)
        MP_TRY(mp_comm_coll_start(c, NULL, &coll, &ticket));
    MP_TRY(mp_comm_coll_wait(c, ticket));
    *s = (MPI_Wtime() - *s) / o->iters;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE, MPI_MAX, c->world));
    return MP_OK;
}

/* One raw MPI call doing row r's collective in place over buf. */
static mp_status raw_call(mp_comm *c, void *buf, const row *r)
{
    MPI_Datatype type = r->dt == MP_F32 ? MPI_FLOAT : MPI_INT16_T;
    int n = (int)r->count, block = (int)(r->count / c->size);
    switch (OPS[r->op].kind) {
    case MP_COLL_REDUCE_SCATTER:
        MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, block, type, MPI_SUM, c->world));
        break;
    case MP_COLL_ALLGATHER:
        MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, block, type, c->world));
        break;
    default:
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, type, MPI_SUM, c->world));
        break;
    }
    return MP_OK;
}

static mp_status time_raw(mp_comm *c, const mp_bench_comm_opts *o, void *buf, row *r, double *s)
{
    for (int i = 0; i < o->warmup; i++)
        MP_TRY(raw_call(c, buf, r));
    MPI_CHECK(MPI_Barrier(c->world));
    *s = MPI_Wtime();
    for (int i = 0; i < o->iters; i++)
        MP_TRY(raw_call(c, buf, r));
    *s = (MPI_Wtime() - *s) / o->iters;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE, MPI_MAX, c->world));
    return MP_OK;
}

/* One collective of row r through the communicator, waited for. */
static mp_status one_ours(mp_comm *c, void *buf, const row *r)
{
    uint64_t ticket;
    mp_coll coll = coll_of(c, r, buf, "bench-comm collective");
    MP_TRY(mp_comm_coll_start(c, NULL, &coll, &ticket));
    return mp_comm_coll_wait(c, ticket);
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
static mp_status time_each(mp_comm *c, const mp_bench_comm_opts *o, void *buf, const row *r,
                           mp_status (*one)(mp_comm *, void *, const row *), double *t, int64_t *n)
{
    for (int i = 0; i < o->warmup; i++)
        MP_TRY(one(c, buf, r));
    for (int i = 0; i < o->iters; i++) {
        if (o->skew_us > 0 && c->rank == c->size - 1)
            busy(o->skew_us);
        double s = MPI_Wtime();
        MP_TRY(one(c, buf, r));
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
static mp_status measure_each(mp_comm *c, const mp_bench_comm_opts *o, void *buf, row *r)
{
    int64_t cap = (int64_t)o->rounds * o->iters, n[2] = {0, 0};
    double *t = mp_alloc((size_t)(2 * cap) * sizeof *t, MP_MEM_WORKSPACE);
    mp_status st = MP_OK;
    for (int k = 0; k < o->rounds && st == MP_OK; k++)
        for (int j = 0; j < 2 && st == MP_OK; j++) { /* ours first in even rounds */
            int which = (j + k) % 2;
            st = time_each(c, o, buf, r, which == 0 ? one_ours : raw_call, t + which * cap,
                           &n[which]);
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

static mp_status check(mp_comm *c, void *buf, row *r)
{
    int64_t block = r->count / c->size, lo = 0, hi = r->count;
    for (int64_t i = 0; i < r->count; i++) /* an all-gather must overwrite the -1 */
        mp_store(buf, r->dt, (size_t)i,
                 OPS[r->op].kind == MP_COLL_ALLGATHER && i / block != c->rank ? -1.0
                                                                              : input(i, c->rank));
    uint64_t ticket;
    mp_coll coll = coll_of(c, r, buf, "bench-comm check");
    MP_TRY(mp_comm_coll_start(c, NULL, &coll, &ticket));
    MP_TRY(mp_comm_coll_wait(c, ticket));
    if (OPS[r->op].kind == MP_COLL_REDUCE_SCATTER) { /* only the rank's block is defined */
        lo = c->rank * block;
        hi = lo + block;
    }
    int64_t wrong = 0;
    for (int64_t i = lo; i < hi; i++)
        wrong += mp_load(buf, r->dt, (size_t)i) != expected(c, r, i);
    MPI_CHECK(MPI_Allreduce(&wrong, &r->wrong, 1, MPI_INT64_T, MPI_SUM, c->world));
    return MP_OK;
}

static mp_status measure(mp_comm *c, const mp_bench_comm_opts *o, void *buf, row *r)
{
    r->us = r->raw_us = 1e30;
    memset(buf, 0, (size_t)r->bytes);
    if (o->blocking) {
        MP_TRY(measure_each(c, o, buf, r));
        return check(c, buf, r);
    }
    for (int k = 0; k < o->rounds; k++)
        for (int j = 0; j < 2; j++) { /* ours first in even rounds, raw first in odd ones */
            double s;
            if ((j + k) % 2 == 0) {
                MP_TRY(time_ours(c, o, buf, r, &s));
                r->us = fmin(r->us, s * 1e6);
            } else {
                MP_TRY(time_raw(c, o, buf, r, &s));
                r->raw_us = fmin(r->raw_us, s * 1e6);
            }
        }
    return check(c, buf, r);
}

/* nccl-tests' bus bandwidth factor of the row's collective on n ranks. */
static double bus_factor(const row *r, int n)
{
    return (OPS[r->op].kind == MP_COLL_ALLREDUCE ? 2.0 : 1.0) * (n - 1) / n;
}

static void print_row(FILE *out, const row *r, int n, bool csv)
{
    double bus = bus_factor(r, n);
    double alg = (double)r->bytes / r->us / 1e3, raw = (double)r->bytes / r->raw_us / 1e3;
    const char *rawt = r->dt == MP_F32 ? "float" : "int16";
    const char *redop = OPS[r->op].kind == MP_COLL_ALLGATHER ? "none" : "sum";
    if (csv)
        fprintf(out, "%s,%lld,%lld,%s,%s,%.2f,%.3f,%.3f,%lld,%s,%.2f,%.3f,%.3f,%.3f\n",
                OP_NAMES[r->op], (long long)r->bytes, (long long)r->count, type_name(r->dt),
                redop, r->us, alg, alg * bus, (long long)r->wrong, rawt, r->raw_us, raw,
                raw * bus, alg / raw);
    else
        fprintf(out, "%12lld %12lld %9s %5s %10.1f %7.2f %7.2f %6lld   %6s %10.1f %7.2f %7.2f "
                     "%6.2f\n",
                (long long)r->bytes, (long long)r->count, type_name(r->dt), redop, r->us, alg,
                alg * bus, (long long)r->wrong, rawt, r->raw_us, raw, raw * bus, alg / raw);
}

static void print_header(FILE *out, const mp_comm *c, const mp_bench_comm_opts *o, int op)
{
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
    static const char *raw[3] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Allgather"};
    char how[256], late[64] = "";
    if (o->skew_us > 0)
        snprintf(late, sizeof late, ", the last rank computing %d us first", o->skew_us);
    if (o->blocking)
        snprintf(how, sizeof how, "blocking iterations after %d warm-up in each of %d "
                 "alternating rounds, the median as the last rank to start saw it%s",
                 o->warmup, o->rounds, late);
    else
        snprintf(how, sizeof how, "iterations after %d warm-up, best of %d alternating rounds",
                 o->warmup, o->rounds);
    fprintf(out,
            "# mpdist bench-comm: in-place %s, %d ranks on %d host%s, transport "
            "%s; %d %s\n"
            "#\n"
            "#                                          ---- mpdist communicator ----          "
            "---- raw %s, same bytes ----\n"
            "#       size        count      type redop       time   algbw   busbw #wrong     "
            "type       time   algbw   busbw  ratio\n"
            "#        (B)   (elements)                       (us)  (GB/s)  (GB/s)            "
            "           (us)  (GB/s)  (GB/s)\n",
            OPS[op].title, c->size, hosts, hosts > 1 ? "s" : "", c->tx.ops->name, o->iters, how,
            raw[op]);
}

/* The rows of collective `op` in one dtype; adds their wrong elements to *wrong. */
static mp_status sweep(mp_comm *c, const mp_bench_comm_opts *o, void *buf, int op, mp_dtype dt,
                       FILE *out, int64_t *wrong)
{
    double sum[2] = {0, 0};
    int nbig = 0;
    int64_t last = 0;
    for (int64_t b = o->min_bytes; b <= o->max_bytes;
         b = o->step_bytes > 0 ? b + o->step_bytes : b * o->factor) {
        row r = {.op = op, .dt = dt};
        r.count = b / (int64_t)mp_dtype_size(dt);
        if (OPS[op].kind != MP_COLL_ALLREDUCE)
            r.count -= r.count % c->size; /* whole blocks */
        if (r.count < 1 || r.count > 2147483647LL || r.count == last)
            continue; /* a step smaller than an element (or a block) repeats no row */
        last = r.count;
        r.bytes = r.count * (int64_t)mp_dtype_size(dt);
        MP_TRY(measure(c, o, buf, &r));
        *wrong += r.wrong;
        if (c->rank == 0)
            print_row(out, &r, c->size, o->csv);
        if (r.bytes >= 1048576) {
            sum[0] += (double)r.bytes / r.us / 1e3 * bus_factor(&r, c->size);
            sum[1] += (double)r.bytes / r.raw_us / 1e3 * bus_factor(&r, c->size);
            nbig++;
        }
    }
    if (c->rank == 0 && !o->csv && nbig > 0)
        fprintf(out, "# Avg bus bandwidth, %s, %s, sizes >= 1 MiB: communicator %.3f GB/s, raw "
                     "%.3f GB/s, ratio %.3f\n",
                OP_NAMES[op], type_name(dt), sum[0] / nbig, sum[1] / nbig, sum[0] / sum[1]);
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

mp_status mp_bench_comm_run(mp_comm *c, const mp_bench_comm_opts *o, FILE *out)
{
    c->timeout_s = o->timeout_s;
    void *buf = mp_alloc((size_t)o->max_bytes, MP_MEM_WORKSPACE);
    if (c->rank == 0)
        print_header(out, c, o, -1);
    mp_status st = MP_OK;
    int64_t wrong = 0;
    for (int op = 0; op < 3 && st == MP_OK; op++) {
        if (!(o->ops & 1u << op))
            continue;
        if (c->rank == 0)
            print_header(out, c, o, op);
        for (int k = 0; k < 3 && st == MP_OK; k++)
            if (o->types & 1u << k)
                st = sweep(c, o, buf, op, TYPES[k], out, &wrong);
    }
    mp_free(buf);
    if (st == MP_OK && wrong > 0)
        st = mp_fail(MP_ECOMM, "bench-comm: %lld wrong elements in the result checks",
                     (long long)wrong);
    if (c->rank == 0)
        fflush(out);
    return st;
}
