/* Batch normalisation on the CPU over (N, H, W) per channel of an NHWC tensor, with PyTorch's
 * semantics: training normalises with the batch mean and biased variance and updates the
 * running statistics with the unbiased variance; evaluation uses the running statistics.
 * Arithmetic is FP32 (FP64 for FP64 x) whatever the dtype of x; x, y, dy and dx share one
 * dtype, and dx may be NULL (parameter gradients only) or dy itself (every read of dy at other
 * positions, the sums, ends before dx is written); the per-channel tensors (gamma, beta,
 * statistics) may have any dtype and are read and written once per channel. The per-channel
 * sums add the rows in engine/bn_rule.h's order (chunks of rows, lanes within a chunk), the
 * GPU's, so they depend neither on the tiling nor on the threads, and every statistic and
 * gradient is the GPU's bits; the threads take whole chunks, and the element-wise passes tiles
 * of rows. Training forward reads x from memory twice (the statistics, by bn_rule.h's chunk
 * rule: a chunk's sum, then its squares about its own mean while it is in cache; then the
 * normalisation) and writes y once; backward reads x and dy twice and writes dx once. Every
 * pass walks x in memory order, a block of channels one 32-byte vector wide at a time, and
 * widens half values in registers where it uses them and rounds results there (vec8.h, with
 * mp_convert's bits), so no pass converts into a buffer first (except at the baseline level on
 * x86-64: BN_HALF_BULK). The kernels are compiled once per level of engine/backend_cpu/isa.h
 * (the conversions by F16C and AVX512-BF16 where the CPU has them; every level gives the same
 * bits) and picked at run time; FP64 runs at the baseline. With mp_bn_args.relu the normalisation
 * pass applies engine/elem_rule.h's ReLU before it rounds (forward fused), and backward masks dy
 * in a pass of its own first. */
#include <math.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/isa.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/backend_cpu/vec8.h"
#include "engine/bn_rule.h"
#include "engine/cast_rule.h"
#include "engine/elem_rule.h"

/* Elements of a tile of rows (at least one row): the element-wise passes' unit of work for the
 * threads, and backward's sums', whose two sweeps over a tile of x and dy find it in L1. */
#define MP_BN_TILE 4096

#define BN_INLINE static inline __attribute__((always_inline))

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

/* Rows of a tile of MP_BN_TILE elements of C channels: a multiple of `mult`, at least mult. */
static inline int64_t bn_tile_rows(int64_t C, int64_t mult)
{
    const int64_t r = MP_BN_TILE / C / mult * mult;
    return r > mult ? r : mult;
}

/* A vector of the accumulator type, 32 bytes: 8 floats, loaded from FP32, fp16 or bf16 storage
 * (vec8.h, the level's conversions), or 4 doubles from FP64 storage. BN_VLD_<ACC>(ISA) and
 * BN_VST_<ACC>(ISA) name the level's functions that load and store one at element o of p
 * (dtype dt, a constant where they are inlined); bn_ld1_<ACC> and bn_st1_<ACC> do one element
 * (engine/cast_rule.h's), for the channels left over. */
typedef mp_v8f bn_vec_float;
typedef double bn_vec_double __attribute__((vector_size(32)));

#define BN_VLD_float(ISA) MP_V8_LOAD_##ISA
#define BN_VST_float(ISA) MP_V8_STORE_##ISA
#define BN_VLD_double(ISA) bn_vld_f64
#define BN_VST_double(ISA) bn_vst_f64
#define bn_ld1_float(dt, p, o) mp_elem_load_f32(p, dt, o)
#define bn_st1_float(dt, p, o, v) mp_elem_store_f32(p, dt, o, v)
#define bn_ld1_double(dt, p, o) mp_elem_load_f64(p, dt, o)
#define bn_st1_double(dt, p, o, v) mp_elem_store_f64(p, dt, o, v)

BN_INLINE bn_vec_double bn_vld_f64(mp_dtype dt, const void *p, int64_t o)
{
    (void)dt;
    bn_vec_double v;
    memcpy(&v, (const double *)p + o, sizeof v);
    return v;
}
BN_INLINE void bn_vst_f64(mp_dtype dt, void *p, int64_t o, bn_vec_double v)
{
    (void)dt;
    memcpy((double *)p + o, &v, sizeof v);
}

/* The ReLU of engine/elem_rule.h on a vector r of accumulator type ACC (r <= 0, -0 included,
 * to +0; NaN kept), by a mask: BatchNorm with a->relu applies it before its one rounding, as the
 * rule allows. A macro, not a function: a vector argument would cross the levels' target
 * attributes (an ABI change Clang refuses). */
typedef int32_t bn_mask_float __attribute__((vector_size(32)));
typedef int64_t bn_mask_double __attribute__((vector_size(32)));
#define BN_RELU_V(ACC, r)                                                                     \
    ((bn_vec_##ACC)((bn_mask_##ACC)(r) & ~(bn_mask_##ACC)((r) <= (bn_vec_##ACC){0})))

/* BN_BY_DTYPE_<ACC>(dt, F, args...): F(DT, args...) with DT the constant equal to dt, the storage
 * dtypes of accumulator ACC (FP32, fp16 and bf16 for float; FP64 for double), so that an always
 * inlined F is compiled once per dtype from one source. */
#define BN_BY_DTYPE_float(dt, F, ...)                                                         \
    do {                                                                                      \
        if ((dt) == MP_F16)                                                                   \
            F(MP_F16, __VA_ARGS__);                                                           \
        else if ((dt) == MP_BF16)                                                             \
            F(MP_BF16, __VA_ARGS__);                                                          \
        else                                                                                  \
            F(MP_F32, __VA_ARGS__);                                                           \
    } while (0)
#define BN_BY_DTYPE_double(dt, F, ...) ((void)(dt), F(MP_F64, __VA_ARGS__))

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

/* bn_tile_<ACC>: adds rows 0 .. r - 1 of a tile of r rows of C channels, its first element at
 * element `off` of v (and of g), whose first row is a chunk's lane 0, into the lane sums
 * lane[q C + c]: row i into lane i % MP_BN_LANES, each lane in row order (engine/bn_rule.h).
 * v and g have the storage dtype dt. Per block of channels one vector wide, the lanes stay in
 * registers for the whole tile (GCC's vector extension: element-wise IEEE operations, the bits
 * of the scalar loop); the last C % width channels go one at a time. mean (BN_SUM_SQ,
 * BN_SUM_GX), invstd and g (BN_SUM_GX) are read only where used. Always inlined, so that `what`
 * and dt are constants. */
#define MP_BN_TILE_FN(ACC, ISA)                                                               \
    MP_ISA_TARGET_##ISA BN_INLINE void bn_tile_##ACC##_##ISA(                                 \
        int what, mp_dtype dt, ACC *restrict lane, const void *v, const void *g, int64_t off, \
        const ACC *restrict mean, const ACC *restrict invstd, int64_t r, int64_t C)           \
    {                                                                                         \
        enum { L = MP_BN_LANES, W = (int)(sizeof(bn_vec_##ACC) / sizeof(ACC)) };              \
        const bool gx = what == BN_SUM_GX;                                                    \
        int64_t c0 = 0;                                                                       \
        for (; c0 + W <= C; c0 += W) {                                                        \
            bn_vec_##ACC mu = {0}, is = {0}, a[L];                                            \
            if (what != BN_SUM_X)                                                             \
                BN_LD(mu, mean + c0);                                                         \
            if (gx)                                                                           \
                BN_LD(is, invstd + c0);                                                       \
            for (int q = 0; q < L; q++)                                                       \
                BN_LD(a[q], lane + q * C + c0);                                               \
            int64_t i = 0;                                                                    \
            for (; i + L <= r; i += L) {                                                      \
                _Pragma("GCC unroll 8") for (int q = 0; q < L; q++)                           \
                {                                                                             \
                    const int64_t o = off + (i + q) * C + c0;                                 \
                    const bn_vec_##ACC xv = BN_VLD_##ACC(ISA)(dt, v, o);                      \
                    const bn_vec_##ACC gv = gx ? BN_VLD_##ACC(ISA)(dt, g, o) : xv;            \
                    BN_TERM(what, a[q], xv, gv, mu, is);                                      \
                }                                                                             \
            }                                                                                 \
            for (int q = 0; i < r; i++, q++) {                                                \
                const int64_t o = off + i * C + c0;                                           \
                const bn_vec_##ACC xv = BN_VLD_##ACC(ISA)(dt, v, o);                          \
                const bn_vec_##ACC gv = gx ? BN_VLD_##ACC(ISA)(dt, g, o) : xv;                \
                BN_TERM(what, a[q], xv, gv, mu, is);                                          \
            }                                                                                 \
            for (int q = 0; q < L; q++)                                                       \
                memcpy(lane + q * C + c0, &a[q], sizeof a[q]);                                \
        }                                                                                     \
        for (; c0 < C; c0++) {                                                                \
            const ACC mu = what != BN_SUM_X ? mean[c0] : 0, is = gx ? invstd[c0] : 0;         \
            for (int64_t i = 0; i < r; i++) {                                                 \
                const int64_t o = off + i * C + c0;                                           \
                const ACC xv = bn_ld1_##ACC(dt, v, o), gv = gx ? bn_ld1_##ACC(dt, g, o) : 0;  \
                BN_TERM(what, lane[i % L * C + c0], xv, gv, mu, is);                          \
            }                                                                                 \
        }                                                                                     \
    }

/* Backward's two lane sums over r rows of v and g (a tile whose first row is a chunk's lane 0) in
 * the accumulator's own dtype, row by row: row i's C channels into lane i % MP_BN_LANES of lane
 * (sum of g) and lane2 (sum of g (v - mean) invstd), in row order: one sequential stream over
 * both, measured faster than bn_tile's two sweeps where nothing is widened. The arrays never
 * overlap, which restrict tells the compiler so that it vectorises over the channels without a
 * run-time overlap check. Always inlined, so it gets the caller's level. */
#define MP_BN_DY_ROWS(ACC)                                                                    \
    BN_INLINE void bn_dy_rows_##ACC(ACC *restrict lane, ACC *restrict lane2,                  \
                                    const ACC *restrict v, const ACC *restrict g,             \
                                    const ACC *restrict mean, const ACC *restrict invstd,     \
                                    int64_t r, int64_t C)                                     \
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
MP_BN_DY_ROWS(float)
MP_BN_DY_ROWS(double)

/* Whether level ISA widens half data with mp_convert into scratch of the accumulator type and runs
 * the FP32 kernel on it (rounding the result back the same way), instead of converting in
 * registers: the baseline on x86-64 (a CPU without AVX2, or a build without the levels), where
 * mp_convert's F16C path and bf16 loops (AVX2 clones) are picked at run time. Measured with the
 * level capped on this project's AVX-512 VM (bench_batchnorm, LEVEL 0): fp16 BatchNorm 6x and
 * bf16 1.4x faster than vec8.h's portable code compiled for SSE2; a CPU without F16C was not
 * measured (mp_convert's fp16 is scalar there). The same bits either way; MP_BN_NO_HALF_BULK
 * turns it off (test_isa_bits's copy, which compares the two paths). */
#if defined(__x86_64__) && !defined(MP_BN_NO_HALF_BULK)
#define BN_HALF_BULK(ISA, dt) (MP_ISA_##ISA == MP_ISA_BASE && ((dt) == MP_F16 || (dt) == MP_BF16))
#else
#define BN_HALF_BULK(ISA, dt) false
#endif

/* n elements of half tensor data p (dtype dt) from element off, widened to ACC in scratch b; and
 * n results in b rounded back into p from element off. */
#define BN_WIDEN(ACC, b, p, dt, off, n)                                                       \
    mp_convert(b, MP_CPU_ACC_DTYPE(ACC), (const uint16_t *)(p) + (off), dt, (size_t)(n))
#define BN_NARROW(ACC, p, b, dt, off, n)                                                      \
    mp_convert((uint16_t *)(p) + (off), dt, b, MP_CPU_ACC_DTYPE(ACC), (size_t)(n))

/* bn_chunk_<ACC>_<ISA>: one chunk's sums, rows r0 .. r1 - 1 of x (and dy), both of storage
 * dtype dt, into t (2 C), a tile of R rows (a multiple of MP_BN_LANES, so that each tile starts
 * on lane 0; small enough for L1 while bn_tile walks it block of channels by block) at a time:
 * without dy (forward), t[c] the chunk's sum and t[C + c] its sum of squares about its own mean
 * (bn_rule.h's chunk rule: two sweeps over the chunk, the second from cache where the chunk
 * fits); with dy (backward), t[c] = sum of dy and t[C + c] = sum of dy (x - mean) invstd, two
 * sweeps over each tile. lane: 2 MP_BN_LANES C scratch. */
#define MP_BN_CHUNK_FN(ACC, ISA)                                                              \
    MP_ISA_TARGET_##ISA BN_INLINE void bn_chunk_dt_##ACC##_##ISA(                             \
        mp_dtype dt, const void *x, const void *dy, int64_t r0, int64_t r1, int64_t R,        \
        int64_t C, const ACC *mean, const ACC *invstd, ACC *lane, ACC *t)                     \
    {                                                                                         \
        ACC *lane2 = lane + MP_BN_LANES * C;                                                  \
        for (int sweep = 0; sweep < (dy ? 1 : 2); sweep++) {                                  \
            for (int64_t i = 0; i < 2 * MP_BN_LANES * C; i++)                                 \
                lane[i] = 0;                                                                  \
            for (int64_t m0 = r0; m0 < r1; m0 += R) {                                         \
                const int64_t r = bn_rows(r1, R, m0), o = m0 * C;                             \
                if (!dy && !sweep) {                                                          \
                    bn_tile_##ACC##_##ISA(BN_SUM_X, dt, lane, x, NULL, o, NULL, NULL, r, C);  \
                } else if (!dy) {                                                             \
                    bn_tile_##ACC##_##ISA(BN_SUM_SQ, dt, lane, x, NULL, o, t + C, NULL, r, C); \
                } else if (dt == MP_CPU_ACC_DTYPE(ACC)) {                                     \
                    bn_dy_rows_##ACC(lane, lane2, (const ACC *)x + o, (const ACC *)dy + o,    \
                                     mean, invstd, r, C);                                     \
                } else {                                                                      \
                    bn_tile_##ACC##_##ISA(BN_SUM_X, dt, lane, dy, NULL, o, NULL, NULL, r, C); \
                    bn_tile_##ACC##_##ISA(BN_SUM_GX, dt, lane2, x, dy, o, mean, invstd, r,    \
                                          C);                                                 \
                }                                                                             \
            }                                                                                 \
            ACC *u = t + (sweep ? C : 0); /* the chunk's sum (sums): lanes in order */        \
            const int64_t nu = dy ? 2 * C : C;                                                \
            for (int64_t c = 0; c < nu; c++)                                                  \
                u[c] = 0;                                                                     \
            for (int64_t q = 0; q < MP_BN_LANES; q++) /* lane2 follows lane */                \
                for (int64_t c = 0; c < nu; c++)                                              \
                    u[c] += lane[(c < C ? q * C : (MP_BN_LANES + q - 1) * C) + c];            \
            if (!dy && !sweep)                                                                \
                for (int64_t c = 0; c < C; c++)                                               \
                    t[C + c] = MP_BN_CHUNK_MEAN(ACC, t[c], r1 - r0);                          \
        }                                                                                     \
    }                                                                                         \
    MP_ISA_TARGET_##ISA static void bn_chunk_##ACC##_##ISA(                                   \
        mp_dtype dt, const void *x, const void *dy, int64_t r0, int64_t r1, int64_t R,        \
        int64_t C, const ACC *mean, const ACC *invstd, ACC *lane, ACC *t)                     \
    {                                                                                         \
        if (BN_HALF_BULK(ISA, dt)) { /* rows relative to the chunk: the same tiles and lanes */ \
            const int64_t n = (r1 - r0) * C;                                                  \
            const size_t bytes = (size_t)((dy ? 2 : 1) * n) * sizeof(ACC);                    \
            ACC *b = mp_cpu_workspace(MP_CPU_WS_BN_TILE, bytes);                              \
            BN_WIDEN(ACC, b, x, dt, r0 * C, n);                                               \
            if (dy)                                                                           \
                BN_WIDEN(ACC, b + n, dy, dt, r0 * C, n);                                      \
            x = b;                                                                            \
            dy = dy ? b + n : NULL;                                                           \
            r1 -= r0;                                                                         \
            r0 = 0;                                                                           \
            dt = MP_CPU_ACC_DTYPE(ACC);                                                       \
        }                                                                                     \
        BN_BY_DTYPE_##ACC(dt, bn_chunk_dt_##ACC##_##ISA, x, dy, r0, r1, R, C, mean, invstd,   \
                          lane, t);                                                           \
    }

/* The element-wise passes over rows m0 .. m0 + r - 1 of C channels, storage dtype dt, FP32 (or
 * FP64) arithmetic per element, one rounding: bn_norm_<ACC>_<ISA> y = (x - mean) scale + shift
 * (with relu, its ReLU);
 * bn_dx_<ACC>_<ISA> dx = k (dy - sdy - (x - mean) invstd sdx). */
#define MP_BN_ROWS_FN(ACC, ISA)                                                               \
    MP_ISA_TARGET_##ISA BN_INLINE void bn_norm_dt_##ACC##_##ISA(                              \
        mp_dtype dt, const void *x, void *y, int64_t m0, int64_t r, int64_t C,                \
        const ACC *mean, const ACC *scale, const ACC *shift, bool relu)                       \
    {                                                                                         \
        enum { W = (int)(sizeof(bn_vec_##ACC) / sizeof(ACC)) };                               \
        for (int64_t m = m0; m < m0 + r; m++) {                                               \
            int64_t c = 0;                                                                    \
            for (; c + W <= C; c += W) {                                                      \
                bn_vec_##ACC mu, sc, sh;                                                      \
                BN_LD(mu, mean + c);                                                          \
                BN_LD(sc, scale + c);                                                         \
                BN_LD(sh, shift + c);                                                         \
                const bn_vec_##ACC v = BN_VLD_##ACC(ISA)(dt, x, m * C + c);                   \
                const bn_vec_##ACC o = (v - mu) * sc + sh;                                    \
                BN_VST_##ACC(ISA)(dt, y, m * C + c, relu ? BN_RELU_V(ACC, o) : o);            \
            }                                                                                 \
            for (; c < C; c++) {                                                              \
                const ACC o = (bn_ld1_##ACC(dt, x, m * C + c) - mean[c]) * scale[c] + shift[c]; \
                bn_st1_##ACC(dt, y, m * C + c, relu ? mp_relu(o) : o);                        \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    MP_ISA_TARGET_##ISA BN_INLINE void bn_dx_dt_##ACC##_##ISA(                                \
        mp_dtype dt, const void *x, const void *dy, void *dx, int64_t m0, int64_t r,          \
        int64_t C, const ACC *mean, const ACC *invstd, const ACC *k, const ACC *sdy,          \
        const ACC *sdx)                                                                       \
    {                                                                                         \
        enum { W = (int)(sizeof(bn_vec_##ACC) / sizeof(ACC)) };                               \
        for (int64_t m = m0; m < m0 + r; m++) {                                               \
            int64_t c = 0;                                                                    \
            for (; c + W <= C; c += W) {                                                      \
                bn_vec_##ACC mu, is, kk, sg, sx;                                              \
                BN_LD(mu, mean + c);                                                          \
                BN_LD(is, invstd + c);                                                        \
                BN_LD(kk, k + c);                                                             \
                BN_LD(sg, sdy + c);                                                           \
                BN_LD(sx, sdx + c);                                                           \
                const bn_vec_##ACC v = BN_VLD_##ACC(ISA)(dt, x, m * C + c);                   \
                const bn_vec_##ACC g = BN_VLD_##ACC(ISA)(dt, dy, m * C + c);                  \
                const bn_vec_##ACC xhat = (v - mu) * is;                                      \
                BN_VST_##ACC(ISA)(dt, dx, m * C + c, kk * (g - sg - xhat * sx));              \
            }                                                                                 \
            for (; c < C; c++) {                                                              \
                const ACC xhat = (bn_ld1_##ACC(dt, x, m * C + c) - mean[c]) * invstd[c];      \
                const ACC g = bn_ld1_##ACC(dt, dy, m * C + c);                                \
                bn_st1_##ACC(dt, dx, m * C + c, k[c] * (g - sdy[c] - xhat * sdx[c]));         \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    MP_ISA_TARGET_##ISA static void bn_norm_##ACC##_##ISA(                                    \
        mp_dtype dt, const void *x, void *y, int64_t m0, int64_t r, int64_t C,                \
        const ACC *mean, const ACC *scale, const ACC *shift, bool relu)                       \
    {                                                                                         \
        if (BN_HALF_BULK(ISA, dt)) {                                                          \
            const int64_t n = r * C;                                                          \
            ACC *b = mp_cpu_workspace(MP_CPU_WS_BN_TILE, (size_t)(2 * n) * sizeof(ACC));      \
            BN_WIDEN(ACC, b, x, dt, m0 * C, n);                                               \
            bn_norm_dt_##ACC##_##ISA(MP_CPU_ACC_DTYPE(ACC), b, b + n, 0, r, C, mean, scale,   \
                                     shift, relu);                                            \
            BN_NARROW(ACC, y, b + n, dt, m0 * C, n);                                          \
            return;                                                                           \
        }                                                                                     \
        BN_BY_DTYPE_##ACC(dt, bn_norm_dt_##ACC##_##ISA, x, y, m0, r, C, mean, scale, shift,   \
                          relu);                                                              \
    }                                                                                         \
    MP_ISA_TARGET_##ISA static void bn_dx_##ACC##_##ISA(                                      \
        mp_dtype dt, const void *x, const void *dy, void *dx, int64_t m0, int64_t r,          \
        int64_t C, const ACC *mean, const ACC *invstd, const ACC *k, const ACC *sdy,          \
        const ACC *sdx)                                                                       \
    {                                                                                         \
        if (BN_HALF_BULK(ISA, dt)) {                                                          \
            const int64_t n = r * C;                                                          \
            ACC *b = mp_cpu_workspace(MP_CPU_WS_BN_TILE, (size_t)(3 * n) * sizeof(ACC));      \
            BN_WIDEN(ACC, b, x, dt, m0 * C, n);                                               \
            BN_WIDEN(ACC, b + n, dy, dt, m0 * C, n);                                          \
            bn_dx_dt_##ACC##_##ISA(MP_CPU_ACC_DTYPE(ACC), b, b + n, b + 2 * n, 0, r, C, mean, \
                                   invstd, k, sdy, sdx);                                      \
            BN_NARROW(ACC, dx, b + 2 * n, dt, m0 * C, n);                                     \
            return;                                                                           \
        }                                                                                     \
        BN_BY_DTYPE_##ACC(dt, bn_dx_dt_##ACC##_##ISA, x, dy, dx, m0, r, C, mean, invstd, k,   \
                          sdy, sdx);                                                          \
    }

/* A level's kernels for accumulator ACC, called per chunk or tile of rows by the passes below
 * (which run the threads: no OpenMP region is compiled for a level), and the table of them by
 * level: float at every level compiled, double (FP64 data, the gradient checks' reference) at the
 * baseline. bn_pick_<ACC>() is the level to use now. */
#define MP_BN_LEVEL_TYPE(ACC)                                                                 \
    typedef struct {                                                                          \
        void (*chunk)(mp_dtype dt, const void *x, const void *dy, int64_t r0, int64_t r1,     \
                      int64_t R, int64_t C, const ACC *mean, const ACC *invstd, ACC *lane,    \
                      ACC *t);                                                                \
        void (*norm)(mp_dtype dt, const void *x, void *y, int64_t m0, int64_t r, int64_t C,   \
                     const ACC *mean, const ACC *scale, const ACC *shift, bool relu);         \
        void (*dx)(mp_dtype dt, const void *x, const void *dy, void *dx, int64_t m0,          \
                   int64_t r, int64_t C, const ACC *mean, const ACC *invstd, const ACC *k,    \
                   const ACC *sdy, const ACC *sdx);                                           \
    } bn_level_##ACC;
MP_BN_LEVEL_TYPE(float)
MP_BN_LEVEL_TYPE(double)

#define MP_BN_LEVEL(ACC, ISA)                                                                 \
    MP_BN_TILE_FN(ACC, ISA)                                                                   \
    MP_BN_CHUNK_FN(ACC, ISA)                                                                  \
    MP_BN_ROWS_FN(ACC, ISA)
#define MP_BN_FLOAT_LEVEL(ISA) MP_BN_LEVEL(float, ISA)
MP_ISA_LEVELS(MP_BN_FLOAT_LEVEL)
MP_BN_LEVEL(double, BASE)

#define BN_LEVEL_ROW(ACC, ISA) {bn_chunk_##ACC##_##ISA, bn_norm_##ACC##_##ISA, bn_dx_##ACC##_##ISA}
#define BN_FLOAT_ROW(ISA) [MP_ISA_##ISA] = BN_LEVEL_ROW(float, ISA),
static const bn_level_float bn_levels_float[] = {MP_ISA_LEVELS(BN_FLOAT_ROW)};
static const bn_level_double bn_levels_double[] = {BN_LEVEL_ROW(double, BASE)};

static const bn_level_float *bn_pick_float(void) { return &bn_levels_float[mp_cpu_isa_here()]; }
static const bn_level_double *bn_pick_double(void) { return &bn_levels_double[0]; }

/* The per-channel sums of the training passes for accumulator type ACC over x (M, C), in the
 * order of engine/bn_rule.h (the GPU's). Without dy (forward): s[c] the batch mean and s2[c] the
 * sum of squared deviations from it, by bn_rule.h's chunk rule. With dy (backward): s[c] = sum
 * of dy[m][c] and s2[c] = sum of dy[m][c] (x[m][c] - mean[c]) invstd[c]. The threads take whole
 * chunks (level L's chunk function) and write each chunk's two sums into part (2 C a chunk);
 * the chunks are then added in order, so the sums do not depend on the threads. */
#define MP_BN_SUMS(ACC)                                                                       \
    static void bn_sums_##ACC(const bn_level_##ACC *L, const mp_tensor *x, const mp_tensor *dy, \
                              int64_t M, int64_t C, const ACC *mean, const ACC *invstd,       \
                              ACC *part, ACC *s, ACC *s2)                                     \
    {                                                                                         \
        int64_t rows;                                                                         \
        const int64_t chunks = mp_bn_chunks(M, &rows), R = bn_tile_rows(C, MP_BN_LANES);      \
        MP_CPU_PARALLEL_FOR(chunks > 1 ? M * C : 0)                                           \
        for (int64_t k = 0; k < chunks; k++) {                                                \
            ACC *lane = mp_cpu_workspace(MP_CPU_WS_BN_LANES,                                  \
                                         (size_t)(2 * MP_BN_LANES * C) * sizeof(ACC));        \
            L->chunk(x->dtype, x->data, dy ? dy->data : NULL, k * rows,                       \
                     k * rows + mp_bn_chunk_n(M, rows, k), R, C, mean, invstd, lane,          \
                     part + 2 * k * C);                                                       \
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
MP_BN_SUMS(float)
MP_BN_SUMS(double)

/* ACCs of the BN workspace: `n` C per-channel rows and the chunks' sums (2 C each). */
static inline size_t bn_ws_bytes(int64_t M, int64_t C, int64_t n, size_t acc)
{
    int64_t rows;
    return (size_t)((n + 2 * mp_bn_chunks(M, &rows)) * C) * acc;
}

/* Training or evaluation forward for accumulator ACC (the dtypes of x it takes: BN_BY_DTYPE_<ACC>)
 * at the level bn_pick_<ACC>() picks; the arguments are mp_cpu_batchnorm_forward's, checked. */
#define MP_BN_FWD_FN(ACC)                                                                     \
    static void bn_forward_##ACC(                                                             \
        const mp_bn_args *a, bool train, const mp_tensor *x, const mp_tensor *gamma,          \
        const mp_tensor *beta, mp_tensor *rm, mp_tensor *rv, mp_tensor *sm, mp_tensor *si,    \
        mp_tensor *y, int64_t M, int64_t C)                                                   \
    {                                                                                         \
        const int64_t R = bn_tile_rows(C, 1);                                                 \
        const bn_level_##ACC *L = bn_pick_##ACC();                                            \
        ACC *mean = mp_cpu_workspace(MP_CPU_WS_BN, bn_ws_bytes(M, C, 4, sizeof(ACC)));        \
        ACC *scale = mean + C, *shift = scale + C, *s = shift + C, *part = s + C;             \
        const ACC eps = (ACC)a->eps, mom = (ACC)a->momentum;                                  \
        if (train) {                                                                          \
            bn_sums_##ACC(L, x, NULL, M, C, NULL, NULL, part, mean, s);                       \
            for (int64_t c = 0; c < C; c++) {                                                 \
                ACC var = s[c] / (ACC)M;                                                      \
                ACC invstd = (ACC)1 / (ACC)sqrt((double)(var + eps));                         \
                ACC unbiased = s[c] / (ACC)(M - 1);                                           \
                st(sm, c, (double)mean[c]);                                                   \
                st(si, c, (double)invstd);                                                    \
                st(rm, c, (double)(((ACC)1 - mom) * (ACC)ld(rm, c) + mom * mean[c]));         \
                st(rv, c, (double)(((ACC)1 - mom) * (ACC)ld(rv, c) + mom * unbiased));        \
                scale[c] = invstd * (ACC)ld(gamma, c);                                        \
            }                                                                                 \
        } else {                                                                              \
            for (int64_t c = 0; c < C; c++) {                                                 \
                mean[c] = (ACC)ld(rm, c);                                                     \
                ACC invstd = (ACC)1 / (ACC)sqrt((double)((ACC)ld(rv, c) + eps));              \
                scale[c] = invstd * (ACC)ld(gamma, c);                                        \
            }                                                                                 \
        }                                                                                     \
        for (int64_t c = 0; c < C; c++)                                                       \
            shift[c] = (ACC)ld(beta, c);                                                      \
        MP_CPU_PARALLEL_FOR(M * C)                                                            \
        for (int64_t m0 = 0; m0 < M; m0 += R)                                                 \
            L->norm(x->dtype, x->data, y->data, m0, bn_rows(M, R, m0), C, mean, scale, shift, \
                    a->relu);                                                                 \
    }

/* Backward for accumulator ACC at the level bn_pick_<ACC>() picks; the arguments are
 * mp_cpu_batchnorm_backward's, checked. dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)),
 * the closed form of gamma invstd / M (M dy - sum(dy) - xhat sum(dy xhat));
 * dgamma = sum(dy xhat), dbeta = sum(dy). */
#define MP_BN_BWD_FN(ACC)                                                                     \
    static void bn_backward_##ACC(                                                            \
        const mp_tensor *x, const mp_tensor *dy, const mp_tensor *gamma, const mp_tensor *sm, \
        const mp_tensor *si, mp_tensor *dx, mp_tensor *dgamma, mp_tensor *dbeta, int64_t M,   \
        int64_t C)                                                                            \
    {                                                                                         \
        const int64_t R = bn_tile_rows(C, 1);                                                 \
        const bn_level_##ACC *L = bn_pick_##ACC();                                            \
        ACC *mean = mp_cpu_workspace(MP_CPU_WS_BN, bn_ws_bytes(M, C, 5, sizeof(ACC)));        \
        ACC *invstd = mean + C, *sdy = invstd + C, *sdx = sdy + C, *k = sdx + C;              \
        for (int64_t c = 0; c < C; c++) {                                                     \
            mean[c] = (ACC)ld(sm, c);                                                         \
            invstd[c] = (ACC)ld(si, c);                                                       \
        }                                                                                     \
        bn_sums_##ACC(L, x, dy, M, C, mean, invstd, k + C, sdy, sdx);                         \
        for (int64_t c = 0; c < C; c++) {                                                     \
            st(dgamma, c, (double)sdx[c]);                                                    \
            st(dbeta, c, (double)sdy[c]);                                                     \
        }                                                                                     \
        if (dx) {                                                                             \
            for (int64_t c = 0; c < C; c++) {                                                 \
                k[c] = (ACC)ld(gamma, c) * invstd[c];                                         \
                sdy[c] /= (ACC)M;                                                             \
                sdx[c] /= (ACC)M;                                                             \
            }                                                                                 \
            MP_CPU_PARALLEL_FOR(M * C)                                                        \
            for (int64_t m0 = 0; m0 < M; m0 += R)                                             \
                L->dx(x->dtype, x->data, dy->data, dx->data, m0, bn_rows(M, R, m0), C, mean,  \
                      invstd, k, sdy, sdx);                                                   \
        }                                                                                     \
    }

MP_BN_FWD_FN(float)
MP_BN_FWD_FN(double)
MP_BN_BWD_FN(float)
MP_BN_BWD_FN(double)

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
    (x->dtype == MP_F64 ? bn_forward_double : bn_forward_float)(
        a, train, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y, M, C);
    return MP_OK;
}

/* With a->relu, dy where y > 0 (relu_backward's pass, into dx or, without one, a workspace),
 * then the unfused backward on it: the CPU fuses the ReLU into the forward only, and its
 * backward costs what the unfused pair does. */
mp_status mp_cpu_batchnorm_backward(const mp_bn_args *a, const mp_tensor *x, const mp_tensor *y,
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
    MP_CPU_REQUIRE(!a->relu || (y && mp_tensor_numel(y) == M * C && y->dtype == x->dtype),
                   "batchnorm_backward");
    mp_tensor g = *dy;
    if (a->relu) {
        g.data = dx ? dx->data : mp_cpu_workspace(MP_CPU_WS_BN_MASK, (size_t)mp_tensor_bytes(dy));
        MP_TRY(mp_cpu_relu_backward(y, dy, &g));
    }
    (x->dtype == MP_F64 ? bn_backward_double : bn_backward_float)(x, &g, gamma, save_mean,
                                                                  save_invstd, dx, dgamma, dbeta,
                                                                  M, C);
    return MP_OK;
}
