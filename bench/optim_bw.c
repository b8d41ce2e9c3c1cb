/* bench_optim (issue 7): times the optimizer step alone against the memory-bandwidth floor.
 *
 * What is measured. For each case (a row) the flat buffers of docs/ARCHITECTURE.md §4 are allocated
 * in the backend's memory with N elements each, filled, stepped 3 times to warm up, then K calls of
 * ops->optim_step are queued back to back and waited for once with ops->sync(); time/step is
 * that wall time (mp_now) over K. Cases: O2 SGD with momentum with an fp16 and a bf16 model copy
 * (FP32 master, half grad, one FP32 slot, the half copy written in the same pass), O2 Adam with
 * fp16 (two FP32 slots), O0 FP32 SGD with momentum (no copy).
 *
 * Bytes per step. Per element, exactly from the dtype sizes: grad read once, the param read and
 * written, each slot read and written, the copy written. Nothing else need touch memory, so
 * these are the bytes any implementation of the step must move.
 *
 * Why the floor is bytes / copy bandwidth. The step does a few flops per element against 20-28
 * bytes, far below the flop/byte balance of any CPU or GPU: it is bound by memory bandwidth, and
 * the best a streaming kernel can do on this device is about what the device's own copy does
 * (ops->copy of a buffer of at least 256 MiB and of at least the largest case, so that caches
 * do not help; read + written bytes counted, the same clocking as the step). The reads and
 * writes of each case are near the copy's 1:1 mix (exactly 1:1 for the O2 cases). So floor =
 * bytes / copy bandwidth, and ratio = time / floor says how far the step is from the hardware:
 * about 1 leaves nothing but moving fewer bytes; well above 1 means bandwidth left unused
 * (uncoalesced access, conversion cost, launches, too small an N). A ratio a little under 1 is
 * possible: the copy routine is not the only way to stream (on the CPU memcpy's non-temporal
 * stores and single thread; on a GPU the copy engine's path).
 *
 * After timing, element 0 of the master must be finite and below its start and the model copy
 * must hold it rounded to its dtype, so a step that does nothing is not timed as fast.
 * Any failure prints one line on stderr and exits 2. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "engine/alloc.h"
#include "engine/backends.h"
#include "engine/clock.h"
#include "engine/dtype.h"
#include "engine/ops.h"
#include "engine/status.h"
#include "engine/tensor.h"

#define WARMUP 3
#define COPY_MIN_BYTES ((int64_t)256 << 20)
#define PARAM_START 0.5
#define GRAD_VALUE 1.0

typedef struct bench_opts {
    const char *device;
    int64_t params; /* 0: the default for the backend opened */
    int iters;
} bench_opts;

/* One row: an FP32 master updated from a `grad` gradient, with an optional model copy. */
typedef struct bench_case {
    const char *name;
    mp_optim_kind kind;
    mp_dtype grad;
    bool has_copy;
    mp_dtype copy;
} bench_case;

static const bench_case CASES[] = {
    {"O2 fp16 SGD momentum", MP_OPTIM_SGD, MP_F16, true, MP_F16},
    {"O2 bf16 SGD momentum", MP_OPTIM_SGD, MP_BF16, true, MP_BF16},
    {"O2 fp16 Adam", MP_OPTIM_ADAM, MP_F16, true, MP_F16},
    {"O0 fp32 SGD momentum", MP_OPTIM_SGD, MP_F32, false, MP_F32},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: bench_optim [--device cpu|cuda|auto] [--params N] [--iters K]\n"
                 "  --device  backend (default auto)\n"
                 "  --params  elements per flat buffer, e.g. 25e6 (default 25e6; 4e6 on the CPU)\n"
                 "  --iters   timed optimizer steps per case (default 20)\n");
}

static mp_status parse_opts(int argc, char **argv, bench_opts *o, bool *help)
{
    *o = (bench_opts){"auto", 0, 20};
    *help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            *help = true;
            return MP_OK;
        }
        if (strcmp(a, "--device") != 0 && strcmp(a, "--params") != 0 &&
            strcmp(a, "--iters") != 0)
            return mp_fail(MP_EUSAGE, "unknown option '%s' (see --help)", a);
        if (i + 1 >= argc)
            return mp_fail(MP_EUSAGE, "%s needs a value (see --help)", a);
        const char *v = argv[++i];
        char *end = NULL;
        errno = 0;
        if (strcmp(a, "--device") == 0) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0 && strcmp(v, "auto") != 0)
                return mp_fail(MP_EUSAGE, "--device takes cpu, cuda or auto, not '%s'", v);
            o->device = v;
        } else if (strcmp(a, "--params") == 0) {
            double x = strtod(v, &end);
            if (end == v || *end || errno || !(x >= 1 && x <= 4e9) || x != floor(x))
                return mp_fail(MP_EUSAGE, "--params takes a whole number from 1 to 4e9 (e.g. "
                                          "25e6), not '%s'", v);
            o->params = (int64_t)x;
        } else {
            long x = strtol(v, &end, 10);
            if (end == v || *end || errno || x < 1 || x > 1000000)
                return mp_fail(MP_EUSAGE, "--iters takes an integer from 1 to 1000000, not '%s'",
                               v);
            o->iters = (int)x;
        }
    }
    return MP_OK;
}

/* Bytes of memory one step moves per element: grad read, param read + written, each slot read
 * + written, the copy written. */
static int64_t bytes_per_elem(const bench_case *c)
{
    int64_t slots = c->kind == MP_OPTIM_SGD ? 1 : 2;
    int64_t b = (int64_t)mp_dtype_size(c->grad) + 2 * (int64_t)mp_dtype_size(MP_F32) +
                slots * 2 * (int64_t)mp_dtype_size(MP_F32);
    return b + (c->has_copy ? (int64_t)mp_dtype_size(c->copy) : 0);
}

/* Bytes the case's buffers occupy per element. */
static int64_t footprint_per_elem(const bench_case *c)
{
    int64_t slots = c->kind == MP_OPTIM_SGD ? 1 : 2;
    return (int64_t)mp_dtype_size(c->grad) + (int64_t)mp_dtype_size(MP_F32) * (1 + slots) +
           (c->has_copy ? (int64_t)mp_dtype_size(c->copy) : 0);
}

/* Fails cleanly, instead of aborting in the allocator, when the device says it lacks `need`. */
static mp_status check_room(const mp_ops *ops, int64_t need, const char *what)
{
    int64_t avail = ops->mem_free_bytes();
    if (avail >= 0 && need > avail)
        return mp_fail(MP_EUSAGE, "%s needs %lld bytes of %s memory, %lld are free (lower "
                                  "--params)", what, (long long)need, ops->name, (long long)avail);
    return MP_OK;
}

/* Mean seconds per ops->copy of `bytes` (a multiple of 4) within backend memory, K copies queued
 * after WARMUP and waited for once. a and b hold bytes / 4 FP32 elements. */
static mp_status time_copy(const mp_ops *ops, mp_tensor *a, mp_tensor *b, int iters, double *sec)
{
    size_t bytes = (size_t)mp_tensor_bytes(a);
    MP_TRY(ops->fill(a, 1.0));
    MP_TRY(ops->fill(b, 0.0));
    for (int i = 0; i < WARMUP; i++)
        MP_TRY(ops->copy(b->data, a->data, bytes));
    MP_TRY(ops->sync());
    double t0 = mp_now();
    for (int i = 0; i < iters; i++)
        MP_TRY(ops->copy(b->data, a->data, bytes));
    MP_TRY(ops->sync());
    *sec = (mp_now() - t0) / iters;
    float last = 0;
    MP_TRY(ops->copy_out(&last, (const char *)b->data + bytes - sizeof last, sizeof last));
    if (last != 1.0f)
        return mp_fail(MP_EINTERNAL, "copy check: the last element is %g, not 1", (double)last);
    return MP_OK;
}

/* The device copy bandwidth in bytes per second (read + written) over `bytes`. */
static mp_status copy_bandwidth(const mp_ops *ops, int64_t bytes, int iters, double *bw)
{
    MP_TRY(check_room(ops, 2 * bytes, "the copy measurement"));
    int64_t shape[1] = {bytes / 4};
    mp_tensor a = mp_tensor_new(ops, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    mp_tensor b = mp_tensor_new(ops, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    double sec = 0;
    mp_status st = time_copy(ops, &a, &b, iters, &sec);
    mp_tensor_delete(ops, &a);
    mp_tensor_delete(ops, &b);
    if (st == MP_OK)
        *bw = 2.0 * (double)bytes / sec;
    return st;
}

/* Element 0 of the master moved down from PARAM_START and stayed finite; the copy holds it
 * rounded to the copy's dtype. */
static mp_status check_step(const mp_ops *ops, const bench_case *c, const mp_tensor *p,
                            const mp_tensor *w)
{
    float v = 0;
    MP_TRY(ops->copy_out(&v, p->data, sizeof v));
    if (!isfinite(v) || !(v < (float)PARAM_START))
        return mp_fail(MP_EINTERNAL, "%s: after the steps master[0] is %g (started at %g)",
                       c->name, (double)v, PARAM_START);
    if (!w)
        return MP_OK;
    uint16_t h = 0;
    MP_TRY(ops->copy_out(&h, w->data, sizeof h));
    uint16_t want = c->copy == MP_F16 ? mp_f32_to_f16(v) : mp_f32_to_bf16(v);
    if (h != want)
        return mp_fail(MP_EINTERNAL, "%s: model copy[0] is 0x%04x, not master[0] %g rounded "
                                     "(0x%04x)", c->name, h, (double)v, want);
    return MP_OK;
}

/* Fills the buffers, takes WARMUP steps, then times `iters` steps (steps WARMUP + 1 onwards, so
 * none of them is the momentum buffer's first). */
static mp_status time_steps(const mp_ops *ops, const bench_case *c, int iters, mp_tensor *p,
                            mp_tensor *w, mp_tensor *g, mp_tensor *s1, mp_tensor *s2, double *sec)
{
    MP_TRY(ops->fill(p, PARAM_START));
    if (w)
        MP_TRY(ops->fill(w, PARAM_START));
    MP_TRY(ops->fill(g, GRAD_VALUE));
    MP_TRY(ops->fill(s1, 0.0));
    if (s2)
        MP_TRY(ops->fill(s2, 0.0));
    mp_optim_args a = {.kind = c->kind, .lr = 0.01, .grad_scale = 1.0 / 65536};
    if (c->kind == MP_OPTIM_SGD)
        a.momentum = 0.9;
    else {
        a.beta1 = 0.9;
        a.beta2 = 0.999;
        a.eps = 1e-8;
    }
    for (int i = 0; i < WARMUP; i++) {
        a.step = i + 1;
        MP_TRY(ops->optim_step(&a, NULL, p, w, g, s1, s2));
    }
    MP_TRY(ops->sync());
    double t0 = mp_now();
    for (int i = WARMUP; i < WARMUP + iters; i++) {
        a.step = i + 1;
        MP_TRY(ops->optim_step(&a, NULL, p, w, g, s1, s2));
    }
    MP_TRY(ops->sync());
    *sec = (mp_now() - t0) / iters;
    return check_step(ops, c, p, w);
}

/* Allocates one case's flat buffers of n elements, times it, frees them. */
static mp_status run_case(const mp_ops *ops, const bench_case *c, int64_t n, int iters,
                          double *sec)
{
    MP_TRY(check_room(ops, n * footprint_per_elem(c), c->name));
    int64_t shape[1] = {n};
    mp_tensor p = mp_tensor_new(ops, MP_F32, 1, shape, MP_MEM_MASTER);
    mp_tensor g = mp_tensor_new(ops, c->grad, 1, shape, MP_MEM_GRADS);
    mp_tensor s1 = mp_tensor_new(ops, MP_F32, 1, shape, MP_MEM_OPTIM);
    mp_tensor w = {0}, s2 = {0};
    if (c->has_copy)
        w = mp_tensor_new(ops, c->copy, 1, shape, MP_MEM_WEIGHTS);
    if (c->kind != MP_OPTIM_SGD)
        s2 = mp_tensor_new(ops, MP_F32, 1, shape, MP_MEM_OPTIM);
    mp_status st = time_steps(ops, c, iters, &p, c->has_copy ? &w : NULL, &g, &s1,
                              c->kind != MP_OPTIM_SGD ? &s2 : NULL, sec);
    mp_tensor_delete(ops, &p);
    mp_tensor_delete(ops, &g);
    mp_tensor_delete(ops, &s1);
    mp_tensor_delete(ops, &w);
    mp_tensor_delete(ops, &s2);
    return st;
}

static mp_status run(const bench_opts *o)
{
    mp_backend_options bo = {.device = 0, .allow_tf32 = false,
                             .conv_workspace_bytes = (int64_t)256 << 20};
    const mp_ops *ops = NULL;
    char why[320];
    MP_TRY(mp_backend_open(o->device, &bo, &ops, why, sizeof why));
    bool cpu = strncmp(ops->name, "cpu", 3) == 0;
    int64_t n = o->params > 0 ? o->params : cpu ? 4000000 : 25000000;
    size_t ncase = sizeof CASES / sizeof CASES[0];

    int64_t copy_bytes = COPY_MIN_BYTES;
    for (size_t k = 0; k < ncase; k++) {
        int64_t f = n * footprint_per_elem(&CASES[k]);
        copy_bytes = f > copy_bytes ? f : copy_bytes;
    }
    copy_bytes = (copy_bytes + 63) / 64 * 64;
    double bw = 0;
    MP_TRY(copy_bandwidth(ops, copy_bytes, o->iters, &bw));

    printf("# bench_optim: the optimizer step alone against the memory-bandwidth floor\n"
           "# backend %s; %lld parameters; %d timed steps after %d warm-up, waited for once\n"
           "copy bandwidth: %.2f GB/s (ops->copy of %lld bytes, read + written counted, mean of "
           "%d)\n"
           "#\n"
           "# %-22s %14s %12s %10s %10s %10s\n"
           "# %-22s %14s %12s %10s %10s %10s\n",
           why, (long long)n, o->iters, WARMUP, bw / 1e9, (long long)copy_bytes, o->iters,
           "case", "bytes/step", "time/step", "achieved", "floor", "ratio", "", "(B)", "(ms)",
           "(GB/s)", "(ms)", "time/floor");
    fflush(stdout);
    for (size_t k = 0; k < ncase; k++) {
        const bench_case *c = &CASES[k];
        double sec = 0;
        MP_TRY(run_case(ops, c, n, o->iters, &sec));
        double bytes = (double)(n * bytes_per_elem(c)), floor_s = bytes / bw;
        printf("  %-22s %14.0f %12.3f %10.2f %10.3f %10.2f\n", c->name, bytes, sec * 1e3,
               bytes / sec / 1e9, floor_s * 1e3, sec / floor_s);
        fflush(stdout);
    }
    return MP_OK;
}

int main(int argc, char **argv)
{
    bench_opts o;
    bool help = false;
    mp_status st = parse_opts(argc, argv, &o, &help);
    if (st == MP_OK && help) {
        usage(stdout);
        return 0;
    }
    if (st == MP_OK && !mp_bench_env_ok("bench_optim"))
        return 2;
    if (st == MP_OK)
        st = run(&o);
    if (st != MP_OK) {
        fprintf(stderr, "bench_optim: error: %s\n", mp_error_message());
        return 2;
    }
    return 0;
}
