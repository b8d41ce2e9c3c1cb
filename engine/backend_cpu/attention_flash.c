/* Tiled ("flash") multi-head self-attention on the CPU (engine/op_list.h's
 * attention_flash_forward and attention_flash_backward; the online softmax's rules in
 * engine/attn_flash.h, shared with the GPU). Work is in FP32, or FP64 when every tensor is FP64,
 * with one converted copy of each operand whose dtype differs (as attention.c). Per sequence n
 * and head h, queries go in tiles of MP_FLASH_BR rows and keys in tiles of MP_FLASH_BC columns:
 * OpenBLAS forms a tile of scores S = Q K^T / sqrt(dh) (BR x BC, a few KiB that stay in L1/L2),
 * the row rules update each row's maximum and sum and scale its output accumulator (the output
 * rows themselves, in the working type), and out += P' V adds the tile; under the causal mask
 * key tiles right of a query tile's last row are skipped and masked entries are exact zeros.
 * The backward (FlashAttention-2's order) goes over key tiles, and for each over the query tiles
 * that see it: it recomputes S and P = e^(S - m) / l from the saved statistics, forms
 * dP' = dO V^T, dP = dP' keep / (1 - p), dS = P (dP - d_i) with d_i = dO_i . out_i (the rowsum
 * sum_j dP_ij P_ij, from the stored output), and adds dV += P'^T dO, dK += dS^T Q / sqrt(dh),
 * dQ += dS K / sqrt(dh). Working memory grows with T (copies, tiles, one row vector), never
 * with T^2. Threads (parallel.h) take whole query tiles (forward) or whole heads (backward),
 * each writing only its own rows and columns in a fixed order, so the results are bitwise the
 * same for any thread count; OpenBLAS (its OpenMP build) runs single-threaded inside them, the
 * region opening even for a call of one tile or head. The tile kernels are
 * compiled for AVX2 too (engine/vector_clones.h: the exponentials, the dropout hash and the row
 * loops in vectors, the same bits; tests/unit/test_isa_bits.c). */
#include <string.h>

#include "engine/attn_flash.h"
#include "engine/backend_cpu/attn_cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/dropout_mask.h"
#include "engine/vector_clones.h"

/* Query rows and key columns of a tile. */
enum { MP_FLASH_BR = 64, MP_FLASH_BC = 64 };

/* One call's geometry, mask and working tensors in the working type wt. */
typedef struct flash_run {
    mp_attn_geom g;
    mp_attn_mask k;
    mp_dtype wt;
    const void *x;    /* qkv (N, T, 3D) */
    void *stats;      /* (N, heads, T, 2): m, l */
    const void *o;    /* backward: out (N, T, D) */
    const void *dout; /* backward: dout (N, T, D) */
    void *y;          /* forward: out (N, T, D); backward: dqkv (N, T, 3D) */
} flash_run;

/* One thread's working memory (MP_CPU_WS_ATTN_TILE): tiles (BR, BC) of scores and of dP, a
 * tile row's BC dropout multipliers and (backward) the T row terms d_i of its head. */
typedef struct flash_tiles {
    void *s, *dp, *mult, *d;
} flash_tiles;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The dropout multipliers keep / (1 - p) or 0 of probabilities (n, h, i, j0 .. j0 + len - 1)
 * into mult, in the working type ACC. */
#define MP_FLASH_DROP_ROW(ACC, r, n, h, i, j0, len, mult)                                         \
    do {                                                                                          \
        const mp_attn_mask *m_ = &(r)->k;                                                         \
        const uint64_t c0_ = mp_attn_counter(m_->offset, (r)->g.heads, (r)->g.T, n, h, i, j0);    \
        const ACC ks_ = (ACC)m_->keep_scale;                                                      \
        for (int64_t jd_ = 0; jd_ < (len); jd_++)                                                 \
            (mult)[jd_] = mp_dropout_keep(m_->key, c0_ + (uint64_t)jd_, m_->thr) ? ks_ : (ACC)0;  \
    } while (0)

/* The FP64 working type's row rules (FP32's are engine/attn_flash.h's). */
static double flash_max_f64(double m, double tile_max, bool bad)
{
    return bad || m != m ? NAN : tile_max > m ? tile_max : m;
}

static double flash_rescale_f64(double m, double m2) { return m == -INFINITY ? 0.0 : exp(m - m2); }

static double flash_p_f64(double s, double m, double inv_l) { return exp(s - m) * inv_l; }

/* Defines, for working type ACC (suffix SFX; rules MAX, RESCALE, EXP, P), each working in this
 * thread's tiles w:
 *   fwd_tile_SFX(r, w, n, h, i0, i1): out rows [i0, i1) of head h of sequence n and their stats;
 *   bwd_tile_SFX(r, w, n, h, j0, j1, i0, i1): the products of key tile [j0, j1) and query tile
 *     [i0, i1) added to dq, dk and dv;
 *   bwd_head_SFX(r, w, n, h): the d_i of the head and all its tiles. */
#define MP_FLASH_KERNELS(ACC, SFX, MAX, RESCALE, EXP, P)                                          \
    MP_VECTOR_CLONES static void fwd_tile_##SFX(const flash_run *r, const flash_tiles *w,         \
                                                int64_t n, int64_t h, int64_t i0, int64_t i1)     \
    {                                                                                             \
        const int64_t T = r->g.T, D = r->g.D, dh = r->g.dh, ld = 3 * D, rows = i1 - i0;           \
        const ACC *q = (const ACC *)r->x + n * T * ld + h * dh, *k = q + D, *v = q + 2 * D;       \
        ACC *out = (ACC *)r->y + n * T * D + h * dh, *s = w->s;                                   \
        ACC *st = (ACC *)r->stats + (n * r->g.heads + h) * T * 2;                                 \
        for (int64_t i = i0; i < i1; i++) {                                                       \
            st[2 * i] = (ACC)-INFINITY, st[2 * i + 1] = 0;                                        \
            memset(out + i * D, 0, (size_t)dh * sizeof(ACC));                                     \
        }                                                                                         \
        const int64_t jend = r->k.causal ? i1 : T;                                                \
        for (int64_t j0 = 0; j0 < jend; j0 += MP_FLASH_BC) {                                      \
            const int64_t j1 = min64(j0 + MP_FLASH_BC, jend), cols = j1 - j0;                     \
            GEMM(false, true, rows, cols, dh, r->k.scale, q + i0 * ld, ld, k + j0 * ld, ld, s,    \
                 MP_FLASH_BC);                                                                    \
            for (int64_t i = i0; i < i1; i++) {                                                   \
                ACC *restrict si = s + (i - i0) * MP_FLASH_BC, *oi = out + i * D;                 \
                int64_t lim = mp_attn_flash_cols(r->k.causal, i, j0, j1), j;                      \
                if (lim > 0) {                                                                    \
                    bool bad;                                                                     \
                    ACC m = st[2 * i], sum, top = mp_attn_rowmax_##SFX(si, lim, &bad);            \
                    ACC m2 = MAX(m, top, bad);                                                    \
                    ACC c = RESCALE(m, m2);                                                       \
                    for (j = 0; j < lim; j++)                                                     \
                        si[j] = EXP(si[j] - m2);                                                  \
                    MP_ATTN_SUM8(ACC, si, lim, sum);                                              \
                    st[2 * i] = m2, st[2 * i + 1] = st[2 * i + 1] * c + sum;                      \
                    for (j = 0; j < dh; j++)                                                      \
                        oi[j] *= c;                                                               \
                    if (r->k.drop) {                                                              \
                        ACC *restrict mult = w->mult;                                             \
                        MP_FLASH_DROP_ROW(ACC, r, n, h, i, j0, lim, mult);                        \
                        for (j = 0; j < lim; j++)                                                 \
                            si[j] *= mult[j];                                                     \
                    }                                                                             \
                }                                                                                 \
                for (j = lim > 0 ? lim : 0; j < cols; j++)                                        \
                    si[j] = 0;                                                                    \
            }                                                                                     \
            GEMM_ADD(false, false, rows, dh, cols, 1.0, s, MP_FLASH_BC, v + j0 * ld, ld,          \
                     out + i0 * D, D);                                                            \
        }                                                                                         \
        for (int64_t i = i0; i < i1; i++) {                                                       \
            ACC inv = (ACC)1 / st[2 * i + 1], *oi = out + i * D;                                  \
            for (int64_t j = 0; j < dh; j++)                                                      \
                oi[j] *= inv;                                                                     \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    MP_VECTOR_CLONES static void bwd_tile_##SFX(const flash_run *r, const flash_tiles *w,         \
                                                int64_t n, int64_t h, int64_t j0, int64_t j1,     \
                                                int64_t i0, int64_t i1)                           \
    {                                                                                             \
        const int64_t T = r->g.T, D = r->g.D, dh = r->g.dh, ld = 3 * D;                           \
        const int64_t rows = i1 - i0, cols = j1 - j0;                                             \
        const ACC *q = (const ACC *)r->x + n * T * ld + h * dh, *k = q + D, *v = q + 2 * D;       \
        const ACC *dout = (const ACC *)r->dout + n * T * D + h * dh;                              \
        const ACC *st = (const ACC *)r->stats + (n * r->g.heads + h) * T * 2;                     \
        const ACC *dv_i = (const ACC *)w->d;                                                      \
        ACC *dq = (ACC *)r->y + n * T * ld + h * dh, *dk = dq + D, *dv = dq + 2 * D;              \
        ACC *s = w->s, *dp = w->dp;                                                               \
        GEMM(false, true, rows, cols, dh, r->k.scale, q + i0 * ld, ld, k + j0 * ld, ld, s,        \
             MP_FLASH_BC);                                                                        \
        GEMM(false, true, rows, cols, dh, 1.0, dout + i0 * D, D, v + j0 * ld, ld, dp,             \
             MP_FLASH_BC); /* dP' = dO V^T */                                                     \
        for (int64_t i = i0; i < i1; i++) {                                                       \
            ACC *restrict si = s + (i - i0) * MP_FLASH_BC;                                        \
            ACC *restrict di = dp + (i - i0) * MP_FLASH_BC, *restrict mult = w->mult;             \
            int64_t lim = mp_attn_flash_cols(r->k.causal, i, j0, j1), j;                          \
            ACC m = st[2 * i], inv = (ACC)1 / st[2 * i + 1], dr = dv_i[i];                        \
            for (j = 0; j < lim; j++)                                                             \
                si[j] = P(si[j], m, inv);                                                         \
            if (r->k.drop) { /* dP = dP' keep / (1 - p) */                                        \
                MP_FLASH_DROP_ROW(ACC, r, n, h, i, j0, lim, mult);                                \
                for (j = 0; j < lim; j++)                                                         \
                    di[j] *= mult[j];                                                             \
            }                                                                                     \
            for (j = 0; j < lim; j++) /* dS = P (dP - d_i) */                                     \
                di[j] = si[j] * (di[j] - dr);                                                     \
            if (r->k.drop) /* P' for dV */                                                        \
                for (j = 0; j < lim; j++)                                                         \
                    si[j] *= mult[j];                                                             \
            for (j = lim > 0 ? lim : 0; j < cols; j++)                                            \
                si[j] = 0, di[j] = 0;                                                             \
        }                                                                                         \
        GEMM_ADD(true, false, cols, dh, rows, 1.0, s, MP_FLASH_BC, dout + i0 * D, D,              \
                 dv + j0 * ld, ld); /* dV += P'^T dO */                                           \
        GEMM_ADD(true, false, cols, dh, rows, r->k.scale, dp, MP_FLASH_BC, q + i0 * ld, ld,       \
                 dk + j0 * ld, ld); /* dK += dS^T Q / sqrt(dh) */                                 \
        GEMM_ADD(false, false, rows, dh, cols, r->k.scale, dp, MP_FLASH_BC, k + j0 * ld, ld,      \
                 dq + i0 * ld, ld); /* dQ += dS K / sqrt(dh) */                                   \
    }                                                                                             \
                                                                                                  \
    MP_VECTOR_CLONES static void bwd_head_##SFX(const flash_run *r, const flash_tiles *w,         \
                                                int64_t n, int64_t h)                             \
    {                                                                                             \
        const int64_t T = r->g.T, D = r->g.D, dh = r->g.dh, ld = 3 * D;                           \
        const ACC *o = (const ACC *)r->o + n * T * D + h * dh;                                    \
        const ACC *dout = (const ACC *)r->dout + n * T * D + h * dh;                              \
        ACC *d = w->d, *dq = (ACC *)r->y + n * T * ld + h * dh;                                   \
        for (int64_t i = 0; i < T; i++) {                                                         \
            ACC acc = 0;                                                                          \
            for (int64_t c = 0; c < dh; c++)                                                      \
                acc += dout[i * D + c] * o[i * D + c];                                            \
            d[i] = acc;                                                                           \
            for (int part = 0; part < 3; part++)                                                  \
                memset(dq + i * ld + part * D, 0, (size_t)dh * sizeof(ACC));                      \
        }                                                                                         \
        for (int64_t j0 = 0; j0 < T; j0 += MP_FLASH_BC) {                                         \
            int64_t j1 = min64(j0 + MP_FLASH_BC, T);                                              \
            int64_t first = r->k.causal ? j0 / MP_FLASH_BR * MP_FLASH_BR : 0;                     \
            for (int64_t i0 = first; i0 < T; i0 += MP_FLASH_BR)                                   \
                bwd_tile_##SFX(r, w, n, h, j0, j1, i0, min64(i0 + MP_FLASH_BR, T));               \
        }                                                                                         \
    }

MP_FLASH_KERNELS(float, f32, mp_attn_flash_max, mp_attn_flash_rescale, mp_exp_f32,
                 mp_attn_flash_p)
MP_FLASH_KERNELS(double, f64, flash_max_f64, flash_rescale_f64, exp, flash_p_f64)

/* Checks the call (every tensor FP64, or none; stats in mp_attn_flash_stats_dtype) and fills
 * the run's geometry, mask and types. */
static mp_status flash_setup(const char *op, const mp_attn_desc *d, const mp_tensor *qkv,
                             const mp_tensor *stats, const mp_tensor *o, const mp_tensor *other,
                             flash_run *r)
{
    memset(r, 0, sizeof *r);
    MP_CPU_REQUIRE(mp_attn_flash_geometry(d, qkv, stats, o, &r->g), op);
    bool f64 = qkv->dtype == MP_F64;
    MP_CPU_REQUIRE(f64 == (o->dtype == MP_F64) && f64 == (other->dtype == MP_F64), op);
    r->wt = f64 ? MP_F64 : MP_F32;
    MP_CPU_REQUIRE(stats->dtype == mp_attn_flash_stats_dtype(r->wt), op);
    r->stats = stats->data;
    r->k = mp_attn_mask_of(d, r->g.dh);
    return MP_OK;
}

/* t in the working type: t's own data, or `copy` filled from it. */
static const void *working(const flash_run *r, const mp_tensor *t, void *copy)
{
    if (t->dtype == r->wt)
        return t->data;
    mp_cpu_convert_bulk(copy, r->wt, t->data, t->dtype, (size_t)mp_tensor_numel(t));
    return copy;
}

static size_t copy_bytes(const flash_run *r, const mp_tensor *t)
{
    return t->dtype == r->wt ? 0 : (size_t)mp_tensor_numel(t) * mp_dtype_size(r->wt);
}

/* This thread's tiles (T row terms only for the backward). */
static flash_tiles tiles(const flash_run *r, bool backward)
{
    size_t es = mp_dtype_size(r->wt);
    size_t tile = mp_attn_round64((size_t)(MP_FLASH_BR * MP_FLASH_BC) * es);
    size_t row = mp_attn_round64((size_t)MP_FLASH_BC * es);
    size_t d = backward ? (size_t)r->g.T * es : 0;
    char *p = mp_cpu_workspace(MP_CPU_WS_ATTN_TILE, 2 * tile + row + d);
    return (flash_tiles){.s = p, .dp = p + tile, .mult = p + 2 * tile, .d = p + 2 * tile + row};
}

mp_status mp_cpu_attention_flash_forward(const mp_attn_desc *d, const mp_tensor *qkv,
                                         mp_tensor *stats, mp_tensor *out)
{
    flash_run r;
    MP_TRY(flash_setup("attention_flash_forward", d, qkv, stats, out, out, &r));
    size_t bytes[2] = {copy_bytes(&r, qkv), copy_bytes(&r, out)};
    void *part[2];
    mp_attn_workspace(2, bytes, part);
    r.x = working(&r, qkv, part[0]);
    r.y = out->dtype == r.wt ? out->data : part[1];
    const int64_t nt = (r.g.T + MP_FLASH_BR - 1) / MP_FLASH_BR, units = r.g.N * r.g.heads * nt;
    MP_CPU_PARALLEL_FOR(MP_CPU_GRAIN) /* always: OpenBLAS on one thread inside */
    for (int64_t u = 0; u < units; u++) {
        flash_tiles w = tiles(&r, false);
        int64_t n = u / (r.g.heads * nt), h = u / nt % r.g.heads, i0 = u % nt * MP_FLASH_BR;
        int64_t i1 = min64(i0 + MP_FLASH_BR, r.g.T);
        if (r.wt == MP_F64)
            fwd_tile_f64(&r, &w, n, h, i0, i1);
        else
            fwd_tile_f32(&r, &w, n, h, i0, i1);
    }
    if (r.y != out->data)
        mp_cpu_convert_bulk(out->data, out->dtype, r.y, r.wt, (size_t)mp_tensor_numel(out));
    return MP_OK;
}

mp_status mp_cpu_attention_flash_backward(const mp_attn_desc *d, const mp_tensor *qkv,
                                          const mp_tensor *out, const mp_tensor *stats,
                                          const mp_tensor *dout, mp_tensor *dqkv)
{
    flash_run r;
    MP_TRY(flash_setup("attention_flash_backward", d, qkv, stats, out, dqkv, &r));
    MP_CPU_REQUIRE(mp_attn_shaped(dout, qkv->shape[0], qkv->shape[1], qkv->shape[2], r.g.D) &&
                       mp_attn_shaped(dqkv, qkv->shape[0], qkv->shape[1], qkv->shape[2],
                                      qkv->shape[3]) &&
                       (dout->dtype == MP_F64) == (r.wt == MP_F64),
                   "attention_flash_backward");
    size_t bytes[4] = {copy_bytes(&r, qkv), copy_bytes(&r, out), copy_bytes(&r, dout),
                       copy_bytes(&r, dqkv)};
    void *part[4];
    mp_attn_workspace(4, bytes, part);
    r.x = working(&r, qkv, part[0]);
    r.o = working(&r, out, part[1]);
    r.dout = working(&r, dout, part[2]);
    r.y = dqkv->dtype == r.wt ? dqkv->data : part[3];
    const int64_t units = r.g.N * r.g.heads;
    MP_CPU_PARALLEL_FOR(MP_CPU_GRAIN) /* always: OpenBLAS on one thread inside */
    for (int64_t u = 0; u < units; u++) {
        flash_tiles w = tiles(&r, true);
        if (r.wt == MP_F64)
            bwd_head_f64(&r, &w, u / r.g.heads, u % r.g.heads);
        else
            bwd_head_f32(&r, &w, u / r.g.heads, u % r.g.heads);
    }
    if (r.y != dqkv->data)
        mp_cpu_convert_bulk(dqkv->data, dqkv->dtype, r.y, r.wt, (size_t)mp_tensor_numel(dqkv));
    return MP_OK;
}
