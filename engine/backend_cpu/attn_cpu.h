/* What the CPU's two attention paths share (attention.c: the (T, T) matrices; attention_flash.c:
 * tiles): their working memory, OpenBLAS products in the working type (FP32 or FP64) and a row's
 * maximum. */
#ifndef MP_BACKEND_CPU_ATTN_CPU_H
#define MP_BACKEND_CPU_ATTN_CPU_H

#include <cblas.h>
#include <math.h>

#include "engine/attn_geom.h"
#include "engine/backend_cpu/cpu.h"
#include "engine/dropout_mask.h"

/* A call's mask and scales: causal or not, dropout's key, threshold and counter offset (the
 * step's part read as the op runs: mp_mask_offset). */
typedef struct mp_attn_mask {
    bool causal, drop;
    uint64_t key, thr, offset;
    double scale, keep_scale; /* 1 / sqrt(dh), 1 / (1 - p) */
} mp_attn_mask;

static inline mp_attn_mask mp_attn_mask_of(const mp_attn_desc *d, int64_t dh)
{
    return (mp_attn_mask){.causal = d->causal,
                          .drop = d->dropout_p > 0,
                          .key = mp_dropout_key(d->seed),
                          .thr = mp_dropout_threshold(d->dropout_p),
                          .offset = mp_mask_offset(d->offset, d->step),
                          .scale = 1.0 / sqrt((double)dh),
                          .keep_scale = 1.0 / (1.0 - d->dropout_p)};
}

static inline size_t mp_attn_round64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Working memory of an attention op: parts of the given byte sizes, each 64-byte aligned, from
 * this thread's MP_CPU_WS_ATTN block (valid until the next attention call). */
static inline void mp_attn_workspace(int n, const size_t *bytes, void **part)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += mp_attn_round64(bytes[i]);
    char *p = mp_cpu_workspace(MP_CPU_WS_ATTN, total);
    for (int i = 0; i < n; i++) {
        part[i] = p;
        p += mp_attn_round64(bytes[i]);
    }
}

static inline void mp_attn_gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                    double alpha, const float *a, int64_t lda, const float *b,
                                    int64_t ldb, double beta, float *c, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb, (float)beta, c,
                (int)ldc);
}

static inline void mp_attn_gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                    double alpha, const double *a, int64_t lda, const double *b,
                                    int64_t ldb, double beta, double *c, int64_t ldc)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* Row-major c (m, n) = alpha op(a) op(b) (GEMM) or c += alpha op(a) op(b) (GEMM_ADD), in the
 * working type of c. */
#define MP_ATTN_GEMM_(c) _Generic((c), float *: mp_attn_gemm_f32, double *: mp_attn_gemm_f64)
#define GEMM(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc)                                 \
    MP_ATTN_GEMM_(c)(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0, c, ldc)
#define GEMM_ADD(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc)                             \
    MP_ATTN_GEMM_(c)(ta, tb, m, n, k, alpha, a, lda, b, ldb, 1.0, c, ldc)

/* The maximum of v[0 .. n) (n >= 1), and whether any element is inf or NaN. FP32 compares
 * unsigned keys that order like the floats, in a loop the compiler vectorises (it leaves float
 * comparisons scalar). */
static inline float mp_attn_rowmax_f32(const float *restrict v, int64_t n, bool *bad)
{
    uint32_t top = 0, nonfinite = 0;
    for (int64_t j = 0; j < n; j++) {
        uint32_t b = mp_f32_bits(v[j]);
        uint32_t key = b ^ ((0u - (b >> 31)) | 0x80000000u); /* negative: ~b; else b | sign */
        top = key > top ? key : top;
        nonfinite |= (b & 0x7f800000u) == 0x7f800000u;
    }
    *bad = nonfinite != 0;
    return mp_bits_f32(top ^ (top >> 31 ? 0x80000000u : 0xffffffffu));
}

static inline double mp_attn_rowmax_f64(const double *restrict v, int64_t n, bool *bad)
{
    double m = v[0];
    *bad = false;
    for (int64_t j = 0; j < n; j++) {
        m = v[j] > m ? v[j] : m;
        *bad |= !isfinite(v[j]);
    }
    return m;
}

/* The sum of v[0 .. n) in 8 lanes combined in a fixed order (a loop the compiler vectorises). */
#define MP_ATTN_SUM8(ACC, v, n, out)                                                         \
    do {                                                                                     \
        ACC s8_[8] = {0};                                                                    \
        int64_t j8_ = 0;                                                                     \
        for (; j8_ + 8 <= (n); j8_ += 8)                                                     \
            for (int k8_ = 0; k8_ < 8; k8_++)                                                \
                s8_[k8_] += (v)[j8_ + k8_];                                                  \
        for (; j8_ < (n); j8_++)                                                             \
            s8_[0] += (v)[j8_];                                                              \
        (out) = ((s8_[0] + s8_[1]) + (s8_[2] + s8_[3])) + ((s8_[4] + s8_[5]) + (s8_[6] + s8_[7])); \
    } while (0)

#endif
