/* Batch normalisation on the CPU over (N, H, W) per channel of an NHWC tensor, with PyTorch's
 * semantics: training normalises with the batch mean and biased variance and updates the
 * running statistics with the unbiased variance; evaluation uses the running statistics.
 * Arithmetic is FP32 (FP64 for FP64 x) whatever the dtype of x; x, y, dy and dx share one
 * dtype, and dx may be NULL (parameter gradients only); the per-channel tensors (gamma, beta,
 * statistics) may have any dtype and are read and written once per channel. The per-channel
 * sums add the rows in engine/bn_rule.h's order (chunks of rows, lanes within a chunk), the
 * GPU's, so they depend neither on the tiling nor on the threads, and every statistic and
 * gradient is the GPU's bits; the threads take whole chunks, and the element-wise passes tiles
 * of rows. Training forward reads x from memory twice (the statistics, by bn_rule.h's chunk
 * rule: a chunk's sum, then its squares about its own mean while it is in cache; then the
 * normalisation) and writes y once; backward reads x and dy twice and writes dx once. Each pass
 * walks x in memory order a tile of whole rows (of all C channels) at a time, half tiles
 * widened in bulk (mp_convert) and results rounded back in bulk. The kernels are compiled for
 * AVX2 too (MP_VECTOR_CLONES, the same bits). */
#include <math.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/bn_rule.h"
#include "engine/vector_clones.h"

/* Elements of a tile of rows: at least one row. */
#define MP_BN_TILE 4096

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

/* Tiles of R rows of M, for a loop header: m0 its first row, r = bn_rows(M, R, m0) its rows. */
static inline int64_t bn_rows(int64_t M, int64_t R, int64_t m0) { return M - m0 < R ? M - m0 : R; }

/* Elements of a tile of the forward statistics (a multiple of MP_BN_LANES rows, at least that
 * many): a chunk of up to this many elements is one tile, widened once for both sweeps.
 * Backward's tiles (x and dy) have MP_BN_TILE elements each. */
#define MP_BN_SUM_TILE 16384

/* What bn_tile adds: x; (x - mean)^2; g (x - mean) invstd (g: dy). */
enum { BN_SUM_X, BN_SUM_SQ, BN_SUM_GX };

/* One term of a lane sum (vectors or scalars alike) into a, from x and (BN_SUM_GX) g, with the
 * channel's mean mu and invstd is. */
#define BN_TERM(what, a, x, g, mu, is)                                                        \
    do {                                                                                      \
        if ((what) == BN_SUM_X)                                                               \
            (a) += (x);                                                                       \
        else if ((what) == BN_SUM_SQ)                                                         \
            (a) += ((x) - (mu)) * ((x) - (mu));                                               \
        else                                                                                  \
            (a) += (g) * (((x) - (mu)) * (is));                                               \
    } while (0)

/* A vector (or any object) dst loaded from the possibly unaligned p. */
#define BN_LD(dst, p) memcpy(&(dst), (p), sizeof(dst))

/* BN_TERM with x and g loaded as vectors of type VEC from v and g at element o. */
#define BN_VTERM(VEC, what, a, v, g, o, mu, is)                                               \
    do {                                                                                      \
        VEC xv_, gv_ = {0};                                                                   \
        BN_LD(xv_, (v) + (o));                                                                \
        if ((what) == BN_SUM_GX)                                                              \
            BN_LD(gv_, (g) + (o));                                                            \
        BN_TERM(what, a, xv_, gv_, mu, is);                                                   \
    } while (0)

/* bn_tile_<SFX>: adds rows 0 .. r - 1 of v (and g), a tile of r rows of C channels whose first
 * row is a chunk's lane 0, into the lane sums lane[q C + c]: row i into lane i % MP_BN_LANES,
 * each lane in row order (engine/bn_rule.h). Per block of channels one 32-byte vector wide, the
 * lanes stay in registers for the whole tile (GCC's vector extension: element-wise IEEE
 * operations, the bits of the scalar loop); the last C % width channels go one at a time.
 * mean (BN_SUM_SQ, BN_SUM_GX), invstd and g (BN_SUM_GX) are read only where used. Always
 * inlined, so that `what` is a constant. */
#define MP_BN_TILE_FN(ACC, SFX)                                                               \
    typedef ACC bn_vec_##SFX __attribute__((vector_size(32)));                                \
    static inline __attribute__((always_inline)) void bn_tile_##SFX(                          \
        int what, ACC *restrict lane, const ACC *restrict v, const ACC *restrict g,           \
        const ACC *restrict mean, const ACC *restrict invstd, int64_t r, int64_t C)           \
    {                                                                                         \
        enum { L = MP_BN_LANES, W = (int)(sizeof(bn_vec_##SFX) / sizeof(ACC)) };              \
        const bool gx = what == BN_SUM_GX;                                                    \
        int64_t c0 = 0;                                                                       \
        for (; c0 + W <= C; c0 += W) {                                                        \
            bn_vec_##SFX mu = {0}, is = {0}, a[L];                                            \
            if (what != BN_SUM_X)                                                             \
                BN_LD(mu, mean + c0);                                                         \
            if (gx)                                                                           \
                BN_LD(is, invstd + c0);                                                       \
            for (int q = 0; q < L; q++)                                                       \
                BN_LD(a[q], lane + q * C + c0);                                               \
            int64_t i = 0;                                                                    \
            for (; i + L <= r; i += L) {                                                      \
                _Pragma("GCC unroll 8") for (int q = 0; q < L; q++)                           \
                    BN_VTERM(bn_vec_##SFX, what, a[q], v, g, (i + q) * C + c0, mu, is);       \
            }                                                                                 \
            for (int q = 0; i < r; i++, q++)                                                  \
                BN_VTERM(bn_vec_##SFX, what, a[q], v, g, i * C + c0, mu, is);                 \
            for (int q = 0; q < L; q++)                                                       \
                memcpy(lane + q * C + c0, &a[q], sizeof a[q]);                                \
        }                                                                                     \
        for (; c0 < C; c0++) {                                                                \
            const ACC mu = what != BN_SUM_X ? mean[c0] : 0, is = gx ? invstd[c0] : 0;         \
            for (int64_t i = 0; i < r; i++) {                                                 \
                const int64_t o = i * C + c0;                                                 \
                const ACC gv = gx ? g[o] : 0;                                                 \
                BN_TERM(what, lane[i % L * C + c0], v[o], gv, mu, is);                        \
            }                                                                                 \
        }                                                                                     \
    }
MP_BN_TILE_FN(float, f32)
MP_BN_TILE_FN(double, f64)

/* Backward's two lane sums over r rows of v and g (a tile whose first row is a chunk's lane 0),
 * row by row: row i's C channels into lane i % MP_BN_LANES of lane (sum of g) and lane2 (sum of
 * g (v - mean) invstd), in row order. The arrays never overlap, which restrict tells the
 * compiler so that it vectorises over the channels without a run-time overlap check. */
#define MP_BN_DY_ROWS(ACC, SFX)                                                               \
    static inline void bn_dy_rows_##SFX(ACC *restrict lane, ACC *restrict lane2,             \
                                        const ACC *restrict v, const ACC *restrict g,         \
                                        const ACC *restrict mean, const ACC *restrict invstd, \
                                        int64_t r, int64_t C)                                 \
    {                                                                                         \
        for (int64_t i = 0; i < r; i++) {                                                     \
            ACC *restrict a = lane + i % MP_BN_LANES * C;                                     \
            ACC *restrict a2 = lane2 + i % MP_BN_LANES * C;                                   \
            const ACC *restrict vi = v + i * C, *restrict gi = g + i * C;                     \
            for (int64_t c = 0; c < C; c++) {                                                 \
                a[c] += gi[c];                                                                \
                a2[c] += gi[c] * ((vi[c] - mean[c]) * invstd[c]);                             \
            }                                                                                 \
        }                                                                                     \
    }
MP_BN_DY_ROWS(float, f32)
MP_BN_DY_ROWS(double, f64)

/* The per-channel sums of the training passes for accumulator type ACC over x (M, C), in the
 * order of engine/bn_rule.h (the GPU's). Without dy (forward): s[c] the batch mean and s2[c] the
 * sum of squared deviations from it, by bn_rule.h's chunk rule (each chunk's sum, then its
 * squares about its own mean while it is in cache). With dy (backward): s[c] = sum of dy[m][c]
 * and s2[c] = sum of dy[m][c] (x[m][c] - mean[c]) invstd[c]. The threads take whole chunks
 * (rows of all C channels) and write each chunk's two sums into part (2 C a chunk); the chunks
 * are then added in order, so the sums do not depend on the threads. Half rows are widened in
 * tiles of a multiple of MP_BN_LANES rows into each thread's own block; a chunk that is one tile
 * is widened once. Backward adds a widened tile (in L1) in two register-blocked sweeps and FP32
 * data in place row by row (measured faster there: one sequential stream from memory); both
 * give the rule's bits. */
#define MP_BN_SUMS(ACC, SFX)                                                                  \
    MP_VECTOR_CLONES                                                                          \
    static void bn_sums_##SFX(const mp_tensor *x, const mp_tensor *dy, int64_t M, int64_t C,  \
                              const ACC *mean, const ACC *invstd, ACC *part, ACC *s, ACC *s2) \
    {                                                                                         \
        const mp_dtype adt = MP_CPU_ACC_DTYPE(ACC);                                           \
        const bool wide = x->dtype != adt || (dy && dy->dtype != adt);                        \
        int64_t rows;                                                                         \
        const int64_t chunks = mp_bn_chunks(M, &rows), L = MP_BN_LANES;                       \
        const int64_t E = dy ? MP_BN_TILE : MP_BN_SUM_TILE;                                  \
        const int64_t R = E / C / L * L > L ? E / C / L * L : L;                              \
        MP_CPU_PARALLEL_FOR(chunks > 1 ? M * C : 0)                                           \
        for (int64_t k = 0; k < chunks; k++) {                                                \
            const int64_t r0 = k * rows, r1 = r0 + mp_bn_chunk_n(M, rows, k);                 \
            ACC *lane = mp_cpu_workspace(MP_CPU_WS_BN_LANES, (size_t)(2 * L * C) * sizeof(ACC)); \
            ACC *lane2 = lane + L * C, *t = part + 2 * k * C;                                 \
            ACC *xb = wide ? mp_cpu_workspace(MP_CPU_WS_BN_TILE,                              \
                                              (size_t)((dy ? 2 : 1) * R * C) * sizeof(ACC))   \
                           : NULL;                                                            \
            ACC *gb = xb && dy ? xb + R * C : NULL;                                           \
            for (int sweep = 0; sweep < (dy ? 1 : 2); sweep++) {                              \
                for (int64_t i = 0; i < 2 * L * C; i++)                                       \
                    lane[i] = 0;                                                              \
                for (int64_t m0 = r0; m0 < r1; m0 += R) {                                     \
                    const int64_t r = bn_rows(r1, R, m0);                                     \
                    const ACC *v = sweep && xb && r1 - r0 <= R                                \
                                       ? xb                                                   \
                                       : MP_CPU_WIDEN(ACC, x, m0 * C, r * C, xb);             \
                    if (dy) {                                                                 \
                        const ACC *g = MP_CPU_WIDEN(ACC, dy, m0 * C, r * C, gb);              \
                        if (xb) {                                                             \
                            bn_tile_##SFX(BN_SUM_X, lane, g, NULL, NULL, NULL, r, C);         \
                            bn_tile_##SFX(BN_SUM_GX, lane2, v, g, mean, invstd, r, C);        \
                        } else {                                                              \
                            bn_dy_rows_##SFX(lane, lane2, v, g, mean, invstd, r, C);          \
                        }                                                                     \
                    } else if (sweep) {                                                       \
                        bn_tile_##SFX(BN_SUM_SQ, lane, v, NULL, t + C, NULL, r, C);           \
                    } else {                                                                  \
                        bn_tile_##SFX(BN_SUM_X, lane, v, NULL, NULL, NULL, r, C);             \
                    }                                                                         \
                }                                                                             \
                ACC *u = t + (sweep ? C : 0); /* the chunk's sum (sums): lanes in order */    \
                const int64_t nu = dy ? 2 * C : C;                                            \
                for (int64_t c = 0; c < nu; c++)                                              \
                    u[c] = 0;                                                                 \
                for (int64_t q = 0; q < L; q++) /* lane2 follows lane */                      \
                    for (int64_t c = 0; c < nu; c++)                                          \
                        u[c] += lane[(c < C ? q * C : (L + q - 1) * C) + c];                  \
                if (!dy && !sweep)                                                            \
                    for (int64_t c = 0; c < C; c++)                                           \
                        t[C + c] = MP_BN_CHUNK_MEAN(ACC, t[c], r1 - r0);                      \
            }                                                                                 \
        }                                                                                     \
        for (int64_t c = 0; c < C; c++)                                                       \
            s[c] = s2[c] = 0;                                                                 \
        for (int64_t k = 0; k < chunks; k++)                                                  \
            for (int64_t c = 0; c < C; c++) {                                                 \
                s[c] += part[2 * k * C + c];                                                  \
                if (dy)                                                                       \
                    s2[c] += part[(2 * k + 1) * C + c];                                       \
            }                                                                                 \
        if (dy)                                                                               \
            return;                                                                           \
        for (int64_t c = 0; c < C; c++)                                                       \
            s[c] /= (ACC)M;                                                                   \
        for (int64_t k = 0; k < chunks; k++)                                                  \
            for (int64_t c = 0; c < C; c++)                                                   \
                s2[c] += MP_BN_CHUNK_DEV(ACC, part[2 * k * C + c], part[(2 * k + 1) * C + c], \
                                         mp_bn_chunk_n(M, rows, k), s[c]);                    \
    }
MP_BN_SUMS(float, f32)
MP_BN_SUMS(double, f64)
#define bn_sums(x, dy, M, C, mean, invstd, part, s, s2)                                       \
    _Generic((s), float *: bn_sums_f32, double *: bn_sums_f64)(x, dy, M, C, mean, invstd, part, \
                                                               s, s2)

/* ACCs of the BN workspace: `n` C per-channel rows and the chunks' sums (2 C each). */
static inline size_t bn_ws_bytes(int64_t M, int64_t C, int64_t n, size_t acc)
{
    int64_t rows;
    return (size_t)((n + 2 * mp_bn_chunks(M, &rows)) * C) * acc;
}

#define BN_FWD(T, ACC, LD, ST, a, train, x, gamma, beta, rm, rv, sm, si, y, M, C)              \
    do {                                                                                      \
        (void)sizeof(T);                                                                      \
        (void)LD;                                                                             \
        (void)ST;                                                                             \
        const int64_t R = (C) >= MP_BN_TILE ? 1 : MP_BN_TILE / (C);                           \
        ACC *mean = mp_cpu_workspace(MP_CPU_WS_BN, bn_ws_bytes(M, C, 4, sizeof(ACC)));        \
        ACC *scale = mean + (C), *shift = scale + (C), *s = shift + (C), *part = s + (C);     \
        const ACC eps = (ACC)(a)->eps, mom = (ACC)(a)->momentum;                              \
        if (train) {                                                                          \
            bn_sums(x, NULL, M, C, (const ACC *)NULL, (const ACC *)NULL, part, mean, s);      \
            for (int64_t c = 0; c < (C); c++) {                                               \
                ACC var = s[c] / (ACC)(M);                                                    \
                ACC invstd = (ACC)1 / (ACC)sqrt((double)(var + eps));                         \
                ACC unbiased = s[c] / (ACC)((M) - 1);                                         \
                st(sm, c, (double)mean[c]);                                                   \
                st(si, c, (double)invstd);                                                    \
                st(rm, c, (double)(((ACC)1 - mom) * (ACC)ld(rm, c) + mom * mean[c]));         \
                st(rv, c, (double)(((ACC)1 - mom) * (ACC)ld(rv, c) + mom * unbiased));        \
                scale[c] = invstd * (ACC)ld(gamma, c);                                        \
            }                                                                                 \
        } else {                                                                              \
            for (int64_t c = 0; c < (C); c++) {                                               \
                mean[c] = (ACC)ld(rm, c);                                                     \
                ACC invstd = (ACC)1 / (ACC)sqrt((double)((ACC)ld(rv, c) + eps));              \
                scale[c] = invstd * (ACC)ld(gamma, c);                                        \
            }                                                                                 \
        }                                                                                     \
        for (int64_t c = 0; c < (C); c++)                                                     \
            shift[c] = (ACC)ld(beta, c);                                                      \
        MP_CPU_PARALLEL_FOR((M) * (C))                                                        \
        for (int64_t m0 = 0; m0 < (M); m0 += R) {                                             \
            const int64_t r = bn_rows(M, R, m0);                                              \
            ACC *buf = mp_cpu_workspace(MP_CPU_WS_BN_TILE, (size_t)(R * (C)) * sizeof(ACC));  \
            const ACC *v = MP_CPU_WIDEN(ACC, x, m0 * (C), r * (C), buf);                      \
            ACC *o = (y)->dtype == MP_CPU_ACC_DTYPE(ACC) ? (ACC *)mp_cpu_at(y, m0 * (C)) : buf; \
            for (int64_t m = 0; m < r; m++)                                                   \
                for (int64_t c = 0; c < (C); c++)                                             \
                    o[m * (C) + c] = (v[m * (C) + c] - mean[c]) * scale[c] + shift[c];        \
            if (o == buf)                                                                     \
                mp_convert(mp_cpu_at(y, m0 * (C)), (y)->dtype, buf, MP_CPU_ACC_DTYPE(ACC),    \
                           (size_t)(r * (C)));                                                \
        }                                                                                     \
    } while (0)

MP_VECTOR_CLONES
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
        (void)sizeof(T);                                                                      \
        (void)LD;                                                                             \
        (void)ST;                                                                             \
        const int64_t R = (C) >= MP_BN_TILE ? 1 : MP_BN_TILE / (C);                           \
        ACC *mean = mp_cpu_workspace(MP_CPU_WS_BN, bn_ws_bytes(M, C, 5, sizeof(ACC)));        \
        ACC *invstd = mean + (C), *sdy = invstd + (C), *sdx = sdy + (C), *k = sdx + (C);      \
        for (int64_t c = 0; c < (C); c++) {                                                   \
            mean[c] = (ACC)ld(sm, c);                                                         \
            invstd[c] = (ACC)ld(si, c);                                                       \
        }                                                                                     \
        bn_sums(x, dy, M, C, (const ACC *)mean, (const ACC *)invstd, k + (C), sdy, sdx);      \
        for (int64_t c = 0; c < (C); c++) {                                                   \
            st(dgamma, c, (double)sdx[c]);                                                    \
            st(dbeta, c, (double)sdy[c]);                                                     \
        }                                                                                     \
        if (dx) {                                                                             \
            for (int64_t c = 0; c < (C); c++) {                                               \
                k[c] = (ACC)ld(gamma, c) * invstd[c];                                         \
                sdy[c] /= (ACC)(M);                                                           \
                sdx[c] /= (ACC)(M);                                                           \
            }                                                                                 \
            MP_CPU_PARALLEL_FOR((M) * (C))                                                    \
            for (int64_t m0 = 0; m0 < (M); m0 += R) {                                         \
                const int64_t r = bn_rows(M, R, m0);                                          \
                ACC *xb = mp_cpu_workspace(MP_CPU_WS_BN_TILE,                                 \
                                           (size_t)(2 * R * (C)) * sizeof(ACC));              \
                ACC *gb = xb + R * (C);                                                       \
                const ACC *v = MP_CPU_WIDEN(ACC, x, m0 * (C), r * (C), xb);                   \
                const ACC *g = MP_CPU_WIDEN(ACC, dy, m0 * (C), r * (C), gb);                  \
                ACC *o = (dx)->dtype == MP_CPU_ACC_DTYPE(ACC) ? (ACC *)mp_cpu_at(dx, m0 * (C)) \
                                                               : xb;                          \
                for (int64_t m = 0; m < r; m++)                                               \
                    for (int64_t c = 0; c < (C); c++) {                                       \
                        int64_t i = m * (C) + c;                                              \
                        ACC xhat = (v[i] - mean[c]) * invstd[c];                              \
                        o[i] = k[c] * (g[i] - sdy[c] - xhat * sdx[c]);                        \
                    }                                                                         \
                if (o == xb)                                                                  \
                    mp_convert(mp_cpu_at(dx, m0 * (C)), (dx)->dtype, xb,                      \
                               MP_CPU_ACC_DTYPE(ACC), (size_t)(r * (C)));                     \
            }                                                                                 \
        }                                                                                     \
    } while (0)

MP_VECTOR_CLONES
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
