/* LayerNorm on the CPU over the last dimension C = numel(gamma), PyTorch's semantics: x is read
 * as rows of C values, each normalised with its own mean and biased variance (two passes over
 * the row, so no cancellation), invstd = 1 / sqrt(var + eps). Arithmetic is FP32 (FP64 when x is
 * FP64) whatever the dtypes of x, y, gamma, beta, dy, dx, dgamma and dbeta, each of which may
 * be any dtype. A row is widened in bulk (mp_convert) into an accumulator buffer, worked on
 * there and rounded once in bulk into its output, so each row reads its inputs before it writes.
 * Row sums go in 8 lanes (element j into lane j % 8, lanes added in a fixed tree), which the
 * compiler vectorises (for AVX2 as well: engine/vector_clones.h, checked by test_isa_bits);
 * dgamma and dbeta add the rows in order 0, 1, ...: deterministic.
 * Threads (parallel.h): forward and dx take blocks of rows; dgamma and dbeta take groups of
 * MP_LN_COLS columns, each column still adding the rows in order, so the bits do not depend on
 * the thread count. Backward first stores each row's mean and invstd (forward's function on the
 * same values, so forward's bits); the column pass and the dx pass rebuild xhat = (x - mean)
 * invstd from them with forward's two roundings, and the dx pass runs last, so dx may alias x or
 * dy. The buffers are the backend's grow-only workspace (mp_cpu_workspace): per thread a few
 * rows of C accumulators, and on the calling thread the row statistics and column sums. */
#include <math.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/vector_clones.h"

enum {
    MP_LN_LANES = 8,
    MP_LN_BLOCK = 8192, /* elements of x a block of rows covers, at least one row */
    MP_LN_COLS = 32     /* columns of dgamma and dbeta per thread's group */
};

/* Element `off` of tensor t's storage, whatever its dtype. */
static void *at(const mp_tensor *t, int64_t off)
{
    return (char *)t->data + (size_t)off * mp_dtype_size(t->dtype);
}

/* Rows per block for rows of C elements. */
static int64_t block_rows(int64_t C) { return C >= MP_LN_BLOCK ? 1 : MP_LN_BLOCK / C; }

/* For accumulator ACC (dtype ADT, square root SQRT):
 *   sum_SFX(a, n), dot_SFX(a, b, n): the sum of a[j], of a[j] b[j], in MP_LN_LANES lanes;
 *   center_SFX(v, C, eps, mean): subtracts the row's mean (stored in *mean) from v in place and
 *   returns invstd;
 *   ln_fwd_SFX, ln_bwd_SFX: the ops over `rows` rows of C. Backward's dx pass holds per row
 *   v = xhat, d = dy, gg = dy gamma, and dx = invstd (gg - mean(gg) - xhat mean(gg xhat)); its
 *   column pass adds dy xhat and dy over the rows into sg and sb. */
#define MP_LN_KERNELS(ACC, SFX, ADT, SQRT)                                                   \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static ACC lanes_##SFX(const ACC *s)                                                    \
    {                                                                                       \
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));           \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static ACC sum_##SFX(const ACC *restrict a, int64_t n)                                  \
    {                                                                                       \
        ACC s[MP_LN_LANES] = {0};                                                           \
        int64_t j = 0;                                                                      \
        for (; j + MP_LN_LANES <= n; j += MP_LN_LANES)                                      \
            for (int k = 0; k < MP_LN_LANES; k++)                                           \
                s[k] += a[j + k];                                                           \
        for (int k = 0; j < n; j++, k++)                                                    \
            s[k] += a[j];                                                                   \
        return lanes_##SFX(s);                                                              \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static ACC dot_##SFX(const ACC *restrict a, const ACC *restrict b, int64_t n)           \
    {                                                                                       \
        ACC s[MP_LN_LANES] = {0};                                                           \
        int64_t j = 0;                                                                      \
        for (; j + MP_LN_LANES <= n; j += MP_LN_LANES)                                      \
            for (int k = 0; k < MP_LN_LANES; k++)                                           \
                s[k] += a[j + k] * b[j + k];                                                \
        for (int k = 0; j < n; j++, k++)                                                    \
            s[k] += a[j] * b[j];                                                            \
        return lanes_##SFX(s);                                                              \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static ACC center_##SFX(ACC *restrict v, int64_t C, ACC eps, ACC *mean_out)             \
    {                                                                                       \
        ACC mean = sum_##SFX(v, C) / (ACC)C;                                                \
        for (int64_t j = 0; j < C; j++)                                                     \
            v[j] -= mean;                                                                   \
        ACC var = dot_##SFX(v, v, C) / (ACC)C;                                              \
        *mean_out = mean;                                                                   \
        return (ACC)1 / SQRT(var + eps);                                                    \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static void ln_fwd_##SFX(double eps, const mp_tensor *x, const mp_tensor *gamma,        \
                             const mp_tensor *beta, mp_tensor *y, int64_t rows, int64_t C)  \
    {                                                                                       \
        int64_t rb = block_rows(C);                                                         \
        MP_CPU_PARALLEL_FOR(rows > rb ? rows * C : 0)                                       \
        for (int64_t r0 = 0; r0 < rows; r0 += rb) {                                         \
            ACC *g = mp_cpu_workspace(MP_CPU_WS_NORM, 3 * (size_t)C * sizeof(ACC));          \
            ACC *b = g + C, *v = b + C, mean;                                               \
            mp_convert(g, ADT, gamma->data, gamma->dtype, (size_t)C);                       \
            mp_convert(b, ADT, beta->data, beta->dtype, (size_t)C);                         \
            for (int64_t r = r0; r < rows && r < r0 + rb; r++) {                            \
                mp_convert(v, ADT, at(x, r * C), x->dtype, (size_t)C);                      \
                ACC invstd = center_##SFX(v, C, (ACC)eps, &mean);                           \
                for (int64_t j = 0; j < C; j++)                                             \
                    v[j] = v[j] * invstd * g[j] + b[j];                                     \
                mp_convert(at(y, r * C), y->dtype, v, ADT, (size_t)C);                      \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static void ln_stats_##SFX(double eps, const mp_tensor *x, ACC *stats, int64_t rows,    \
                               int64_t C)                                                   \
    {                                                                                       \
        int64_t rb = block_rows(C);                                                         \
        MP_CPU_PARALLEL_FOR(rows > rb ? rows * C : 0)                                       \
        for (int64_t r0 = 0; r0 < rows; r0 += rb) {                                         \
            ACC *v = mp_cpu_workspace(MP_CPU_WS_NORM, (size_t)C * sizeof(ACC));              \
            for (int64_t r = r0; r < rows && r < r0 + rb; r++) {                            \
                mp_convert(v, ADT, at(x, r * C), x->dtype, (size_t)C);                      \
                stats[2 * r + 1] = center_##SFX(v, C, (ACC)eps, &stats[2 * r]);             \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static void ln_params_grad_##SFX(const mp_tensor *x, const mp_tensor *dy,               \
                                     const ACC *stats, ACC *sg, ACC *sb, int64_t rows,      \
                                     int64_t C)                                             \
    {                                                                                       \
        MP_CPU_PARALLEL_FOR(C > MP_LN_COLS ? rows * C : 0)                                  \
        for (int64_t j0 = 0; j0 < C; j0 += MP_LN_COLS) {                                    \
            ACC v[MP_LN_COLS], d[MP_LN_COLS], ag[MP_LN_COLS] = {0}, ab[MP_LN_COLS] = {0};    \
            int64_t len = C - j0 < MP_LN_COLS ? C - j0 : MP_LN_COLS;                        \
            for (int64_t r = 0; r < rows; r++) {                                            \
                mp_convert(v, ADT, at(x, r * C + j0), x->dtype, (size_t)len);               \
                mp_convert(d, ADT, at(dy, r * C + j0), dy->dtype, (size_t)len);             \
                for (int64_t j = 0; j < len; j++) {                                         \
                    ACC xh = (v[j] - stats[2 * r]) * stats[2 * r + 1];                      \
                    ag[j] += d[j] * xh;                                                     \
                    ab[j] += d[j];                                                          \
                }                                                                           \
            }                                                                               \
            memcpy(sg + j0, ag, (size_t)len * sizeof(ACC));                                 \
            memcpy(sb + j0, ab, (size_t)len * sizeof(ACC));                                 \
        }                                                                                   \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static void ln_dx_##SFX(const mp_tensor *x, const mp_tensor *dy, const mp_tensor *gamma, \
                            mp_tensor *dx, const ACC *stats, int64_t rows, int64_t C)       \
    {                                                                                       \
        int64_t rb = block_rows(C);                                                         \
        MP_CPU_PARALLEL_FOR(rows > rb ? rows * C : 0)                                       \
        for (int64_t r0 = 0; r0 < rows; r0 += rb) {                                         \
            ACC *g = mp_cpu_workspace(MP_CPU_WS_NORM, 4 * (size_t)C * sizeof(ACC));          \
            ACC *v = g + C, *d = v + C, *gg = d + C;                                        \
            mp_convert(g, ADT, gamma->data, gamma->dtype, (size_t)C);                       \
            for (int64_t r = r0; r < rows && r < r0 + rb; r++) {                            \
                ACC mean = stats[2 * r], invstd = stats[2 * r + 1];                         \
                mp_convert(v, ADT, at(x, r * C), x->dtype, (size_t)C);                      \
                mp_convert(d, ADT, at(dy, r * C), dy->dtype, (size_t)C);                    \
                for (int64_t j = 0; j < C; j++) {                                           \
                    v[j] = (v[j] - mean) * invstd;                                          \
                    gg[j] = d[j] * g[j];                                                    \
                }                                                                           \
                ACC m1 = sum_##SFX(gg, C) / (ACC)C, m2 = dot_##SFX(gg, v, C) / (ACC)C;      \
                for (int64_t j = 0; j < C; j++)                                             \
                    d[j] = invstd * (gg[j] - m1 - v[j] * m2);                               \
                mp_convert(at(dx, r * C), dx->dtype, d, ADT, (size_t)C);                    \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    MP_VECTOR_CLONES_AVX2                                                                   \
    static void ln_bwd_##SFX(double eps, const mp_tensor *x, const mp_tensor *dy,           \
                             const mp_tensor *gamma, mp_tensor *dx, mp_tensor *dgamma,      \
                             mp_tensor *dbeta, int64_t rows, int64_t C)                     \
    {                                                                                       \
        ACC *stats = mp_cpu_workspace(MP_CPU_WS_NORM_STATS,                                 \
                                      (2 * (size_t)rows + 2 * (size_t)C) * sizeof(ACC));    \
        ACC *sg = stats + 2 * rows, *sb = sg + C;                                           \
        ln_stats_##SFX(eps, x, stats, rows, C);                                             \
        ln_params_grad_##SFX(x, dy, stats, sg, sb, rows, C);                                \
        if (dx)                                                                             \
            ln_dx_##SFX(x, dy, gamma, dx, stats, rows, C);                                  \
        mp_convert(dgamma->data, dgamma->dtype, sg, ADT, (size_t)C);                        \
        mp_convert(dbeta->data, dbeta->dtype, sb, ADT, (size_t)C);                          \
    }
MP_LN_KERNELS(float, f32, MP_F32, sqrtf)
MP_LN_KERNELS(double, f64, MP_F64, sqrt)

/* x and y (numel_x / C rows of C): C >= 1 divides numel_x. */
static bool rows_of(const mp_tensor *x, int64_t C)
{
    return C >= 1 && mp_tensor_numel(x) % C == 0;
}

mp_status mp_cpu_layernorm_forward(double eps, const mp_tensor *x, const mp_tensor *gamma,
                                   const mp_tensor *beta, mp_tensor *y)
{
    int64_t C = mp_tensor_numel(gamma), n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(eps >= 0 && rows_of(x, C), "layernorm_forward");
    MP_CPU_REQUIRE(mp_tensor_numel(beta) == C && mp_tensor_numel(y) == n, "layernorm_forward");
    if (x->dtype == MP_F64)
        ln_fwd_f64(eps, x, gamma, beta, y, n / C, C);
    else
        ln_fwd_f32(eps, x, gamma, beta, y, n / C, C);
    return MP_OK;
}

mp_status mp_cpu_layernorm_backward(double eps, const mp_tensor *x, const mp_tensor *dy,
                                    const mp_tensor *gamma, mp_tensor *dx, mp_tensor *dgamma,
                                    mp_tensor *dbeta)
{
    int64_t C = mp_tensor_numel(gamma), n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(eps >= 0 && rows_of(x, C), "layernorm_backward");
    MP_CPU_REQUIRE(mp_tensor_numel(dy) == n && (!dx || mp_tensor_numel(dx) == n),
                   "layernorm_backward");
    MP_CPU_REQUIRE(mp_tensor_numel(dgamma) == C && mp_tensor_numel(dbeta) == C,
                   "layernorm_backward");
    if (x->dtype == MP_F64)
        ln_bwd_f64(eps, x, dy, gamma, dx, dgamma, dbeta, n / C, C);
    else
        ln_bwd_f32(eps, x, dy, gamma, dx, dgamma, dbeta, n / C, C);
    return MP_OK;
}
