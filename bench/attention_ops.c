/* bench_attention (issue 49): times the CPU backend's two attention paths side by side, the
 * tiled ops (attention_flash_forward / _backward) and the (T, T) path (attention_forward /
 * _backward), on gpt's shape: N = 32 sequences, 4 heads of width 32 (D = 128), causal, dropout
 * 0.1, FP32, at context T. Rounds alternate the paths (tiled first in odd rounds); each round
 * times REPS forward and backward calls of each with mp_now after a warm-up call; prints per
 * path the median over the rounds of the mean ms per call, forward and backward, and the bytes
 * each keeps for backward (the tiled path's statistics, the (T, T) path's probabilities).
 * Usage: bench_attention [THREADS (default 2)] [T (default 128)] [REPS (default 10)]
 * [ROUNDS (default 5)], integers 1-4096. THREADS sets both OpenMP's and OpenBLAS's threads
 * (mp_backend_cpu_threads), as mpdist does. A bad argument or a failure prints one line on
 * stderr and exits 2. */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_args.h"

#include "engine/attn_flash.h"
#include "engine/backends.h"
#include "engine/clock.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/tensor.h"

enum { N = 32, HEADS = 4, D = 128, MAX_ROUNDS = 64 };

static mp_tensor filled(mp_dtype dt, const int64_t *shape, mp_rng *r)
{
    mp_tensor t = mp_tensor_alloc(dt, 4, shape, MP_MEM_ACTIVATIONS);
    if (!t.data) {
        fprintf(stderr, "bench_attention: out of memory\n");
        exit(2);
    }
    for (int64_t i = 0; i < mp_tensor_numel(&t); i++)
        mp_store(t.data, dt, (size_t)i, 2 * mp_rng_uniform(r) - 1);
    return t;
}

static void check(mp_status s, const char *what)
{
    if (s != MP_OK) {
        fprintf(stderr, "bench_attention: %s failed: %s\n", what, mp_error_message());
        exit(2);
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The path's tensors: qkv, the saved tensor, out, dout, dqkv. */
typedef struct path {
    bool flash;
    mp_tensor saved;
    double fwd[MAX_ROUNDS], bwd[MAX_ROUNDS];
} path;

/* One round of `reps` forward and backward calls of a path; their mean ms into round r. */
static void time_path(const mp_ops *ops, path *p, const mp_attn_desc *d, const mp_tensor *qkv,
                      mp_tensor *out, const mp_tensor *dout, mp_tensor *dqkv, int reps, int r)
{
    double f = 0, b = 0;
    for (int i = 0; i <= reps; i++) { /* call 0 warms up */
        double t0 = mp_now();
        check(p->flash ? ops->attention_flash_forward(d, qkv, &p->saved, out)
                       : ops->attention_forward(d, qkv, &p->saved, out),
              "forward");
        double t1 = mp_now();
        check(p->flash ? ops->attention_flash_backward(d, qkv, out, &p->saved, dout, dqkv)
                       : ops->attention_backward(d, qkv, &p->saved, dout, dqkv),
              "backward");
        if (i > 0)
            f += t1 - t0, b += mp_now() - t1;
    }
    p->fwd[r] = 1e3 * f / reps;
    p->bwd[r] = 1e3 * b / reps;
}

int main(int argc, char **argv)
{
    int threads = mp_bench_count_arg(argc, argv, 1, 2);
    int T = mp_bench_count_arg(argc, argv, 2, 128), reps = mp_bench_count_arg(argc, argv, 3, 10);
    int rounds = mp_bench_count_arg(argc, argv, 4, 5);
    if (threads < 0 || T < 0 || reps < 0 || rounds < 0 || rounds > MAX_ROUNDS || argc > 5) {
        fprintf(stderr, "usage: bench_attention [THREADS] [T] [REPS] [ROUNDS (at most %d)], "
                        "integers 1-4096\n", MAX_ROUNDS);
        return 2;
    }
    if (!mp_bench_env_ok("bench_attention"))
        return 2;
    mp_backend_cpu_threads(threads);
    const mp_ops *ops = mp_backend_cpu();
    mp_rng r;
    mp_rng_seed(&r, 49, 0);
    const int64_t qs[4] = {N, T, 1, 3 * D}, os[4] = {N, T, 1, D};
    const int64_t ps[4] = {N, HEADS, T, T}, ss[4] = {N, HEADS, T, 2};
    mp_tensor qkv = filled(MP_F32, qs, &r), dout = filled(MP_F32, os, &r);
    mp_tensor out = filled(MP_F32, os, &r), dqkv = filled(MP_F32, qs, &r);
    path paths[2] = {{.flash = true, .saved = filled(MP_F32, ss, &r)},
                     {.flash = false, .saved = filled(MP_F32, ps, &r)}};
    mp_attn_desc d = {.heads = HEADS, .causal = true, .dropout_p = 0.1, .seed = 1, .offset = 0};
    for (int k = 0; k < rounds; k++)
        for (int j = 0; j < 2; j++) {
            path *p = &paths[k % 2 ? 1 - j : j];
            time_path(ops, p, &d, &qkv, &out, &dout, &dqkv, reps, k);
        }
    printf("bench_attention: N %d, %d heads of %d, T %d, causal, dropout 0.1, FP32; %d threads, "
           "%d rounds of %d calls\n", N, HEADS, D / HEADS, T, threads, rounds, reps);
    printf("%-8s %12s %12s %16s\n", "path", "forward ms", "backward ms", "saved bytes");
    for (int j = 0; j < 2; j++)
        printf("%-8s %12.2f %12.2f %16lld\n", paths[j].flash ? "tiled" : "(T, T)",
               median(paths[j].fwd, rounds), median(paths[j].bwd, rounds),
               (long long)mp_tensor_bytes(&paths[j].saved));
    for (int j = 0; j < 2; j++)
        mp_tensor_free(&paths[j].saved);
    mp_tensor_free(&qkv), mp_tensor_free(&dout), mp_tensor_free(&out), mp_tensor_free(&dqkv);
    return 0;
}
