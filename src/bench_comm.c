/* The all-reduce sweep (see bench_comm.h). Each row: the communicator's in-place sum of `count`
 * elements of one dtype, and raw MPI_Allreduce over the same bytes with MPI's own type of that
 * width (MPI_FLOAT for fp32, MPI_INT16_T for the half types), timed alternately in rounds; a
 * row's time is the best round's mean, the slowest rank's; which of the two goes first
 * alternates from round to round, so neither gains from a warm cache or a quiet machine. busbw = algbw * 2(n-1)/n as in
 * nccl-tests. After timing, one more all-reduce of small integers (exact in any order) counts
 * wrong elements over all ranks. */
#include "src/bench_comm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/alloc.h"

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

mp_status mp_bench_comm_parse(mp_bench_comm_opts *o, int argc, char **argv, int first)
{
    *o = (mp_bench_comm_opts){1024, 16 << 20, 2, 20, 5, 3, false, MP_COMM_DEFAULT_TIMEOUT_S};
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--csv") == 0) {
            o->csv = true;
            continue;
        }
        const char *known[] = {"-b", "--min-bytes", "-e", "--max-bytes", "-f", "--factor", "-n",
                               "--iters", "-w", "--warmup", "-r", "--rounds", "--timeout"};
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
        else if (strcmp(a, "-f") == 0 || strcmp(a, "--factor") == 0)
            MP_TRY(parse_int(a, v, 2, 1024, &o->factor));
        else if (strcmp(a, "-n") == 0 || strcmp(a, "--iters") == 0)
            MP_TRY(parse_int(a, v, 1, 1000000, &o->iters));
        else if (strcmp(a, "-w") == 0 || strcmp(a, "--warmup") == 0)
            MP_TRY(parse_int(a, v, 0, 1000000, &o->warmup));
        else if (strcmp(a, "-r") == 0 || strcmp(a, "--rounds") == 0)
            MP_TRY(parse_int(a, v, 1, 1000, &o->rounds));
        else {
            MP_TRY(parse_int(a, v, 1, 604800, &t)); /* --timeout */
            o->timeout_s = t;
        }
    }
    if (o->min_bytes > o->max_bytes)
        return mp_fail(MP_EUSAGE, "bench-comm: -b (%lld) is larger than -e (%lld)",
                       (long long)o->min_bytes, (long long)o->max_bytes);
    return MP_OK;
}

typedef struct row {
    int64_t bytes, count;
    mp_dtype dt;
    double us, raw_us;
    int64_t wrong;
} row;

static const char *type_name(mp_dtype dt)
{
    return dt == MP_F32 ? "float" : dt == MP_F16 ? "half" : "bfloat16";
}

/* Mean seconds per all-reduce over o->iters after o->warmup, the slowest rank's. Like
 * nccl-tests on a stream, the iterations are queued back to back on the transport and waited
 * for once. */
static mp_status time_ours(mp_comm *c, const mp_bench_comm_opts *o, void *buf, row *r, double *s)
{
    uint64_t ticket = 0;
    for (int i = 0; i < o->warmup; i++)
        MP_TRY(mp_comm_allreduce_start(c, buf, (size_t)r->count, r->dt, MP_REDOP_SUM,
                                       "bench-comm all-reduce", &ticket));
    if (ticket)
        MP_TRY(mp_comm_wait(c, ticket));
    MPI_CHECK(MPI_Barrier(c->world));
    *s = MPI_Wtime();
    for (int i = 0; i < o->iters; i++)
        MP_TRY(mp_comm_allreduce_start(c, buf, (size_t)r->count, r->dt, MP_REDOP_SUM,
                                       "bench-comm all-reduce", &ticket));
    MP_TRY(mp_comm_wait(c, ticket));
    *s = (MPI_Wtime() - *s) / o->iters;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE, MPI_MAX, c->world));
    return MP_OK;
}

static mp_status time_raw(mp_comm *c, const mp_bench_comm_opts *o, void *buf, row *r, double *s)
{
    MPI_Datatype type = r->dt == MP_F32 ? MPI_FLOAT : MPI_INT16_T;
    for (int i = 0; i < o->warmup; i++)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)r->count, type, MPI_SUM, c->world));
    MPI_CHECK(MPI_Barrier(c->world));
    *s = MPI_Wtime();
    for (int i = 0; i < o->iters; i++)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)r->count, type, MPI_SUM, c->world));
    *s = (MPI_Wtime() - *s) / o->iters;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE, MPI_MAX, c->world));
    return MP_OK;
}

/* Small integers whose sum over up to 85 ranks is below 256: exact in every dtype, any order. */
static double input(int64_t i, int rank) { return (double)((i % 3) + (rank % 2)); }

static mp_status check(mp_comm *c, void *buf, row *r)
{
    for (int64_t i = 0; i < r->count; i++)
        mp_store(buf, r->dt, (size_t)i, input(i, c->rank));
    MP_TRY(mp_comm_allreduce(c, buf, (size_t)r->count, r->dt, MP_REDOP_SUM, "bench-comm check"));
    int64_t wrong = 0;
    for (int64_t i = 0; i < r->count; i++) {
        double want = 0;
        for (int k = 0; k < c->size; k++)
            want += input(i, k);
        wrong += mp_load(buf, r->dt, (size_t)i) != want;
    }
    MPI_CHECK(MPI_Allreduce(&wrong, &r->wrong, 1, MPI_INT64_T, MPI_SUM, c->world));
    return MP_OK;
}

static mp_status measure(mp_comm *c, const mp_bench_comm_opts *o, void *buf, row *r)
{
    r->us = r->raw_us = 1e30;
    memset(buf, 0, (size_t)r->bytes);
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

static void print_row(FILE *out, const row *r, int n, bool csv)
{
    double bus = 2.0 * (n - 1) / n;
    double alg = (double)r->bytes / r->us / 1e3, raw = (double)r->bytes / r->raw_us / 1e3;
    const char *rawt = r->dt == MP_F32 ? "float" : "int16";
    if (csv)
        fprintf(out, "%lld,%lld,%s,sum,%.2f,%.3f,%.3f,%lld,%s,%.2f,%.3f,%.3f,%.3f\n",
                (long long)r->bytes, (long long)r->count, type_name(r->dt), r->us, alg, alg * bus,
                (long long)r->wrong, rawt, r->raw_us, raw, raw * bus, alg / raw);
    else
        fprintf(out, "%12lld %12lld %9s   sum %10.1f %7.2f %7.2f %6lld   %6s %10.1f %7.2f %7.2f "
                     "%6.2f\n",
                (long long)r->bytes, (long long)r->count, type_name(r->dt), r->us, alg, alg * bus,
                (long long)r->wrong, rawt, r->raw_us, raw, raw * bus, alg / raw);
}

static void print_header(FILE *out, const mp_comm *c, const mp_bench_comm_opts *o)
{
    if (o->csv) {
        fprintf(out, "size_bytes,count,type,redop,time_us,algbw_gbs,busbw_gbs,wrong,raw_type,"
                     "raw_time_us,raw_algbw_gbs,raw_busbw_gbs,busbw_ratio\n");
        return;
    }
    int hosts = 1;
    for (int r = 1; r < c->size; r++)
        hosts += strcmp(mp_comm_host(c, r), mp_comm_host(c, r - 1)) != 0;
    fprintf(out,
            "# mpdist bench-comm: in-place all-reduce (sum), %d ranks on %d host%s, transport "
            "%s; %d iterations after %d warm-up, best of %d alternating rounds\n"
            "#\n"
            "#                                          ---- mpdist communicator ----          "
            "---- raw MPI_Allreduce, same bytes ----\n"
            "#       size        count      type redop       time   algbw   busbw #wrong     "
            "type       time   algbw   busbw  ratio\n"
            "#        (B)   (elements)                       (us)  (GB/s)  (GB/s)            "
            "           (us)  (GB/s)  (GB/s)\n",
            c->size, hosts, hosts > 1 ? "s" : "", c->tx.ops->name, o->iters, o->warmup, o->rounds);
}

mp_status mp_bench_comm_run(mp_comm *c, const mp_bench_comm_opts *o, FILE *out)
{
    const mp_dtype types[3] = {MP_F32, MP_F16, MP_BF16};
    c->timeout_s = o->timeout_s;
    void *buf = mp_alloc((size_t)o->max_bytes, MP_MEM_WORKSPACE);
    if (c->rank == 0)
        print_header(out, c, o);
    mp_status st = MP_OK;
    int64_t wrong = 0;
    for (int k = 0; k < 3 && st == MP_OK; k++) {
        double sum[2] = {0, 0}, bus = 2.0 * (c->size - 1) / c->size;
        int nbig = 0;
        for (int64_t b = o->min_bytes; b <= o->max_bytes && st == MP_OK; b *= o->factor) {
            row r = {.bytes = b, .dt = types[k]};
            r.count = b / (int64_t)mp_dtype_size(types[k]);
            if (r.count < 1 || r.count > 2147483647LL)
                continue;
            r.bytes = r.count * (int64_t)mp_dtype_size(types[k]);
            st = measure(c, o, buf, &r);
            if (st != MP_OK)
                break;
            wrong += r.wrong;
            if (c->rank == 0)
                print_row(out, &r, c->size, o->csv);
            if (r.bytes >= 1048576) {
                sum[0] += (double)r.bytes / r.us / 1e3 * bus;
                sum[1] += (double)r.bytes / r.raw_us / 1e3 * bus;
                nbig++;
            }
        }
        if (c->rank == 0 && !o->csv && nbig > 0)
            fprintf(out, "# Avg bus bandwidth, %s, sizes >= 1 MiB: communicator %.3f GB/s, raw "
                         "%.3f GB/s, ratio %.3f\n",
                    type_name(types[k]), sum[0] / nbig, sum[1] / nbig, sum[0] / sum[1]);
    }
    mp_free(buf);
    if (st == MP_OK && wrong > 0)
        st = mp_fail(MP_ECOMM, "bench-comm: %lld wrong elements in the result checks",
                     (long long)wrong);
    if (c->rank == 0)
        fflush(out);
    return st;
}
