/* bench_batchnorm (issue 21): times the CPU backend's BatchNorm alone, training forward and
 * backward (with dx), on the two BatchNorm layers of cnn_bn at batch 128 (NHWC 128x28x28x32 and
 * 128x14x14x64), in FP32, fp16 and bf16 with FP32 parameters and statistics, as O0 and O2 run
 * them. Each dtype: 2 warm-up steps, then REPS steps of both layers' forward and backward, each
 * call timed with mp_now; prints the mean ms per step of forward and of backward (both layers
 * together) and the bytes a step moves (forward: x read twice, y written once; backward: x and
 * dy read twice, dx written once), with the rate that gives; and, last, the mean ms of a
 * backward without dx (parameter gradients only: the sums pass alone).
 * Usage: bench_batchnorm [THREADS (default 2)] [REPS (default 20)] [LEVEL], integers 1-4096;
 * LEVEL (0-3) caps the vector level of engine/backend_cpu/isa.h (0 BASE, 1 AVX2, 2 AVX512,
 * 3 AVX512BF16; default: the CPU's highest), to compare the levels on one machine. A bad
 * argument or any failure prints one line on stderr and exits 2. */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_args.h"

#include "engine/backend_cpu/isa.h"
#include "engine/clock.h"
#include "engine/dtype.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/tensor.h"

/* A tensor of dtype dt filled with uniform values in [lo, hi) from r. */
static mp_tensor filled(mp_dtype dt, int ndim, const int64_t *shape, mp_rng *r, double lo,
                        double hi)
{
    mp_tensor t = mp_tensor_alloc(dt, ndim, shape, MP_MEM_ACTIVATIONS);
    if (!t.data) {
        fprintf(stderr, "bench_batchnorm: out of memory\n");
        exit(2);
    }
    for (int64_t i = 0; i < mp_tensor_numel(&t); i++)
        mp_store(t.data, dt, (size_t)i, lo + (hi - lo) * mp_rng_uniform(r));
    return t;
}

static void check(mp_status s, const char *what)
{
    if (s != MP_OK) {
        fprintf(stderr, "bench_batchnorm: %s failed (%d)\n", what, (int)s);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    int threads = mp_bench_count_arg(argc, argv, 1, 2);
    int reps = mp_bench_count_arg(argc, argv, 2, 20);
    int level = argc > 3 && argv[3][0] >= '0' && argv[3][0] <= '3' && !argv[3][1]
                    ? argv[3][0] - '0'
                    : argc > 3 ? -1 : MP_ISA_AVX512BF16;
    if (argc > 4 || threads < 1 || reps < 1 || level < 0) {
        fprintf(stderr, "bench_batchnorm: usage: bench_batchnorm [THREADS] [REPS] [LEVEL] "
                        "(integers 1-4096; LEVEL 0-3)\n");
        return 2;
    }
    if (!mp_bench_env_ok("bench_batchnorm"))
        return 2;
    mp_cpu_isa_cap((mp_isa)level);
    const mp_ops *ops = mp_backend_cpu();
    mp_backend_cpu_threads(threads);
    const int64_t shapes[2][4] = {{128, 28, 28, 32}, {128, 14, 14, 64}};
    const mp_dtype dts[3] = {MP_F32, MP_F16, MP_BF16};
    const mp_bn_args a = {.eps = 1e-5, .momentum = 0.1};
    printf("# BatchNorm of cnn_bn (batch 128: 128x28x28x32 and 128x14x14x64), %d threads, "
           "%d steps after 2 warm-up, vector level %d\n",
           threads, reps, (int)mp_cpu_isa());
    printf("%-6s %12s %12s %14s %14s %12s\n", "dtype", "fwd_ms", "bwd_ms", "fwd_GB/s_min",
           "bwd_GB/s_min", "sums_ms");
    mp_rng r;
    mp_rng_seed(&r, 21, 0);
    for (int d = 0; d < 3; d++) {
        double tf = 0, tb = 0, ts = 0, fb = 0, bb = 0;
        for (int s = 0; s < 2; s++) {
            int64_t C = shapes[s][3];
            mp_tensor x = filled(dts[d], 4, shapes[s], &r, -1, 1);
            mp_tensor dy = filled(dts[d], 4, shapes[s], &r, -1, 1);
            mp_tensor y = filled(dts[d], 4, shapes[s], &r, 0, 0);
            mp_tensor dx = filled(dts[d], 4, shapes[s], &r, 0, 0);
            /* gamma, beta, running mean, running var, saved mean, saved invstd, dgamma, dbeta */
            const double lo[8] = {0.5, -0.1, -0.1, 1, 0, 0, 0, 0}, hi[8] = {1.5, 0.1, 0.1, 1.1};
            mp_tensor pc[8];
            for (int k = 0; k < 8; k++)
                pc[k] = filled(MP_F32, 1, &C, &r, lo[k], hi[k]);
            for (int k = 0; k < reps + 2; k++) {
                double t0 = mp_now();
                check(ops->batchnorm_forward(&a, true, &x, &pc[0], &pc[1], &pc[2], &pc[3], &pc[4],
                                             &pc[5], &y),
                      "batchnorm_forward");
                double t1 = mp_now();
                check(ops->batchnorm_backward(&a, &x, NULL, &dy, &pc[0], &pc[4], &pc[5], &dx,
                                              &pc[6], &pc[7]),
                      "batchnorm_backward");
                double t2 = mp_now();
                check(ops->batchnorm_backward(&a, &x, NULL, &dy, &pc[0], &pc[4], &pc[5], NULL,
                                              &pc[6], &pc[7]),
                      "batchnorm_backward");
                double t3 = mp_now();
                if (k >= 2) {
                    tf += t1 - t0;
                    tb += t2 - t1;
                    ts += t3 - t2;
                }
            }
            double bytes = (double)mp_tensor_bytes(&x);
            fb += 3 * bytes;
            bb += 5 * bytes;
            mp_tensor *all[4] = {&x, &dy, &y, &dx};
            for (int k = 0; k < 4; k++)
                mp_tensor_free(all[k]);
            for (int k = 0; k < 8; k++)
                mp_tensor_free(&pc[k]);
        }
        tf /= reps;
        tb /= reps;
        ts /= reps;
        printf("%-6s %12.3f %12.3f %14.1f %14.1f %12.3f\n", mp_dtype_name(dts[d]), tf * 1e3,
               tb * 1e3, fb / tf / 1e9, bb / tb / 1e9, ts * 1e3);
    }
    return 0;
}
