/* GEMM through cuBLASLt: fp16/bf16 inputs with FP32 accumulation on tensor cores, FP32 with
 * FP32 compute or, when amp.allow_tf32, TF32 tensor cores. Row-major C (m, n) = op(A) op(B) is
 * computed as the column-major C^T = op(B)^T op(A)^T, which reads our row-major buffers as they
 * are. The layouts, the operation descriptor and the heuristic's algorithm are made once per
 * shape and kept (a small table); a shape cuBLASLt has no algorithm for is kept too, as a plan
 * without descriptors, so the heuristic runs once per shape either way. The workspace is the
 * context's 32 MiB. gemm_bias adds the bias in cuBLASLt's epilogue (a vector along lt's rows, our
 * columns) when the dtypes allow and cuBLASLt has an algorithm for it, else adds it after. */
#include <string.h>

#include "engine/backend_cuda/cuda.h"

typedef struct mp_gemm_key {
    int64_t m, n, k;
    int ta, tb, tf32;
    mp_dtype ab, c;
    int bias; /* the bias epilogue, with a bias of dtype c */
    uint32_t align[3]; /* byte alignment of lt's A (our b), B (our a) and C: parameter views sit
                          at any element offset of the flat buffers */
} mp_gemm_key;

typedef struct mp_gemm_plan {
    mp_gemm_key key;
    cublasLtMatmulDesc_t op; /* the descriptors: NULL when not made (or destroyed) */
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    bool used;  /* key is valid: found by plan_get */
    bool found; /* cuBLASLt has an algorithm for key (algo and the descriptors are valid) */
} mp_gemm_plan;

enum { MP_GEMM_PLANS = 128 };
static mp_gemm_plan mp_plans[MP_GEMM_PLANS];

/* The largest power of two (up to 256) that divides the address. */
static uint32_t alignment(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a)
        a /= 2;
    return a;
}

static cudaDataType_t cuda_type(mp_dtype dt)
{
    return dt == MP_F16 ? CUDA_R_16F : dt == MP_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Destroys what exists of p's descriptors and marks the slot free. */
static void plan_free(mp_gemm_plan *p)
{
    if (p->op)
        cublasLtMatmulDescDestroy(p->op);
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc)
        cublasLtMatrixLayoutDestroy(p->lc);
    p->op = NULL;
    p->la = p->lb = p->lc = NULL;
    p->used = p->found = false;
}

/* Makes p's descriptors for key and asks the heuristic for an algorithm: lt's matrix "A" is our
 * B and "B" is our A (see the file comment); the algorithm honours the operands' alignment and
 * keeps partial sums in FP32. *found is false when cuBLASLt has none (the heuristic answers
 * CUBLAS_STATUS_NOT_SUPPORTED, or no result, or a result whose state is not success). */
static mp_status plan_build(const mp_gemm_key *key, mp_gemm_plan *p, bool *found)
{
    *found = false;
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    cublasComputeType_t ct = key->ab == MP_F32 && key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                             : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    cublasOperation_t opa = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                                sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                                sizeof opb));
    cudaDataType_t ab = cuda_type(key->ab), ctype = cuda_type(key->c);
    if (key->bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                    sizeof epi));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                    &ctype, sizeof ctype));
    }
    /* Stored column-major shapes: our row-major B is (n, k) (k, n transposed) etc. */
    int64_t n = key->n, m = key->m, k = key->k;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, ab, key->tb ? (uint64_t)k : (uint64_t)n,
                                            key->tb ? (uint64_t)n : (uint64_t)k,
                                            key->tb ? k : n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, ab, key->ta ? (uint64_t)m : (uint64_t)k,
                                            key->ta ? (uint64_t)k : (uint64_t)m,
                                            key->ta ? m : k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lc, ctype, (uint64_t)n, (uint64_t)m, n));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = MP_CUDA_GEMM_WS;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    /* Split-K partial sums stay in FP32: a half C may not hold them (in place, or reduced in
     * the output type), which would round each output more than once. */
    uint32_t schemes = key->c == MP_F32 ? (uint32_t)CUBLASLT_REDUCTION_SCHEME_MASK
                                        : (uint32_t)CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &schemes, sizeof schemes);
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &key->align[i < 3 ? i : 2],
                                                  sizeof key->align[0]);
    cublasLtMatmulHeuristicResult_t res;
    int count = 0;
    cublasStatus_t hst = CUBLAS_STATUS_SUCCESS; /* the heuristic's own answer */
    if (st == CUBLAS_STATUS_SUCCESS)
        hst = cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1,
                                             &res, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st); /* a preference the library refused is a failure, not "no algorithm" */
    if (hst == CUBLAS_STATUS_NOT_SUPPORTED)
        return MP_OK;
    CUBLAS_CHECK(hst);
    *found = count >= 1 && res.state == CUBLAS_STATUS_SUCCESS;
    if (*found)
        p->algo = res.algo;
    return MP_OK;
}

/* Makes the plan for key in the free slot p: with its algorithm, or, when cuBLASLt has none, as
 * a plan that says so (found false, no descriptors), so that the heuristic is not asked again.
 * On a failure p is left free, with nothing allocated. */
static mp_status plan_make(const mp_gemm_key *key, mp_gemm_plan *p)
{
    bool found = false;
    mp_status st = plan_build(key, p, &found);
    if (st != MP_OK || !found)
        plan_free(p);
    if (st != MP_OK)
        return st;
    p->key = *key;
    p->used = true;
    p->found = found;
    return MP_OK;
}

/* The plan for key: found, or made in a free slot (the oldest is replaced when all are used). */
static mp_status plan_get(const mp_gemm_key *key, mp_gemm_plan **out)
{
    static int next;
    for (int i = 0; i < MP_GEMM_PLANS; i++)
        if (mp_plans[i].used && memcmp(&mp_plans[i].key, key, sizeof *key) == 0) {
            *out = &mp_plans[i];
            return MP_OK;
        }
    mp_gemm_plan *p = &mp_plans[next];
    next = (next + 1) % MP_GEMM_PLANS;
    plan_free(p);
    MP_TRY(plan_make(key, p));
    *out = p;
    return MP_OK;
}

static mp_status matmul(bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                        double beta, mp_tensor *c, const mp_tensor *bias, int64_t m, int64_t n,
                        int64_t k, bool *done);

/* c's rows m and columns n, and the inner dimension k of op(a) op(b); MP_EINTERNAL when the
 * shapes do not match. */
static mp_status dims(const char *op, bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                      const mp_tensor *c, int64_t *m, int64_t *n, int64_t *k)
{
    *m = c->shape[0], *n = mp_tensor_row(c);
    int64_t ar = a->shape[0], ac = mp_tensor_row(a), br = b->shape[0], bc = mp_tensor_row(b);
    *k = ta ? ar : ac;
    MP_CUDA_REQUIRE((ta ? ac : ar) == *m && (tb ? br : bc) == *n && (tb ? bc : br) == *k, op);
    return MP_OK;
}

extern "C" mp_status mp_cuda_gemm(bool ta, bool tb, double alpha, const mp_tensor *a,
                                  const mp_tensor *b, double beta, mp_tensor *c)
{
    MP_CUDA_DTYPES("gemm", a, b, c);
    int64_t m, n, k;
    MP_TRY(dims("gemm", ta, tb, a, b, c, &m, &n, &k));
    if (m == 0 || n == 0)
        return MP_OK;
    if (k == 0) /* c = beta c; beta 0 writes zeros, as BLAS does, whatever c held */
        return beta == 0.0 ? mp_cuda_fill(c, 0.0) : mp_cuda_scale(c, beta);
    /* cuBLASLt wants A and B of one type and C of that type or FP32: other mixes go through
     * scratch (FP32 operands; an FP32 result rounded once into c). */
    mp_dtype ab = a->dtype == b->dtype ? a->dtype : MP_F32;
    mp_dtype cd = c->dtype == ab || c->dtype == MP_F32 ? c->dtype : MP_F32;
    mp_tensor aw, bw, cw;
    MP_TRY(mp_cuda_operand(a, ab, 0, true, &aw));
    MP_TRY(mp_cuda_operand(b, ab, 1, true, &bw));
    MP_TRY(mp_cuda_operand(c, cd, 2, beta != 0.0, &cw));
    bool done = false;
    MP_TRY(matmul(ta, tb, alpha, &aw, &bw, beta, &cw, NULL, m, n, k, &done));
    if (!done)
        return mp_fail(MP_EINTERNAL, "cuda gemm: cuBLASLt has no algorithm for %lldx%lldx%lld %s",
                       (long long)m, (long long)n, (long long)k, mp_dtype_name(ab));
    return cw.data == c->data ? MP_OK : mp_cuda_convert(&cw, c);
}

extern "C" mp_status mp_cuda_gemm_bias(bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                                       const mp_tensor *bias, mp_tensor *c)
{
    MP_CUDA_DTYPES("gemm_bias", a, b, bias, c);
    int64_t m, n, k;
    MP_TRY(dims("gemm_bias", ta, tb, a, b, c, &m, &n, &k));
    MP_CUDA_REQUIRE(mp_tensor_numel(bias) == n, "gemm_bias");
    bool fused = m > 0 && n > 0 && k > 0 && a->dtype == b->dtype &&
                 (c->dtype == a->dtype || c->dtype == MP_F32) && bias->dtype == c->dtype &&
                 (uintptr_t)a->data % 16 == 0 && (uintptr_t)b->data % 16 == 0 &&
                 (uintptr_t)c->data % 16 == 0 && (uintptr_t)bias->data % 16 == 0;
    if (fused) { /* else, or when cuBLASLt has no fused algorithm: the product, then the bias */
        bool done = false;
        if (matmul(ta, tb, 1.0, a, b, 0.0, c, bias, m, n, k, &done) != MP_OK)
            mp_error_clear();
        else if (done)
            return MP_OK;
    }
    MP_TRY(mp_cuda_gemm(ta, tb, 1.0, a, b, 0.0, c));
    return mp_cuda_bias_add(c, bias);
}

/* cuBLAS reads dy from device memory for each product: the three ops in turn. */
extern "C" mp_status mp_cuda_linear_backward(const mp_tensor *x, const mp_tensor *w,
                                             const mp_tensor *dy, mp_tensor *dw, mp_tensor *db,
                                             mp_tensor *dx)
{
    MP_TRY(mp_cuda_gemm(true, false, 1.0, dy, x, 0.0, dw));
    if (db)
        MP_TRY(mp_cuda_bias_grad(dy, db));
    return dx ? mp_cuda_gemm(false, false, 1.0, dy, w, 0.0, dx) : MP_OK;
}

/* c = alpha op(a) op(b) + beta c (+ bias along c's rows when bias is not NULL, in the
 * epilogue) with a, b of one dtype and c (and bias) of it or FP32. *done is false (and c
 * untouched) when cuBLASLt has no algorithm for this shape, which the plan remembers. */
static mp_status matmul(bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                        double beta, mp_tensor *c, const mp_tensor *bias, int64_t m, int64_t n,
                        int64_t k, bool *done)
{
    *done = false;
    mp_gemm_key key;
    memset(&key, 0, sizeof key); /* padding compared by memcmp */
    key.m = m, key.n = n, key.k = k, key.ta = ta, key.tb = tb;
    key.tf32 = mp_cuda_ctx_get()->allow_tf32;
    key.ab = a->dtype, key.c = c->dtype;
    key.bias = bias != NULL;
    key.align[0] = alignment(b->data), key.align[1] = alignment(a->data);
    key.align[2] = alignment(c->data);
    mp_gemm_plan *p;
    MP_TRY(plan_get(&key, &p));
    if (!p->found)
        return MP_OK;
    mp_cuda_ctx *x = mp_cuda_ctx_get();
    if (bias) /* the plan is shared by every call of this shape: point it at this bias */
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias->data, sizeof bias->data));
    float fa = (float)alpha, fb = (float)beta;
    CUBLAS_CHECK(cublasLtMatmul(x->lt, p->op, &fa, b->data, p->la, a->data, p->lb, &fb, c->data,
                                p->lc, c->data, p->lc, &p->algo, x->gemm_ws, MP_CUDA_GEMM_WS,
                                x->stream));
    *done = true;
    return MP_OK;
}
