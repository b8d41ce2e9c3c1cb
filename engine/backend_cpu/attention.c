/* Multi-head self-attention on the CPU (engine/op_list.h's attention_forward and
 * attention_backward; geometry and element rules in engine/attn_geom.h). Work is in FP32, or
 * FP64 when every tensor is FP64: q, k and v are read in place from qkv's rows (ld 3D) when qkv
 * has the working type, else from one converted copy, and per sequence n and head h OpenBLAS
 * (sgemm / dgemm) forms S = Q K^T / sqrt(dh), out = P' V and the backward's products, into
 * (T, T) working matrices. Softmax rows run in the working type: S is rounded to probs' dtype
 * and back (mp_convert), the row's maximum subtracted, exponentiated with mp_exp_f32 (the
 * GPU's own; FP64: the C library's exp), summed in 8 lanes combined in a fixed order, and scaled
 * by the sum's reciprocal; a row holding an inf or NaN becomes NaN. P is rounded to probs'
 * dtype, and the products use that rounded P, so forward and backward see the same
 * probabilities. Under the causal mask rows go in blocks of MP_ATTN_BLOCK: block [r0, r1)
 * multiplies only columns [0, r1) (and backward's transposed products only rows [c0, T) of
 * column block [c0, c1)), the masked entries of the computed part being exact zeros, so about
 * half the arithmetic of the full matrices is skipped; a non-finite v (or q, k) at a masked
 * position may therefore reach other rows of its block through 0 * inf. Outputs in another
 * dtype are computed in a working copy and rounded once at the end. Threads (parallel.h) take
 * whole heads, each with its own (T, T) matrices and writing only its own rows and columns in a
 * fixed order, so the results are bitwise the same for any thread count; OpenBLAS (its OpenMP
 * build) runs single-threaded inside them (a threaded product split at other edges gave FP64
 * results that moved with the thread count), also for a call of one head (N heads = 1), whose
 * one head then runs on one thread while the others wait. The row loops are
 * compiled for AVX2 too (engine/vector_clones.h), with the same bits. The working memory is
 * per-thread workspace that only grows (MP_MEM_WORKSPACE): (T, T) matrices per thread. */
#include <math.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/attn_geom.h"
#include "engine/backend_cpu/attn_cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/dropout_mask.h"
#include "engine/vector_clones.h"

/* Rows per block under the causal mask. */
enum { MP_ATTN_BLOCK = 32 };

/* One call's geometry, mask and working tensors, in the working type (wt: MP_F32 or MP_F64). */
typedef struct attn_run {
    mp_attn_geom g;
    mp_attn_mask k;
    mp_dtype wt, pdt;         /* working type, probs' dtype */
    const void *x;            /* qkv (N, T, 3D) */
    void *probs;              /* probs (N, heads, T, T) in pdt */
    const void *dout;         /* backward: dout (N, T, D) */
    void *y;                  /* forward: out (N, T, D); backward: dqkv (N, T, 3D) */
} attn_run;

/* One thread's working memory (MP_CPU_WS_ATTN_TILE): (T, T) matrices a and (backward) b, and
 * (backward) a row of T dropout multipliers. */
typedef struct attn_scratch {
    void *a, *b, *row;
} attn_scratch;

/* This thread's scratch for a forward or a backward call. */
static attn_scratch scratch(const attn_run *r, bool backward)
{
    size_t es = mp_dtype_size(r->wt), tt = mp_attn_round64((size_t)(r->g.T * r->g.T) * es);
    size_t row = backward ? (size_t)r->g.T * es : 0;
    char *p = mp_cpu_workspace(MP_CPU_WS_ATTN_TILE, (backward ? 2 * tt : tt) + row);
    if (!backward)
        return (attn_scratch){.a = p, .b = NULL, .row = NULL};
    return (attn_scratch){.a = p, .b = p + tt, .row = p + 2 * tt};
}

/* The end of the block holding row i: the columns its products cover. */
static int64_t block_end(const attn_run *r, int64_t i)
{
    if (!r->k.causal)
        return r->g.T;
    int64_t e = (i / MP_ATTN_BLOCK + 1) * MP_ATTN_BLOCK;
    return e < r->g.T ? e : r->g.T;
}

/* probs' row i of head (n, h). */
static void *probs_row(const attn_run *r, int64_t n, int64_t h, int64_t i)
{
    int64_t off = ((n * r->g.heads + h) * r->g.T + i) * r->g.T;
    return (char *)r->probs + (size_t)off * mp_dtype_size(r->pdt);
}

/* Defines, for working type ACC (suffix SFX, exponential EXP):
 *   softmax_SFX(v, n): v[0 .. n) = softmax(v) in place (n >= 1): e^(v - max) summed in 8
 *     lanes combined in a fixed order, times the sum's reciprocal; NaN everywhere when v holds
 *     an inf or NaN;
 *   fwd_head_SFX(r, n, h): probs and out of head h of sequence n;
 *   bwd_head_SFX(r, n, h): dq, dk and dv of head h of sequence n.
 * Loops over a row are simple or go in 8 lanes, so that the compiler vectorises them. */
#define MP_ATTN_KERNELS(ACC, SFX, EXP)                                                            \
    MP_VECTOR_CLONES static void softmax_##SFX(ACC *restrict v, int64_t n)                        \
    {                                                                                             \
        bool bad;                                                                                 \
        ACC m = mp_attn_rowmax_##SFX(v, n, &bad), sum;                                            \
        if (bad) {                                                                                \
            for (int64_t j = 0; j < n; j++)                                                       \
                v[j] = (ACC)NAN;                                                                  \
            return;                                                                               \
        }                                                                                         \
        for (int64_t j = 0; j < n; j++)                                                           \
            v[j] = EXP(v[j] - m);                                                                 \
        MP_ATTN_SUM8(ACC, v, n, sum);                                                             \
        ACC inv = (ACC)1 / sum;                                                                   \
        for (int64_t j = 0; j < n; j++)                                                           \
            v[j] *= inv;                                                                          \
    }                                                                                             \
                                                                                                  \
    MP_VECTOR_CLONES static void fwd_head_##SFX(const attn_run *r, const attn_scratch *w,         \
                                                int64_t n, int64_t h)                             \
    {                                                                                             \
        const int64_t T = r->g.T, D = r->g.D, dh = r->g.dh, ld = 3 * D;                           \
        const ACC *q = (const ACC *)r->x + n * T * ld + h * dh, *k = q + D, *v = q + 2 * D;       \
        ACC *s = w->a, *out = (ACC *)r->y + n * T * D + h * dh;                                   \
        const int64_t blk = r->k.causal ? MP_ATTN_BLOCK : T;                                      \
        for (int64_t r0 = 0; r0 < T; r0 += blk) {                                                 \
            int64_t r1 = block_end(r, r0);                                                        \
            GEMM(false, true, r1 - r0, r->k.causal ? r1 : T, dh, r->k.scale, q + r0 * ld, ld, k,  \
                 ld, s + r0 * T, T);                                                              \
        }                                                                                         \
        const mp_dtype wt = r->wt;                                                                \
        const ACC ks = (ACC)r->k.keep_scale;                                                      \
        for (int64_t i = 0; i < T; i++) {                                                         \
            ACC *si = s + i * T;                                                                  \
            void *pi = probs_row(r, n, h, i);                                                     \
            int64_t lim = mp_attn_span(r->k.causal, T, i);                                        \
            if (r->pdt != wt) { /* S rounded to probs' dtype */                                   \
                mp_convert(pi, r->pdt, si, wt, (size_t)lim);                                      \
                mp_convert(si, wt, pi, r->pdt, (size_t)lim);                                      \
            }                                                                                     \
            softmax_##SFX(si, lim);                                                               \
            mp_convert(pi, r->pdt, si, wt, (size_t)lim);                                          \
            if (r->pdt != wt) /* the products use the stored P */                                 \
                mp_convert(si, wt, pi, r->pdt, (size_t)lim);                                      \
            memset((char *)pi + (size_t)lim * mp_dtype_size(r->pdt), 0,                           \
                   (size_t)(T - lim) * mp_dtype_size(r->pdt));                                    \
            for (int64_t j = lim; j < block_end(r, i); j++)                                       \
                si[j] = 0;                                                                        \
            if (r->k.drop)                                                                        \
                for (int64_t j = 0; j < lim; j++) {                                               \
                    uint64_t c = mp_attn_counter(r->k.offset, r->g.heads, T, n, h, i, j);         \
                    si[j] *= mp_dropout_keep(r->k.key, c, r->k.thr) ? ks : (ACC)0;                \
                }                                                                                 \
        }                                                                                         \
        for (int64_t r0 = 0; r0 < T; r0 += blk) {                                                 \
            int64_t r1 = block_end(r, r0);                                                        \
            GEMM(false, false, r1 - r0, dh, r->k.causal ? r1 : T, 1.0, s + r0 * T, T, v, ld,      \
                 out + r0 * D, D);                                                                \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    MP_VECTOR_CLONES static void bwd_head_##SFX(const attn_run *r, const attn_scratch *w,         \
                                                int64_t n, int64_t h)                             \
    {                                                                                             \
        const int64_t T = r->g.T, D = r->g.D, dh = r->g.dh, ld = 3 * D;                           \
        const ACC *q = (const ACC *)r->x + n * T * ld + h * dh, *k = q + D, *v = q + 2 * D;       \
        const ACC *dout = (const ACC *)r->dout + n * T * D + h * dh;                              \
        ACC *dq = (ACC *)r->y + n * T * ld + h * dh, *dk = dq + D, *dv = dq + 2 * D;              \
        ACC *p = w->a, *ds = w->b, *mult = w->row;                                                \
        const int64_t blk = r->k.causal ? MP_ATTN_BLOCK : T;                                      \
        mp_convert(p, r->wt, probs_row(r, n, h, 0), r->pdt, (size_t)(T * T));                     \
        for (int64_t r0 = 0; r0 < T; r0 += blk) { /* dP' = dO V^T */                              \
            int64_t r1 = block_end(r, r0);                                                        \
            GEMM(false, true, r1 - r0, r->k.causal ? r1 : T, dh, 1.0, dout + r0 * D, D, v, ld,    \
                 ds + r0 * T, T);                                                                 \
        }                                                                                         \
        const ACC ks = (ACC)r->k.keep_scale;                                                      \
        for (int64_t i = 0; i < T; i++) {                                                         \
            ACC *restrict pi = p + i * T, *restrict di = ds + i * T, acc[8] = {0};                \
            int64_t lim = mp_attn_span(r->k.causal, T, i), j = 0;                                 \
            if (r->k.drop) /* dP = dP' keep / (1 - p) */                                          \
                for (j = 0; j < lim; j++) {                                                       \
                    uint64_t c = mp_attn_counter(r->k.offset, r->g.heads, T, n, h, i, j);         \
                    mult[j] = mp_dropout_keep(r->k.key, c, r->k.thr) ? ks : (ACC)0;               \
                    di[j] *= mult[j];                                                             \
                }                                                                                 \
            for (j = 0; j + 8 <= lim; j += 8)                                                     \
                for (int c = 0; c < 8; c++)                                                       \
                    acc[c] += di[j + c] * pi[j + c];                                              \
            for (; j < lim; j++)                                                                  \
                acc[0] += di[j] * pi[j];                                                          \
            ACC rs = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +                                    \
                     ((acc[4] + acc[5]) + (acc[6] + acc[7]));                                     \
            for (j = 0; j < lim; j++) /* dS = P o (dP - rowsum(dP o P)) */                        \
                di[j] = pi[j] * (di[j] - rs);                                                     \
            if (r->k.drop) /* P' for dV */                                                        \
                for (j = 0; j < lim; j++)                                                         \
                    pi[j] *= mult[j];                                                             \
            for (j = lim; j < block_end(r, i); j++)                                               \
                pi[j] = 0, di[j] = 0;                                                             \
        }                                                                                         \
        for (int64_t r0 = 0; r0 < T; r0 += blk) { /* dQ = dS K / sqrt(dh) */                      \
            int64_t r1 = block_end(r, r0);                                                        \
            GEMM(false, false, r1 - r0, dh, r->k.causal ? r1 : T, r->k.scale, ds + r0 * T, T, k,  \
                 ld, dq + r0 * ld, ld);                                                           \
        }                                                                                         \
        for (int64_t c0 = 0; c0 < T; c0 += blk) {                                                 \
            int64_t c1 = block_end(r, c0), i0 = r->k.causal ? c0 : 0;                             \
            /* dV = P'^T dO, dK = dS^T Q / sqrt(dh): rows i >= c0 of the column block */          \
            GEMM(true, false, c1 - c0, dh, T - i0, 1.0, p + i0 * T + c0, T, dout + i0 * D, D,     \
                 dv + c0 * ld, ld);                                                               \
            GEMM(true, false, c1 - c0, dh, T - i0, r->k.scale, ds + i0 * T + c0, T,               \
                 q + i0 * ld, ld, dk + c0 * ld, ld);                                              \
        }                                                                                         \
    }

MP_ATTN_KERNELS(float, f32, mp_exp_f32)
MP_ATTN_KERNELS(double, f64, mp_exp_f64)

/* Checks the call and fills the run's geometry, mask and types (the working pointers are the
 * caller's). */
static mp_status attn_setup(const char *op, const mp_attn_desc *d, const mp_tensor *qkv,
                            const mp_tensor *probs, const mp_tensor *o, const mp_tensor *other,
                            attn_run *r)
{
    memset(r, 0, sizeof *r);
    MP_CPU_REQUIRE(mp_attn_geometry(d, qkv, probs, o, &r->g), op);
    bool f64 = qkv->dtype == MP_F64;
    MP_CPU_REQUIRE(f64 == (probs->dtype == MP_F64) && f64 == (o->dtype == MP_F64) &&
                       f64 == (other->dtype == MP_F64),
                   op);
    r->wt = f64 ? MP_F64 : MP_F32;
    r->pdt = probs->dtype;
    r->probs = probs->data;
    r->k = mp_attn_mask_of(d, r->g.dh);
    return MP_OK;
}

/* Every head of every sequence, forward or backward, split across the threads. The region opens
 * even for one head or little work (MP_CPU_GRAIN as the work): inside it OpenBLAS's OpenMP build
 * runs each product on the calling thread, whose sums then do not depend on the thread count. */
static void each_head(const attn_run *r, bool backward)
{
    const int64_t units = r->g.N * r->g.heads;
    MP_CPU_PARALLEL_FOR(MP_CPU_GRAIN)
    for (int64_t u = 0; u < units; u++) {
        attn_scratch w = scratch(r, backward);
        int64_t n = u / r->g.heads, h = u % r->g.heads;
        if (r->wt == MP_F64)
            (backward ? bwd_head_f64 : fwd_head_f64)(r, &w, n, h);
        else
            (backward ? bwd_head_f32 : fwd_head_f32)(r, &w, n, h);
    }
}

mp_status mp_cpu_attention_forward(const mp_attn_desc *d, const mp_tensor *qkv,
                                   mp_tensor *probs, mp_tensor *out)
{
    attn_run r;
    MP_TRY(attn_setup("attention_forward", d, qkv, probs, out, out, &r));
    const mp_attn_geom *g = &r.g;
    size_t es = mp_dtype_size(r.wt), nx = (size_t)(g->N * g->T * 3 * g->D);
    size_t ny = (size_t)(g->N * g->T * g->D);
    bool cx = qkv->dtype != r.wt, cy = out->dtype != r.wt;
    size_t bytes[2] = {cx ? nx * es : 0, cy ? ny * es : 0};
    void *part[2];
    mp_attn_workspace(2, bytes, part);
    r.x = cx ? part[0] : qkv->data;
    r.y = cy ? part[1] : out->data;
    if (cx)
        mp_cpu_convert_bulk(part[0], r.wt, qkv->data, qkv->dtype, nx);
    each_head(&r, false);
    if (cy)
        mp_cpu_convert_bulk(out->data, out->dtype, part[1], r.wt, ny);
    return MP_OK;
}

mp_status mp_cpu_attention_backward(const mp_attn_desc *d, const mp_tensor *qkv,
                                    const mp_tensor *probs, const mp_tensor *dout,
                                    mp_tensor *dqkv)
{
    attn_run r;
    MP_TRY(attn_setup("attention_backward", d, qkv, probs, dout, dqkv, &r));
    MP_CPU_REQUIRE(mp_attn_shaped(dqkv, qkv->shape[0], qkv->shape[1], qkv->shape[2],
                                  qkv->shape[3]),
                   "attention_backward");
    const mp_attn_geom *g = &r.g;
    size_t es = mp_dtype_size(r.wt), nx = (size_t)(g->N * g->T * 3 * g->D);
    size_t ny = (size_t)(g->N * g->T * g->D);
    bool cx = qkv->dtype != r.wt, co = dout->dtype != r.wt, cd = dqkv->dtype != r.wt;
    size_t bytes[3] = {cx ? nx * es : 0, co ? ny * es : 0, cd ? nx * es : 0};
    void *part[3];
    mp_attn_workspace(3, bytes, part);
    r.x = cx ? part[0] : qkv->data;
    r.dout = co ? part[1] : dout->data;
    r.y = cd ? part[2] : dqkv->data;
    if (cx)
        mp_cpu_convert_bulk(part[0], r.wt, qkv->data, qkv->dtype, nx);
    if (co)
        mp_cpu_convert_bulk(part[1], r.wt, dout->data, dout->dtype, ny);
    each_head(&r, true);
    if (cd)
        mp_cpu_convert_bulk(dqkv->data, dqkv->dtype, part[2], r.wt, nx);
    return MP_OK;
}
