/* GEMM on the CPU: OpenBLAS sgemm/dgemm. Half operands are widened to FP32 into a per-thread
 * workspace that only grows (so steady-state steps allocate nothing), multiplied with FP32
 * accumulation like tensor cores, and the result rounded once to c's dtype. Two bf16 operands
 * on a CPU with bf16 dot products go to oneDNN as they are (gemm_dnnl.c: the same rule, another
 * order of the FP32 sums). */
#include <cblas.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/gemm_dnnl.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/elem_rule.h"

static const float *as_f32(const mp_tensor *t, float *scratch)
{
    if (t->dtype == MP_F32)
        return t->data;
    mp_cpu_convert_bulk(scratch, MP_F32, t->data, t->dtype, (size_t)mp_tensor_numel(t));
    return scratch;
}

/* op(a) (m, k) times op(b) (k, n) into c (m, n): the sizes, or MP_EINTERNAL when they do not
 * match or FP64 is mixed with other dtypes. */
static mp_status dims(bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                      const mp_tensor *c, int64_t *m, int64_t *n, int64_t *k)
{
    int64_t ar = a->shape[0], ac = mp_tensor_row(a), br = b->shape[0], bc = mp_tensor_row(b);
    *m = ta ? ac : ar, *k = ta ? ar : ac, *n = tb ? br : bc;
    MP_CPU_REQUIRE(*k == (tb ? bc : br) && c->shape[0] == *m && mp_tensor_row(c) == *n, "gemm");
    bool f64 = a->dtype == MP_F64;
    MP_CPU_REQUIRE(f64 == (b->dtype == MP_F64) && f64 == (c->dtype == MP_F64), "gemm");
    return MP_OK;
}

/* The FP32 product op(a) op(b) (m, n) of half or FP32 operands, with beta times c's values
 * when beta != 0: c's own data when c is FP32, else the workspace (the caller rounds it). */
static mp_status product_f32(bool ta, bool tb, double alpha, const mp_tensor *a,
                             const mp_tensor *b, double beta, mp_tensor *c, float **out)
{
    int64_t m, n, k, ac = mp_tensor_row(a), bc = mp_tensor_row(b);
    MP_TRY(dims(ta, tb, a, b, c, &m, &n, &k));
    size_t nc = c->dtype == MP_F32 ? 0 : (size_t)(m * n);
    if (m == 0 || n == 0) {
        *out = c->dtype == MP_F32 ? c->data : mp_cpu_workspace(MP_CPU_WS_GEMM, sizeof(float));
        return MP_OK;
    }
    /* the workspace: c's FP32 product (half c), then the widened operands (OpenBLAS only) */
    if (alpha == 1.0 && beta == 0.0 && a->dtype == b->dtype && mp_cpu_dnnl_gemm_takes(a->dtype)) {
        float *fc = c->dtype == MP_F32 ? c->data
                                       : mp_cpu_workspace(MP_CPU_WS_GEMM, (nc + 1) * sizeof(float));
        *out = fc;
        if (mp_cpu_dnnl_gemm(ta, tb, m, n, k, a->dtype, a->data, b->data, MP_F32, fc))
            return MP_OK;
    }
    size_t na = a->dtype == MP_F32 ? 0 : (size_t)mp_tensor_numel(a);
    size_t nb = b->dtype == MP_F32 ? 0 : (size_t)mp_tensor_numel(b);
    float *ws = mp_cpu_workspace(MP_CPU_WS_GEMM, (nc + na + nb + 1) * sizeof(float));
    float *fc = c->dtype == MP_F32 ? c->data : ws;
    *out = fc;
    ws += nc;
    const float *fa = as_f32(a, ws), *fb = as_f32(b, ws + na);
    if (c->dtype != MP_F32 && beta != 0.0)
        mp_cpu_convert_bulk(fc, MP_F32, c->data, c->dtype, (size_t)(m * n));
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, (float)alpha, fa, (int)ac, fb, (int)bc, (float)beta, fc,
                (int)n);
    return MP_OK;
}

/* *done: whether oneDNN wrote op(a) op(b) into a bf16 c itself (alpha 1, beta 0, operands of a
 * dtype it takes), rounded once from its FP32 sums: product_f32's result rounded, without the
 * FP32 copy of c written and read back. */
static mp_status direct_bf16(bool ta, bool tb, double alpha, const mp_tensor *a,
                             const mp_tensor *b, double beta, mp_tensor *c, bool *done)
{
    *done = false;
    if (c->dtype != MP_BF16 || alpha != 1.0 || beta != 0.0 || a->dtype != b->dtype ||
        !mp_cpu_dnnl_gemm_takes(a->dtype))
        return MP_OK;
    int64_t m, n, k;
    MP_TRY(dims(ta, tb, a, b, c, &m, &n, &k));
    *done = m > 0 && n > 0 &&
            mp_cpu_dnnl_gemm(ta, tb, m, n, k, a->dtype, a->data, b->data, MP_BF16, c->data);
    return MP_OK;
}

mp_status mp_cpu_gemm(bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                      double beta, mp_tensor *c)
{
    if (a->dtype == MP_F64) {
        int64_t m, n, k;
        MP_TRY(dims(ta, tb, a, b, c, &m, &n, &k));
        if (m > 0 && n > 0)
            cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a->data,
                        (int)mp_tensor_row(a), b->data, (int)mp_tensor_row(b), beta, c->data,
                        (int)n);
        return MP_OK;
    }
    bool done;
    MP_TRY(direct_bf16(ta, tb, alpha, a, b, beta, c, &done));
    if (done)
        return MP_OK;
    float *fc = NULL;
    MP_TRY(product_f32(ta, tb, alpha, a, b, beta, c, &fc));
    if (c->dtype != MP_F32)
        mp_cpu_convert_bulk(c->data, c->dtype, fc, MP_F32, (size_t)mp_tensor_numel(c));
    return MP_OK;
}

/* The reference rounds twice: the product into c's dtype, then the sum with the bias. Half c does
 * both row by row while the FP32 row is in cache (one pass over c instead of two); a bf16 c that
 * oneDNN rounded itself (direct_bf16) only takes bias_add's pass. */
mp_status mp_cpu_gemm_bias(bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                           const mp_tensor *bias, mp_tensor *c)
{
    if (c->dtype == MP_F32 || c->dtype == MP_F64) {
        MP_TRY(mp_cpu_gemm(ta, tb, 1.0, a, b, 0.0, c));
        return mp_cpu_bias_add(c, bias);
    }
    int64_t m = c->shape[0], n = mp_tensor_row(c);
    MP_CPU_REQUIRE(mp_tensor_numel(bias) == n && bias->dtype != MP_F64, "gemm_bias");
    bool done;
    MP_TRY(direct_bf16(ta, tb, 1.0, a, b, 0.0, c, &done));
    if (done)
        return mp_cpu_bias_add(c, bias);
    float *fc = NULL;
    MP_TRY(product_f32(ta, tb, 1.0, a, b, 0.0, c, &fc));
    float *fb = (float *)mp_cpu_workspace(MP_CPU_WS_GEMM_BIAS, (size_t)(n + 1) * sizeof(float));
    mp_convert(fb, MP_F32, bias->data, bias->dtype, (size_t)n);
    size_t esz = mp_dtype_size(c->dtype);
    MP_CPU_PARALLEL_FOR(m * n)
    for (int64_t r = 0; r < m; r++) {
        float *row = fc + r * n;
        void *out = (char *)c->data + (size_t)(r * n) * esz;
        mp_convert(out, c->dtype, row, MP_F32, (size_t)n); /* the product, rounded */
        mp_convert(row, MP_F32, out, c->dtype, (size_t)n); /* exactly its value */
        for (int64_t j = 0; j < n; j++)
            row[j] = mp_add_f32(row[j], fb[j]);
        mp_convert(out, c->dtype, row, MP_F32, (size_t)n);
    }
    return MP_OK;
}

/* A half dy is widened once (exactly) into its own slot for the GEMMs that would each widen it
 * (those whose other operand is not of dy's dtype, or all where gemm_dnnl.c does not take
 * dy's dtype) and the results computed from the FP32 copy: the same values in, so the same bits
 * out as from the half dy; the GEMMs that take both halves as they are get dy itself. */
mp_status mp_cpu_linear_backward(const mp_tensor *x, const mp_tensor *w, const mp_tensor *dy,
                                 mp_tensor *dw, mp_tensor *db, mp_tensor *dx)
{
    mp_tensor fdy = *dy;
    bool half = dy->dtype == MP_F16 || dy->dtype == MP_BF16;
    bool takes = mp_cpu_dnnl_gemm_takes(dy->dtype);
    bool dw_half = takes && x->dtype == dy->dtype, dx_half = takes && w->dtype == dy->dtype;
    if (half && (!dw_half || (dx && !dx_half))) {
        size_t n = (size_t)mp_tensor_numel(dy);
        fdy.dtype = MP_F32;
        fdy.data = mp_cpu_workspace(MP_CPU_WS_GEMM_DY, (n + 1) * sizeof(float));
        mp_cpu_convert_bulk(fdy.data, MP_F32, dy->data, dy->dtype, n);
    }
    MP_TRY(mp_cpu_gemm(true, false, 1.0, dw_half ? dy : &fdy, x, 0.0, dw));
    if (db)
        MP_TRY(mp_cpu_bias_grad(&fdy, db));
    return dx ? mp_cpu_gemm(false, false, 1.0, dx_half ? dy : &fdy, w, 0.0, dx) : MP_OK;
}
