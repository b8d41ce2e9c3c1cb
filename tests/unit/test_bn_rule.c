/* The CPU's BatchNorm follows engine/bn_rule.h bit for bit: a plain scalar reference written
 * from the rule's text (chunks of rows, 8 lanes a chunk, each chunk's sum and its squares about
 * its own mean, the chunks' deviation terms added in order) gives the same bytes as the op for
 * y, save_mean, save_invstd, the running statistics, dx, dgamma and dbeta, in FP32, fp16, bf16
 * (FP32 arithmetic) and FP64, on one chunk, many chunks with a short last one, and channel
 * counts below, at and off the vector width (at 100 channels a chunk spans two of the kernels'
 * tiles), on 1 and 2 threads, at the CPU's vector level (engine/backend_cpu/isa.h;
 * test_bn_rule_base runs it again at the baseline, MPDIST_CPU_ISA=base, and this checks the
 * level it gets is the baseline). The GPU's kernels follow the
 * same rule (tests/gpu/op_table_dnn.c compares them with the CPU bit for bit), so this is what
 * makes the rule checkable on a machine without a GPU. */
#include "tests/util/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/isa.h"
#include "engine/bn_rule.h"
#include "engine/ops.h"

enum { L = MP_BN_LANES };

static const mp_bn_args args = {.eps = 1e-5, .momentum = 0.1};

/* The rule's per-channel statistics and gradient sums for accumulator type ACC, from x and dy
 * (row-major M x C, already widened to ACC) and the parameters; results into the out arrays. */
#define REF_BN(ACC, SFX)                                                                      \
    static void ref_##SFX(const ACC *x, const ACC *dy, const ACC *gamma, const ACC *beta,     \
                          ACC rm0, ACC rv0, int64_t M, int64_t C, ACC *mean, ACC *invstd,     \
                          ACC *rm, ACC *rv, ACC *y, ACC *dx, ACC *dg, ACC *db)                 \
    {                                                                                         \
        int64_t rows;                                                                         \
        const int64_t chunks = mp_bn_chunks(M, &rows);                                        \
        const ACC eps = (ACC)args.eps, mom = (ACC)args.momentum;                              \
        for (int64_t c = 0; c < C; c++) {                                                     \
            ACC sum = 0, ss = 0, sdy = 0, sdx = 0;                                            \
            for (int64_t k = 0; k < chunks; k++) {                                            \
                ACC ln[L] = {0};                                                              \
                for (int64_t i = k * rows; i < k * rows + mp_bn_chunk_n(M, rows, k); i++)    \
                    ln[(i - k * rows) % L] += x[i * C + c];                                   \
                ACC s = 0;                                                                    \
                for (int q = 0; q < L; q++)                                                   \
                    s += ln[q];                                                               \
                sum += s;                                                                     \
            }                                                                                 \
            mean[c] = sum / (ACC)M;                                                           \
            for (int64_t k = 0; k < chunks; k++) {                                            \
                const int64_t n = mp_bn_chunk_n(M, rows, k), r0 = k * rows;                   \
                ACC ln[L] = {0}, lq[L] = {0}, s = 0, q2 = 0;                                  \
                for (int64_t i = r0; i < r0 + n; i++)                                         \
                    ln[(i - r0) % L] += x[i * C + c];                                         \
                for (int q = 0; q < L; q++)                                                   \
                    s += ln[q];                                                               \
                const ACC cm = s / (ACC)n;                                                    \
                for (int64_t i = r0; i < r0 + n; i++)                                         \
                    lq[(i - r0) % L] += (x[i * C + c] - cm) * (x[i * C + c] - cm);            \
                for (int q = 0; q < L; q++)                                                   \
                    q2 += lq[q];                                                              \
                ss += q2 + (ACC)n * ((cm - mean[c]) * (cm - mean[c]));                        \
            }                                                                                 \
            invstd[c] = (ACC)1 / (ACC)sqrt((double)(ss / (ACC)M + eps));                      \
            rm[c] = ((ACC)1 - mom) * rm0 + mom * mean[c];                                     \
            rv[c] = ((ACC)1 - mom) * rv0 + mom * (ss / (ACC)(M - 1));                         \
            const ACC scale = invstd[c] * gamma[c];                                           \
            for (int64_t i = 0; i < M; i++)                                                   \
                y[i * C + c] = (x[i * C + c] - mean[c]) * scale + beta[c];                    \
            for (int64_t k = 0; k < chunks; k++) {                                            \
                const int64_t r0 = k * rows;                                                  \
                ACC l1[L] = {0}, l2[L] = {0}, s1 = 0, s2 = 0;                                 \
                for (int64_t i = r0; i < r0 + mp_bn_chunk_n(M, rows, k); i++) {               \
                    const ACC g = dy[i * C + c];                                              \
                    l1[(i - r0) % L] += g;                                                    \
                    l2[(i - r0) % L] += g * ((x[i * C + c] - mean[c]) * invstd[c]);           \
                }                                                                             \
                for (int q = 0; q < L; q++) {                                                 \
                    s1 += l1[q];                                                              \
                    s2 += l2[q];                                                              \
                }                                                                             \
                sdy += s1;                                                                    \
                sdx += s2;                                                                    \
            }                                                                                 \
            dg[c] = sdx;                                                                      \
            db[c] = sdy;                                                                      \
            const ACC kk = gamma[c] * invstd[c], mdy = sdy / (ACC)M, mdx = sdx / (ACC)M;      \
            for (int64_t i = 0; i < M; i++) {                                                 \
                const ACC xh = (x[i * C + c] - mean[c]) * invstd[c];                          \
                dx[i * C + c] = kk * (dy[i * C + c] - mdy - xh * mdx);                        \
            }                                                                                 \
        }                                                                                     \
    }
REF_BN(float, f32)
REF_BN(double, f64)

/* The bytes of n values of v stored in dtype dt equal t's (its first n elements). */
#define ASSERT_BITS(what, t, dt, v, n)                                                        \
    do {                                                                                      \
        mp_tensor w_ = mp_test_rand((dt), 1, (int64_t[]){(n)}, NULL, 0, 0);                   \
        for (int64_t i_ = 0; i_ < (n); i_++)                                                  \
            mp_store(w_.data, (dt), (size_t)i_, (double)(v)[i_]);                             \
        for (int64_t i_ = 0; i_ < (n); i_++)                                                  \
            if (memcmp((char *)w_.data + i_ * mp_dtype_size(dt),                              \
                       (char *)(t)->data + i_ * mp_dtype_size(dt), mp_dtype_size(dt)))         \
                fail_msg("%s, %s, M %lld C %lld: element %lld is %.9g, the rule gives %.9g",  \
                         what, mp_dtype_name(dt), (long long)M, (long long)C, (long long)i_,  \
                         mp_load((t)->data, (dt), (size_t)i_), (double)(v)[i_]);            \
        mp_tensor_free(&w_);                                                                  \
    } while (0)

/* One training forward and backward of M x C values of dtype dt against the reference. */
#define CHECK_BN(ACC, SFX, dt, pt, M, C)                                                      \
    do {                                                                                      \
        mp_rng r;                                                                             \
        mp_rng_seed(&r, (uint64_t)((M) * 131 + (C)), 7);                                      \
        const int64_t xs[2] = {(M), (C)};                                                     \
        mp_tensor x = mp_test_rand(dt, 2, xs, &r, -3.0, 5.0);                                 \
        mp_tensor dy = mp_test_rand(dt, 2, xs, &r, -1.0, 1.0);                                \
        mp_tensor y = mp_test_rand(dt, 2, xs, NULL, 0, 0);                                    \
        mp_tensor dx = mp_test_rand(dt, 2, xs, NULL, 0, 0);                                   \
        mp_tensor pc[8];                                                                      \
        for (int j = 0; j < 8; j++)                                                           \
            pc[j] = mp_test_rand(pt, 1, &xs[1], j < 2 ? &r : NULL, 0.5, 1.5);                 \
        for (int64_t c = 0; c < (C); c++) {                                                   \
            mp_store(pc[2].data, pt, (size_t)c, 0.25);                                        \
            mp_store(pc[3].data, pt, (size_t)c, 2.0);                                         \
        }                                                                                     \
        assert_int_equal(ops->batchnorm_forward(&args, true, &x, &pc[0], &pc[1], &pc[2],      \
                                                &pc[3], &pc[4], &pc[5], &y),                  \
                         MP_OK);                                                              \
        assert_int_equal(ops->batchnorm_backward(&args, &x, NULL, &dy, &pc[0], &pc[4], &pc[5], \
                                                 &dx, &pc[6], &pc[7]),                        \
                         MP_OK);                                                              \
        ACC *xv = malloc(sizeof(ACC) * (size_t)(6 * (M) * (C) + 10 * (C)));                   \
        assert_non_null(xv);                                                                  \
        ACC *dyv = xv + (M) * (C), *yv = dyv + (M) * (C), *dxv = yv + (M) * (C);              \
        ACC *g = dxv + (M) * (C), *b = g + (C), *mean = b + (C), *is = mean + (C);            \
        ACC *rm = is + (C), *rv = rm + (C), *dg = rv + (C), *db = dg + (C);                   \
        for (int64_t i = 0; i < (M) * (C); i++) {                                             \
            xv[i] = (ACC)mp_load(x.data, dt, (size_t)i);                                      \
            dyv[i] = (ACC)mp_load(dy.data, dt, (size_t)i);                                    \
        }                                                                                     \
        for (int64_t c = 0; c < (C); c++) {                                                   \
            g[c] = (ACC)mp_load(pc[0].data, pt, (size_t)c);                                   \
            b[c] = (ACC)mp_load(pc[1].data, pt, (size_t)c);                                   \
        }                                                                                     \
        ref_##SFX(xv, dyv, g, b, (ACC)0.25, (ACC)2.0, M, C, mean, is, rm, rv, yv, dxv, dg, db); \
        ASSERT_BITS("save_mean", &pc[4], pt, mean, C);                                        \
        ASSERT_BITS("save_invstd", &pc[5], pt, is, C);                                        \
        ASSERT_BITS("running_mean", &pc[2], pt, rm, C);                                       \
        ASSERT_BITS("running_var", &pc[3], pt, rv, C);                                        \
        ASSERT_BITS("y", &y, dt, yv, (M) * (C));                                              \
        ASSERT_BITS("dgamma", &pc[6], pt, dg, C);                                             \
        ASSERT_BITS("dbeta", &pc[7], pt, db, C);                                              \
        ASSERT_BITS("dx", &dx, dt, dxv, (M) * (C));                                           \
        free(xv);                                                                             \
        mp_tensor *all[] = {&x, &dy, &y, &dx};                                                \
        for (int j = 0; j < 4; j++)                                                           \
            mp_tensor_free(all[j]);                                                           \
        for (int j = 0; j < 8; j++)                                                           \
            mp_tensor_free(&pc[j]);                                                           \
    } while (0)

static const mp_ops *ops;

static void sweep(int threads)
{
    mp_backend_cpu_threads(threads);
    /* one chunk; 4 chunks of 50; 47 chunks, the last 56 rows; 507 chunks of 79 */
    static const int64_t Ms[] = {5, 200, 3000, 40000};
    static const int64_t Cs[] = {3, 8, 13, 37, 64, 100};
    static const mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16};
    for (int mi = 0; mi < 4; mi++)
        for (int ci = 0; ci < 6; ci++) {
            const int64_t M = Ms[mi], C = Cs[ci];
            if (M * C > 600000)
                continue;
            for (int d = 0; d < 3; d++)
                CHECK_BN(float, f32, dts[d], MP_F32, M, C);
            CHECK_BN(double, f64, MP_F64, MP_F64, M, C);
        }
}

static void test_rule_one_thread(void **state)
{
    (void)state;
    sweep(1);
}

static void test_rule_two_threads(void **state)
{
    (void)state;
    sweep(2);
}

int main(void)
{
    ops = mp_backend_cpu();
    const char *want = getenv("MPDIST_CPU_ISA");
    print_message("vector level %d (MPDIST_CPU_ISA %s)\n", (int)mp_cpu_isa(),
                  want ? want : "unset");
    if (want && strcmp(want, "base") == 0 && mp_cpu_isa() != MP_ISA_BASE) {
        print_error("MPDIST_CPU_ISA=base did not lower the vector level\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_one_thread),
        cmocka_unit_test(test_rule_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
