/* Multi-head self-attention on the GPU (engine/op_list.h's attention_forward and
 * attention_backward; geometry and element rules in engine/attn_geom.h, shared with the CPU).
 * Per head, cuBLAS strided-batched GEMMs over the N sequences (FP32 compute, half or FP32
 * operands in the work dtype w = qkv's, reading q, k and v in place with leading dimension 3D;
 * math mode CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, so that a half output is rounded
 * once from FP32 even when cuBLAS splits K) form S = Q K^T / sqrt(dh), out = P' V and the
 * backward's products; row-major C = op(A) op(B) is cuBLAS's column-major
 * C^T = op(B)^T op(A)^T on the same buffers. A warp per row runs the masked softmax in FP32 with
 * mp_exp_f32 (the CPU's exponential, bit for bit), the dropout mask of
 * engine/dropout_mask.h at mp_attn_counter, and backward's rowsum; sums go lane by lane in j
 * order and then through a fixed butterfly, so results are deterministic (cuBLAS's are for a
 * given GPU and library version, with atomics off, its default). Masked entries are exact zeros
 * and the GEMMs run over the full (T, T) matrices.
 * Where the GPU rounds differently from the CPU (which keeps all of these in FP32):
 *  - the GEMMs take operands of one dtype, so the P' that multiplies V (and, backward, the P'
 *    of dV) is rounded to w when it is not probs itself: with dropout (P / (1 - p)), or when
 *    probs' dtype is not w (O1's FP32 probabilities with half qkv, as autocast does);
 *  - backward's dS is rounded to w before dQ = dS K and dK = dS^T Q (tensor cores);
 *  - dout of a dtype other than w is rounded to w first;
 *  - the softmax sums and the rowsum add in another order (the CPU's 8 lanes).
 * S is written by cuBLAS straight into probs when probs' dtype is w or FP32 (rounded once from
 * FP32, as the CPU rounds it), else into an FP32 scratch that the softmax rounds; out and dqkv
 * likewise, through FP32 scratch rounded once when their dtype is neither. Scratch is one device
 * block of this file, grown on demand and never shrunk (MP_MEM_WORKSPACE). */
#include <math.h>

#include "engine/backend_cuda/cuda.h" /* first: it includes the C headers as extern "C" */

#include "engine/attn_geom.h"
#include "engine/dropout_mask.h"

enum { MP_ATTN_WARPS = 8 }; /* rows (warps) per block of 256 threads */

/* What the row kernels need of the call: geometry, head, mask and dropout. */
typedef struct attn_rows {
    int64_t N, T, heads, h;
    bool causal, drop;
    uint64_t key, thr, offset;
    const int64_t *step; /* device memory: each kernel starts with offset = mp_mask_offset(offset,
                            step), read once */
    float keep_scale;    /* 1 / (1 - p) */
} attn_rows;

/* v rounded to dt and widened back (FP32: v itself). */
__device__ static float rounded(float v, mp_dtype dt)
{
    if (dt != MP_F16 && dt != MP_BF16)
        return v;
    uint16_t h;
    mp_elem_store_f32(&h, dt, 0, v);
    return mp_elem_load_f32(&h, dt, 0);
}

/* The dropout multiplier of probability (n, h, i, j): 1 without dropout, else keep / (1 - p). */
__device__ static float drop_mult(const attn_rows &g, int64_t n, int64_t i, int64_t j)
{
    if (!g.drop)
        return 1.0f;
    uint64_t c = mp_attn_counter(g.offset, g.heads, g.T, n, g.h, i, j);
    return mp_dropout_keep(g.key, c, g.thr) ? g.keep_scale : 0.0f;
}

__device__ static float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) /* lane l and l ^ o add the same two values */
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The softmax of head g.h, a warp per row n T + i: S (s, dtype sdt, sequence stride s_n, row
 * stride T; may be probs itself) rounded to probs' dtype pdt, P stored in probs (p, stride p_n),
 * and, when pw is not NULL, P' = P keep / (1 - p) rounded to w in pw (stride w_n). Masked
 * entries are 0; a row with an inf or NaN is NaN. */
__global__ static void k_softmax(attn_rows g, const void *s, mp_dtype sdt, int64_t s_n, void *p,
                                 mp_dtype pdt, int64_t p_n, void *pw, mp_dtype w, int64_t w_n)
{
    g.offset = mp_mask_offset(g.offset, g.step);
    int64_t row = (int64_t)blockIdx.x * MP_ATTN_WARPS + threadIdx.x / 32;
    int lane = (int)(threadIdx.x % 32);
    if (row >= g.N * g.T) /* the whole warp leaves together */
        return;
    int64_t n = row / g.T, i = row % g.T, lim = mp_attn_span(g.causal, g.T, i);
    int64_t so = n * s_n + i * g.T, po = n * p_n + i * g.T, wo = n * w_n + i * g.T;
    float m = -INFINITY;
    bool bad = false;
    for (int64_t j = lane; j < lim; j += 32) {
        float v = rounded(mp_elem_load_f32(s, sdt, so + j), pdt);
        bad |= !isfinite(v);
        m = fmaxf(m, v);
    }
    m = warp_max(m);
    bad = __any_sync(0xffffffffu, bad);
    float sum = 0.0f;
    for (int64_t j = lane; j < lim; j += 32)
        sum += mp_exp_f32(rounded(mp_elem_load_f32(s, sdt, so + j), pdt) - m);
    sum = warp_sum(sum);
    float inv = bad ? NAN : 1.0f / sum;
    for (int64_t j = lane; j < g.T; j += 32) {
        float pv = 0.0f;
        if (j < lim) /* read before the write: s may be p */
            pv = rounded(mp_exp_f32(rounded(mp_elem_load_f32(s, sdt, so + j), pdt) - m) *
                             inv,
                         pdt);
        mp_elem_store_f32(p, pdt, po + j, pv);
        if (pw)
            mp_elem_store_f32(pw, w, wo + j, j < lim ? pv * drop_mult(g, n, i, j) : 0.0f);
    }
}

/* Backward's rows of head g.h, a warp per row: from P (probs, stride p_n) and dP' (FP32 dp,
 * stride dp_n), dP = dP' keep / (1 - p), rs = sum_j dP P, dS = P (dP - rs) rounded to w in ds
 * and, when pw is not NULL, P' in pw (both stride w_n); masked entries 0. */
__global__ static void k_softmax_bwd(attn_rows g, const void *p, mp_dtype pdt, int64_t p_n,
                                     const float *dp, int64_t dp_n, void *ds, void *pw, mp_dtype w,
                                     int64_t w_n)
{
    g.offset = mp_mask_offset(g.offset, g.step);
    int64_t row = (int64_t)blockIdx.x * MP_ATTN_WARPS + threadIdx.x / 32;
    int lane = (int)(threadIdx.x % 32);
    if (row >= g.N * g.T)
        return;
    int64_t n = row / g.T, i = row % g.T, lim = mp_attn_span(g.causal, g.T, i);
    int64_t po = n * p_n + i * g.T, dpo = n * dp_n + i * g.T, wo = n * w_n + i * g.T;
    float acc = 0.0f;
    for (int64_t j = lane; j < lim; j += 32) {
        float d = dp[dpo + j] * drop_mult(g, n, i, j);
        acc += d * mp_elem_load_f32(p, pdt, po + j);
    }
    float rs = warp_sum(acc);
    for (int64_t j = lane; j < g.T; j += 32) {
        float dsv = 0.0f, pv = 0.0f;
        if (j < lim) {
            float mult = drop_mult(g, n, i, j), pj = mp_elem_load_f32(p, pdt, po + j);
            dsv = pj * (dp[dpo + j] * mult - rs);
            pv = pj * mult;
        }
        mp_elem_store_f32(ds, w, wo + j, dsv);
        if (pw)
            mp_elem_store_f32(pw, w, wo + j, pv);
    }
}

static cudaDataType_t cuda_type(mp_dtype dt)
{
    return dt == MP_F16 ? CUDA_R_16F : dt == MP_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Row-major C_b (m, n) = alpha op(A_b) op(B_b) for b < batch, X_b = x + b sx elements of the
 * matrix x with leading dimension ldx; a and b of dtype abt, c of abt or FP32 (cuBLAS's
 * combinations for FP32 compute; TF32 for FP32 operands when amp.allow_tf32). */
static mp_status gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                         const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb,
                         int64_t sb, mp_dtype abt, void *c, mp_dtype ct, int64_t ldc, int64_t sc,
                         int64_t batch)
{
    mp_cuda_ctx *x = mp_cuda_ctx_get();
    float fa = (float)alpha, fb = 0.0f;
    cublasComputeType_t comp = abt == MP_F32 && x->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                               : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        x->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
        (int)k, &fa, b, cuda_type(abt), (int)ldb, sb, a, cuda_type(abt), (int)lda, sa, &fb, c,
        cuda_type(ct), (int)ldc, sc, (int)batch, comp, CUBLAS_GEMM_DEFAULT));
    return MP_OK;
}

static void *mp_attn_buf;
static size_t mp_attn_buf_bytes;

static size_t round256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* Device scratch: parts of the given byte sizes (0: NULL), 256-byte aligned, from one block. */
static mp_status scratch(int n, const size_t *bytes, char **part)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += round256(bytes[i]);
    MP_TRY(mp_cuda_grow(&mp_attn_buf, &mp_attn_buf_bytes, total));
    char *p = (char *)mp_attn_buf;
    for (int i = 0; i < n; i++) {
        part[i] = bytes[i] ? p : NULL;
        p += round256(bytes[i]);
    }
    return MP_OK;
}

/* The row kernels' parameters for d and g. */
static attn_rows rows_of(const mp_attn_desc *d, const mp_attn_geom &g)
{
    attn_rows r;
    r.N = g.N, r.T = g.T, r.heads = g.heads, r.h = 0;
    r.causal = d->causal;
    r.drop = d->dropout_p > 0;
    r.key = mp_dropout_key(d->seed);
    r.thr = mp_dropout_threshold(d->dropout_p);
    r.offset = d->offset;
    r.step = d->step;
    r.keep_scale = (float)(1.0 / (1.0 - d->dropout_p));
    return r;
}

/* Element `off` of the buffer at base, of dtype dt. */
static char *at(void *base, mp_dtype dt, int64_t off)
{
    return (char *)base + (size_t)off * mp_dtype_size(dt);
}

/* A contiguous tensor view of buffer p with t's shape and dtype dt. */
static mp_tensor view_as(void *p, mp_dtype dt, const mp_tensor *t)
{
    return mp_tensor_view(p, dt, t->ndim, t->shape);
}

extern "C" mp_status mp_cuda_attention_forward(const mp_attn_desc *d, const mp_tensor *qkv,
                                               mp_tensor *probs, mp_tensor *out)
{
    MP_CUDA_DTYPES("attention_forward", qkv, probs, out);
    mp_attn_geom g;
    MP_CUDA_REQUIRE(mp_attn_geometry(d, qkv, probs, out, &g), "attention_forward");
    if (g.N == 0)
        return MP_OK;
    const mp_dtype w = qkv->dtype, pdt = probs->dtype;
    const int64_t T = g.T, D = g.D, dh = g.dh, tt = T * T, ld = 3 * D;
    bool s_direct = pdt == w || pdt == MP_F32, o_direct = out->dtype == w || out->dtype == MP_F32;
    bool own_p = d->dropout_p > 0 || pdt != w; /* P' in scratch, in w */
    size_t bytes[3] = {s_direct ? 0 : (size_t)(g.N * tt) * 4,
                       own_p ? (size_t)(g.N * tt) * mp_dtype_size(w) : 0,
                       o_direct ? 0 : (size_t)(g.N * T * D) * 4};
    char *part[3];
    MP_TRY(scratch(3, bytes, part));
    mp_cuda_ctx *x = mp_cuda_ctx_get();
    CUBLAS_CHECK(cublasSetMathMode(x->blas, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    attn_rows r = rows_of(d, g);
    const mp_dtype sdt = s_direct ? pdt : MP_F32, odt = o_direct ? out->dtype : MP_F32;
    void *obase = o_direct ? out->data : part[2];
    const unsigned blocks = (unsigned)((g.N * T + MP_ATTN_WARPS - 1) / MP_ATTN_WARPS);
    for (int64_t h = 0; h < g.heads; h++) {
        const char *q = at(qkv->data, w, h * dh), *k = at(qkv->data, w, D + h * dh);
        const char *v = at(qkv->data, w, 2 * D + h * dh);
        char *ph = at(probs->data, pdt, h * tt);
        void *s = s_direct ? (void *)ph : (void *)part[0];
        int64_t s_n = s_direct ? g.heads * tt : tt;
        MP_TRY(gemm_rm(false, true, T, T, dh, 1.0 / sqrt((double)dh), q, ld, T * ld, k, ld,
                       T * ld, w, s, sdt, T, s_n, g.N));
        r.h = h;
        MP_LAUNCH(k_softmax, blocks, 32 * MP_ATTN_WARPS, r, s, sdt, s_n, ph, pdt, g.heads * tt,
                  part[1], w, tt);
        const void *pp = own_p ? (const void *)part[1] : (const void *)ph;
        MP_TRY(gemm_rm(false, false, T, dh, T, 1.0, pp, T, own_p ? tt : g.heads * tt, v, ld,
                       T * ld, w, at(obase, odt, h * dh), odt, D, T * D, g.N));
    }
    if (o_direct)
        return MP_OK;
    mp_tensor o32 = view_as(part[2], MP_F32, out);
    return mp_cuda_convert(&o32, out);
}

extern "C" mp_status mp_cuda_attention_backward(const mp_attn_desc *d, const mp_tensor *qkv,
                                                const mp_tensor *probs, const mp_tensor *dout,
                                                mp_tensor *dqkv)
{
    MP_CUDA_DTYPES("attention_backward", qkv, probs, dout, dqkv);
    mp_attn_geom g;
    MP_CUDA_REQUIRE(mp_attn_geometry(d, qkv, probs, dout, &g), "attention_backward");
    MP_CUDA_REQUIRE(mp_attn_shaped(dqkv, qkv->shape[0], qkv->shape[1], qkv->shape[2],
                                   qkv->shape[3]),
                    "attention_backward");
    if (g.N == 0)
        return MP_OK;
    const mp_dtype w = qkv->dtype, pdt = probs->dtype;
    const int64_t T = g.T, D = g.D, dh = g.dh, tt = T * T, ld = 3 * D;
    const size_t ws = mp_dtype_size(w);
    bool own_p = d->dropout_p > 0 || pdt != w, own_do = dout->dtype != w;
    bool x_direct = dqkv->dtype == w || dqkv->dtype == MP_F32;
    size_t bytes[5] = {(size_t)(g.N * tt) * 4, (size_t)(g.N * tt) * ws,
                       own_p ? (size_t)(g.N * tt) * ws : 0,
                       own_do ? (size_t)(g.N * T * D) * ws : 0,
                       x_direct ? 0 : (size_t)(g.N * T * ld) * 4};
    char *part[5];
    MP_TRY(scratch(5, bytes, part));
    float *dp = (float *)part[0];
    char *ds = part[1];
    const void *dobase = dout->data;
    if (own_do) {
        mp_tensor dow = view_as(part[3], w, dout);
        MP_TRY(mp_cuda_convert(dout, &dow));
        dobase = part[3];
    }
    mp_cuda_ctx *x = mp_cuda_ctx_get();
    CUBLAS_CHECK(cublasSetMathMode(x->blas, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    attn_rows r = rows_of(d, g);
    const double scale = 1.0 / sqrt((double)dh);
    const mp_dtype xdt = x_direct ? dqkv->dtype : MP_F32;
    void *xbase = x_direct ? dqkv->data : part[4];
    const unsigned blocks = (unsigned)((g.N * T + MP_ATTN_WARPS - 1) / MP_ATTN_WARPS);
    for (int64_t h = 0; h < g.heads; h++) {
        const char *q = at(qkv->data, w, h * dh), *k = at(qkv->data, w, D + h * dh);
        const char *v = at(qkv->data, w, 2 * D + h * dh);
        const char *dob = at((void *)dobase, w, h * dh);
        const char *ph = at(probs->data, pdt, h * tt);
        MP_TRY(gemm_rm(false, true, T, T, dh, 1.0, dob, D, T * D, v, ld, T * ld, w, dp, MP_F32,
                       T, tt, g.N)); /* dP' = dO V^T */
        r.h = h;
        MP_LAUNCH(k_softmax_bwd, blocks, 32 * MP_ATTN_WARPS, r, ph, pdt, g.heads * tt, dp, tt,
                  ds, part[2], w, tt);
        const void *pp = own_p ? (const void *)part[2] : (const void *)ph;
        MP_TRY(gemm_rm(true, false, T, dh, T, 1.0, pp, T, own_p ? tt : g.heads * tt, dob, D,
                       T * D, w, at(xbase, xdt, 2 * D + h * dh), xdt, ld, T * ld,
                       g.N)); /* dV = P'^T dO */
        MP_TRY(gemm_rm(false, false, T, dh, T, scale, ds, T, tt, k, ld, T * ld, w,
                       at(xbase, xdt, h * dh), xdt, ld, T * ld, g.N)); /* dQ = dS K */
        MP_TRY(gemm_rm(true, false, T, dh, T, scale, ds, T, tt, q, ld, T * ld, w,
                       at(xbase, xdt, D + h * dh), xdt, ld, T * ld, g.N)); /* dK = dS^T Q */
    }
    if (x_direct)
        return MP_OK;
    mp_tensor x32 = view_as(part[4], MP_F32, dqkv);
    return mp_cuda_convert(&x32, dqkv);
}
