/* GEMM on the CPU: OpenBLAS sgemm/dgemm. Half operands are widened to FP32 into a per-thread
 * workspace that only grows (so steady-state steps allocate nothing), multiplied with FP32
 * accumulation like tensor cores, and the result rounded once to c's dtype. */
#include <cblas.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/backend_cpu/cpu.h"


static const float *as_f32(const mp_tensor *t, float *scratch)
{
    if (t->dtype == MP_F32)
        return t->data;
    mp_cpu_convert_bulk(scratch, MP_F32, t->data, t->dtype, (size_t)mp_tensor_numel(t));
    return scratch;
}

mp_status mp_cpu_gemm(bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                      double beta, mp_tensor *c)
{
    int64_t ar = a->shape[0], ac = mp_tensor_row(a);
    int64_t br = b->shape[0], bc = mp_tensor_row(b);
    int64_t m = ta ? ac : ar, k = ta ? ar : ac;
    int64_t n = tb ? br : bc, kb = tb ? bc : br;
    MP_CPU_REQUIRE(k == kb && c->shape[0] == m && mp_tensor_row(c) == n, "gemm");
    if (m == 0 || n == 0)
        return MP_OK;
    CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
    bool f64 = a->dtype == MP_F64;
    MP_CPU_REQUIRE(f64 == (b->dtype == MP_F64) && f64 == (c->dtype == MP_F64), "gemm");
    if (f64) {
        cblas_dgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, alpha, a->data, (int)ac,
                    b->data, (int)bc, beta, c->data, (int)n);
        return MP_OK;
    }
    size_t na = a->dtype == MP_F32 ? 0 : (size_t)(ar * ac);
    size_t nb = b->dtype == MP_F32 ? 0 : (size_t)(br * bc);
    size_t nc = c->dtype == MP_F32 ? 0 : (size_t)(m * n);
    float *ws = mp_cpu_workspace(MP_CPU_WS_GEMM, (na + nb + nc + 1) * sizeof(float));
    const float *fa = as_f32(a, ws), *fb = as_f32(b, ws + na);
    float *fc = c->dtype == MP_F32 ? c->data : ws + na + nb;
    if (c->dtype != MP_F32 && beta != 0.0)
        mp_cpu_convert_bulk(fc, MP_F32, c->data, c->dtype, (size_t)(m * n));
    cblas_sgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, (float)alpha, fa, (int)ac, fb,
                (int)bc, (float)beta, fc, (int)n);
    if (c->dtype != MP_F32)
        mp_cpu_convert_bulk(c->data, c->dtype, fc, MP_F32, (size_t)(m * n));
    return MP_OK;
}

/* The reference rounds twice: the product into c's dtype, then the sum with the bias. */
mp_status mp_cpu_gemm_bias(bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                           const mp_tensor *bias, mp_tensor *c)
{
    MP_TRY(mp_cpu_gemm(ta, tb, 1.0, a, b, 0.0, c));
    return mp_cpu_bias_add(c, bias);
}
