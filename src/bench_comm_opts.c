/* bench-comm's command line (see bench_comm.h). */
#include "src/bench_comm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* bench_comm.h's name tables: bit k of -d names mp_bench_type_names[k], of --op
 * mp_bench_op_names[k]. */
const char *const mp_bench_type_names[3] = {"float", "half", "bfloat16"};
const char *const mp_bench_op_names[3] = {"allreduce", "reduce_scatter", "all_gather"};

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
        if (strcmp(a, "--share-gpu") == 0) {
            o->share_gpu = true;
            continue;
        }
        const char *known[] = {"-b", "--min-bytes", "-e", "--max-bytes", "-f", "--factor", "-n",
                               "--iters", "-w", "--warmup", "-r", "--rounds", "--timeout", "--op",
                               "--skew", "-d", "--datatype", "-i", "--step-bytes",
                               "--device"};
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
            MP_TRY(parse_names(a, v, mp_bench_op_names, 3, &o->ops));
        else if (strcmp(a, "-d") == 0 || strcmp(a, "--datatype") == 0)
            MP_TRY(parse_names(a, v, mp_bench_type_names, 3, &o->types));
        else if (strcmp(a, "-i") == 0 || strcmp(a, "--step-bytes") == 0)
            MP_TRY(parse_size(a, v, &o->step_bytes));
        else if (strcmp(a, "--device") == 0) {
            if (strcmp(v, "cuda") != 0 && strcmp(v, "cpu") != 0)
                return mp_fail(MP_EUSAGE, "bench-comm: --device takes cuda or cpu (the backend "
                                          "whose memory the buffers are), not '%s'", v);
            o->device = v;
        } else if (strcmp(a, "--skew") == 0)
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
    if (o->share_gpu && !(o->device && strcmp(o->device, "cuda") == 0))
        return mp_fail(MP_EUSAGE, "bench-comm: --share-gpu needs --device cuda (ranks sharing a "
                                  "GPU through NCCL)");
    if (o->skew_us > 0 && !o->blocking)
        return mp_fail(MP_EUSAGE, "bench-comm: --skew needs --blocking (queued collectives have "
                                  "no single start to delay)");
    if (o->blocking && (int64_t)o->iters * o->rounds > MP_BENCH_BLOCKING_MAX)
        return mp_fail(MP_EUSAGE, "bench-comm: --blocking keeps every iteration's time: -n times "
                                  "-r (%lld) may be at most %d",
                       (long long)o->iters * o->rounds, MP_BENCH_BLOCKING_MAX);
    return MP_OK;
}

/* The names of the bits of `bits` (names[i] for bit i, of 3), comma-separated, in s. */
static const char *bit_names(unsigned bits, const char *const *names, char *s, size_t cap)
{
    size_t len = 0;
    s[0] = '\0';
    for (int i = 0; i < 3; i++)
        if (bits & (1u << i) && len < cap)
            len += (size_t)snprintf(s + len, cap - len, "%s%s", len ? "," : "", names[i]);
    return s;
}

/* o as options again, every field, in a fixed form: what two ranks compare. */
static void opts_text(const mp_bench_comm_opts *o, char *s, size_t cap)
{
    char ops[64], types[64];
    char step[48];
    snprintf(step, sizeof step, "%s %lld", o->step_bytes > 0 ? "-i" : "-f",
             o->step_bytes > 0 ? (long long)o->step_bytes : (long long)o->factor);
    snprintf(s, cap, "-b %lld -e %lld %s -n %d -w %d -r %d --op %s -d %s --timeout %g --skew %d%s%s"
             "%s%s%s", (long long)o->min_bytes, (long long)o->max_bytes, step, o->iters,
             o->warmup, o->rounds, bit_names(o->ops, mp_bench_op_names, ops, sizeof ops),
             bit_names(o->types, mp_bench_type_names, types, sizeof types), o->timeout_s,
             o->skew_us, o->device ? " --device " : "", o->device ? o->device : "",
             o->csv ? " --csv" : "", o->blocking ? " --blocking" : "",
             o->share_gpu ? " --share-gpu" : "");
}

mp_status mp_bench_comm_same_opts(mp_comm *c, const mp_bench_comm_opts *o)
{
    char mine[320], first[320];
    opts_text(o, mine, sizeof mine);
    memcpy(first, mine, sizeof first);
    MP_TRY(mp_comm_bcast(c, first, sizeof first, 0, "bench-comm's options"));
    if (strcmp(mine, first) != 0)
        return mp_fail(MP_EUSAGE, "bench-comm: rank %d on %s was given other options than rank 0 "
                       "(rank %d: %s; rank 0: %s); give every rank the same", c->rank, c->host,
                       c->rank, mine, first);
    return MP_OK;
}
