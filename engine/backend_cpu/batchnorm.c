/* Batch normalisation on the CPU over (N, H, W) per channel of an NHWC tensor, with PyTorch's
 * semantics: training normalises with the batch mean and biased variance (two passes, so no
 * cancellation) and updates the running statistics with the unbiased variance; evaluation uses
 * the running statistics. Arithmetic is FP32 (FP64 for FP64 x) whatever the dtype of x;
 * x, y, dy and dx share one dtype, and dx may be NULL (parameter gradients only); the
 * per-channel tensors (gamma, beta, statistics) may have any dtype and are read and written
 * once per channel. Channels are processed in blocks of MP_BN_CBLOCK so each pass streams over
 * x once with the block's accumulators on the stack: no allocation, deterministic order. */
#include <math.h>

#include "engine/backend_cpu/cpu.h"

#define MP_BN_CBLOCK 64

static double ld(const mp_tensor *t, int64_t c) { return mp_load(t->data, t->dtype, (size_t)c); }

static void st(mp_tensor *t, int64_t c, double v) { mp_store(t->data, t->dtype, (size_t)c, v); }

/* A per-channel tensor of C elements (NULL allowed when `optional`). */
static bool per_channel(const mp_tensor *t, int64_t C, bool optional)
{
    return t ? mp_tensor_numel(t) == C : optional;
}

/* x (M, C) as an NHWC tensor whose last dimension is C. */
static bool channels_last(const mp_tensor *x, int64_t C)
{
    return x->ndim >= 1 && C >= 1 && x->shape[x->ndim - 1] == C && mp_tensor_numel(x) % C == 0;
}

#define BN_FWD(T, ACC, LD, ST, a, train, x, gamma, beta, rm, rv, sm, si, y, M, C)              \
    do {                                                                                      \
        const T *xx = (x)->data;                                                              \
        T *yy = (y)->data;                                                                    \
        const ACC eps = (ACC)(a)->eps, mom = (ACC)(a)->momentum;                              \
        for (int64_t c0 = 0; c0 < (C); c0 += MP_BN_CBLOCK) {                                  \
            int64_t nc = (C) - c0 < MP_BN_CBLOCK ? (C) - c0 : MP_BN_CBLOCK;                   \
            ACC mean[MP_BN_CBLOCK], scale[MP_BN_CBLOCK], shift[MP_BN_CBLOCK];                 \
            if (train) {                                                                      \
                ACC s[MP_BN_CBLOCK];                                                          \
                for (int64_t j = 0; j < nc; j++)                                              \
                    s[j] = 0;                                                                 \
                for (int64_t m = 0; m < (M); m++)                                             \
                    for (int64_t j = 0; j < nc; j++)                                          \
                        s[j] += LD(xx[m * (C) + c0 + j]);                                     \
                for (int64_t j = 0; j < nc; j++) {                                            \
                    mean[j] = s[j] / (ACC)(M);                                                \
                    s[j] = 0;                                                                 \
                }                                                                             \
                for (int64_t m = 0; m < (M); m++)                                             \
                    for (int64_t j = 0; j < nc; j++) {                                        \
                        ACC d = LD(xx[m * (C) + c0 + j]) - mean[j];                           \
                        s[j] += d * d;                                                        \
                    }                                                                         \
                for (int64_t j = 0; j < nc; j++) {                                            \
                    int64_t c = c0 + j;                                                       \
                    ACC var = s[j] / (ACC)(M);                                                \
                    ACC invstd = (ACC)1 / (ACC)sqrt((double)(var + eps));                     \
                    ACC unbiased = s[j] / (ACC)((M) - 1);                                     \
                    st(sm, c, (double)mean[j]);                                               \
                    st(si, c, (double)invstd);                                                \
                    st(rm, c, (double)(((ACC)1 - mom) * (ACC)ld(rm, c) + mom * mean[j]));     \
                    st(rv, c, (double)(((ACC)1 - mom) * (ACC)ld(rv, c) + mom * unbiased));    \
                    scale[j] = invstd * (ACC)ld(gamma, c);                                    \
                }                                                                             \
            } else {                                                                          \
                for (int64_t j = 0; j < nc; j++) {                                            \
                    int64_t c = c0 + j;                                                       \
                    mean[j] = (ACC)ld(rm, c);                                                 \
                    ACC invstd = (ACC)1 / (ACC)sqrt((double)((ACC)ld(rv, c) + eps));          \
                    scale[j] = invstd * (ACC)ld(gamma, c);                                    \
                }                                                                             \
            }                                                                                 \
            for (int64_t j = 0; j < nc; j++)                                                  \
                shift[j] = (ACC)ld(beta, c0 + j);                                             \
            for (int64_t m = 0; m < (M); m++)                                                 \
                for (int64_t j = 0; j < nc; j++) {                                            \
                    int64_t i = m * (C) + c0 + j;                                             \
                    yy[i] = ST((LD(xx[i]) - mean[j]) * scale[j] + shift[j]);                  \
                }                                                                             \
        }                                                                                     \
    } while (0)

mp_status mp_cpu_batchnorm_forward(const mp_bn_args *a, bool train, const mp_tensor *x,
                                   const mp_tensor *gamma, const mp_tensor *beta,
                                   mp_tensor *running_mean, mp_tensor *running_var,
                                   mp_tensor *save_mean, mp_tensor *save_invstd, mp_tensor *y)
{
    int64_t C = mp_tensor_numel(gamma);
    MP_CPU_REQUIRE(channels_last(x, C), "batchnorm_forward");
    int64_t M = mp_tensor_numel(x) / C;
    MP_CPU_REQUIRE(mp_tensor_numel(y) == M * C && y->dtype == x->dtype, "batchnorm_forward");
    MP_CPU_REQUIRE(per_channel(beta, C, false) && per_channel(running_mean, C, false) &&
                       per_channel(running_var, C, false),
                   "batchnorm_forward");
    MP_CPU_REQUIRE(per_channel(save_mean, C, !train) && per_channel(save_invstd, C, !train),
                   "batchnorm_forward");
    MP_CPU_REQUIRE(a->eps > 0 && a->momentum >= 0 && a->momentum <= 1, "batchnorm_forward");
    MP_CPU_REQUIRE(M >= (train ? 2 : 1), "batchnorm_forward values per channel");
    MP_CPU_DISPATCH(x->dtype, BN_FWD, a, train, x, gamma, beta, running_mean, running_var,
                    save_mean, save_invstd, y, M, C);
    return MP_OK;
}

/* dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)), the closed form of
 * gamma invstd / M (M dy - sum(dy) - xhat sum(dy xhat)); dgamma = sum(dy xhat), dbeta = sum(dy). */
#define BN_BWD(T, ACC, LD, ST, x, dy, gamma, sm, si, dx, dgamma, dbeta, M, C)                  \
    do {                                                                                      \
        const T *xx = (x)->data, *dd = (dy)->data;                                            \
        T *out = (dx) ? (T *)(dx)->data : NULL;                                               \
        for (int64_t c0 = 0; c0 < (C); c0 += MP_BN_CBLOCK) {                                  \
            int64_t nc = (C) - c0 < MP_BN_CBLOCK ? (C) - c0 : MP_BN_CBLOCK;                   \
            ACC mean[MP_BN_CBLOCK], invstd[MP_BN_CBLOCK], sdy[MP_BN_CBLOCK], sdx[MP_BN_CBLOCK]; \
            for (int64_t j = 0; j < nc; j++) {                                                \
                mean[j] = (ACC)ld(sm, c0 + j);                                                \
                invstd[j] = (ACC)ld(si, c0 + j);                                              \
                sdy[j] = sdx[j] = 0;                                                          \
            }                                                                                 \
            for (int64_t m = 0; m < (M); m++)                                                 \
                for (int64_t j = 0; j < nc; j++) {                                            \
                    int64_t i = m * (C) + c0 + j;                                             \
                    ACC g = LD(dd[i]);                                                        \
                    sdy[j] += g;                                                              \
                    sdx[j] += g * ((LD(xx[i]) - mean[j]) * invstd[j]);                        \
                }                                                                             \
            for (int64_t j = 0; j < nc; j++) {                                                \
                st(dgamma, c0 + j, (double)sdx[j]);                                           \
                st(dbeta, c0 + j, (double)sdy[j]);                                            \
            }                                                                                 \
            if (!out)                                                                         \
                continue;                                                                     \
            ACC k[MP_BN_CBLOCK];                                                              \
            for (int64_t j = 0; j < nc; j++) {                                                \
                k[j] = (ACC)ld(gamma, c0 + j) * invstd[j];                                    \
                sdy[j] /= (ACC)(M);                                                           \
                sdx[j] /= (ACC)(M);                                                           \
            }                                                                                 \
            for (int64_t m = 0; m < (M); m++)                                                 \
                for (int64_t j = 0; j < nc; j++) {                                            \
                    int64_t i = m * (C) + c0 + j;                                             \
                    ACC xhat = (LD(xx[i]) - mean[j]) * invstd[j];                             \
                    out[i] = ST(k[j] * (LD(dd[i]) - sdy[j] - xhat * sdx[j]));                 \
                }                                                                             \
        }                                                                                     \
    } while (0)

mp_status mp_cpu_batchnorm_backward(const mp_bn_args *a, const mp_tensor *x,
                                    const mp_tensor *dy, const mp_tensor *gamma,
                                    const mp_tensor *save_mean, const mp_tensor *save_invstd,
                                    mp_tensor *dx, mp_tensor *dgamma, mp_tensor *dbeta)
{
    /* eps reaches the arithmetic through save_invstd; it is checked as the GPU checks it */
    MP_CPU_REQUIRE(a->eps > 0, "batchnorm_backward");
    int64_t C = mp_tensor_numel(gamma);
    MP_CPU_REQUIRE(channels_last(x, C), "batchnorm_backward");
    int64_t M = mp_tensor_numel(x) / C;
    MP_CPU_REQUIRE(mp_tensor_numel(dy) == M * C && dy->dtype == x->dtype, "batchnorm_backward");
    MP_CPU_REQUIRE(!dx || (mp_tensor_numel(dx) == M * C && dx->dtype == x->dtype),
                   "batchnorm_backward");
    MP_CPU_REQUIRE(per_channel(save_mean, C, false) && per_channel(save_invstd, C, false) &&
                       per_channel(dgamma, C, false) && per_channel(dbeta, C, false),
                   "batchnorm_backward");
    MP_CPU_DISPATCH(x->dtype, BN_BWD, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta,
                    M, C);
    return MP_OK;
}
