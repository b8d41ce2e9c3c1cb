/* Tiled ("flash") multi-head self-attention on the GPU (engine/op_list.h's
 * attention_flash_forward and attention_flash_backward; the online softmax's rules in
 * engine/attn_flash.h, shared with the CPU). A thread owns a row: the forward's thread keeps its
 * query row q_i, its output accumulator (per-thread arrays of MP_ATTN_FLASH_MAX_DH, indexed at
 * run time: local memory, not registers) and its maximum and sum, and goes over key
 * tiles of MP_FLASH_TILE rows of K and V, which its block stages in shared memory (FP32); the
 * backward recomputes P = e^(S - m) / l from the saved statistics in two kernels without
 * atomics: one thread per query row adds dQ over the key tiles, one per key row adds dK and dV
 * over the query tiles (Q, dO and the rows' m, l and d_i = dO_i . out_i staged). Dot products
 * and sums go in index order in FP32 (the build forbids FMA contraction); outputs are rounded
 * once. Nothing of size T x T is stored, and these need no scratch. Deterministic. The grid is
 * (row tiles, heads, N): at most 65535 heads and sequences a call. Written for correctness, not
 * speed (no tensor cores, 64-thread blocks): on an H200, GPT-2 small's shape trained at 14.2
 * sequences a second through these kernels against 135.8 through the (T, T) path
 * (bench/results/gpu-h200-2026-11-30). Half qkv with heads of 16, 32, 64 or 128 columns go to
 * the tensor-core kernels instead (attention_mma.cu, mp_attn_flash_mma) where the GPU has them;
 * these take FP32, other widths, and GPUs before sm_80. The op table
 * (tests/gpu/op_table_attn.c) checks both against the CPU. */
#include <math.h>

#include "engine/backend_cuda/attention_flash.cuh" /* first: cuda.h's C headers as extern "C" */

enum {
    MP_FLASH_TILE = 32,    /* key (query) rows staged per step */
    MP_FLASH_THREADS = 64, /* rows per block */
    MP_FLASH_STAGE = MP_FLASH_TILE * MP_ATTN_FLASH_MAX_DH, /* floats of one staged operand */
};

/* Element c of head h's part `part` (0: q, 1: k, 2: v) of token t of sequence n. */
__device__ static float qkv_at(const flash_args &a, const void *qkv, int64_t n, int64_t t,
                               int part, int64_t h, int64_t c)
{
    return mp_elem_load_f32(qkv, a.w, (n * a.T + t) * 3 * a.D + part * a.D + h * a.dh + c);
}

/* Stages rows [t0, t0 + MP_FLASH_TILE) (those < T) of two (T, dh) operands of head h into
 * shared memory as FP32: rows of qkv's parts pa and pb, or (pb < 0) of a (N, T, D) tensor y of
 * dtype ydt. */
__device__ static void stage(const flash_args &a, const void *qkv, int pa, int pb, const void *y,
                             mp_dtype ydt, int64_t n, int64_t h, int64_t t0, float *sa,
                             float *sb)
{
    for (int64_t e = threadIdx.x; e < MP_FLASH_TILE * a.dh; e += blockDim.x) {
        int64_t r = e / a.dh, c = e % a.dh, t = t0 + r;
        if (t >= a.T)
            continue;
        sa[e] = qkv_at(a, qkv, n, t, pa, h, c);
        sb[e] = pb >= 0 ? qkv_at(a, qkv, n, t, pb, h, c)
                        : mp_elem_load_f32(y, ydt, (n * a.T + t) * a.D + h * a.dh + c);
    }
}

/* The end of the keys that the block of query rows from i0 attends to (under the causal mask,
 * those of its last row). */
__device__ static int64_t keys_end(const flash_args &a, int64_t i0)
{
    int64_t last = i0 + MP_FLASH_THREADS < a.T ? i0 + MP_FLASH_THREADS : a.T;
    return a.causal ? last : a.T;
}

/* The columns of key tile [j0, j0 + MP_FLASH_TILE) that row i attends to (<= 0: none; rows past
 * T: none). */
__device__ static int64_t tile_cols(const flash_args &a, int64_t i, int64_t j0)
{
    int64_t j1 = j0 + MP_FLASH_TILE < a.T ? j0 + MP_FLASH_TILE : a.T;
    return i < a.T ? mp_attn_flash_cols(a.causal, i, j0, j1) : 0;
}

/* The forward: block (row tile, h, n), a thread per query row i. */
__global__ static void k_flash_fwd(flash_args a, const void *qkv, void *stats, void *out)
{
    a.offset = mp_mask_offset(a.offset, a.step);
    __shared__ float ks[MP_FLASH_STAGE], vs[MP_FLASH_STAGE];
    const int64_t n = blockIdx.z, h = blockIdx.y;
    const int64_t i0 = (int64_t)blockIdx.x * MP_FLASH_THREADS, i = i0 + threadIdx.x;
    float q[MP_ATTN_FLASH_MAX_DH], acc[MP_ATTN_FLASH_MAX_DH], m = -INFINITY, l = 0.0f;
    for (int64_t c = 0; c < a.dh; c++) {
        q[c] = i < a.T ? qkv_at(a, qkv, n, i, 0, h, c) : 0.0f;
        acc[c] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < keys_end(a, i0); j0 += MP_FLASH_TILE) {
        __syncthreads();
        stage(a, qkv, 1, 2, NULL, a.w, n, h, j0, ks, vs);
        __syncthreads();
        int64_t lim = tile_cols(a, i, j0);
        if (lim <= 0)
            continue;
        float s[MP_FLASH_TILE], tmax = -INFINITY;
        bool bad = false;
        for (int64_t j = 0; j < lim; j++) {
            float dot = 0.0f;
            for (int64_t c = 0; c < a.dh; c++)
                dot += q[c] * ks[j * a.dh + c];
            s[j] = dot * a.scale;
            bad |= !isfinite(s[j]);
            tmax = fmaxf(tmax, s[j]);
        }
        float m2 = mp_attn_flash_max(m, tmax, bad), c = mp_attn_flash_rescale(m, m2), sum = 0.0f;
        for (int64_t j = 0; j < lim; j++) {
            s[j] = mp_exp_f32(s[j] - m2);
            sum += s[j];
        }
        l = l * c + sum;
        m = m2;
        for (int64_t d = 0; d < a.dh; d++)
            acc[d] *= c;
        for (int64_t j = 0; j < lim; j++) {
            float pj = s[j] * drop_mult(a, n, h, i, j0 + j);
            for (int64_t d = 0; d < a.dh; d++)
                acc[d] += pj * vs[j * a.dh + d];
        }
    }
    if (i >= a.T)
        return;
    float inv = 1.0f / l;
    for (int64_t d = 0; d < a.dh; d++)
        mp_elem_store_f32(out, a.odt, (n * a.T + i) * a.D + h * a.dh + d, acc[d] * inv);
    int64_t so = ((n * a.heads + h) * a.T + i) * 2;
    mp_elem_store_f32(stats, a.sdt, so, m);
    mp_elem_store_f32(stats, a.sdt, so + 1, l);
}

/* Row i's statistics and d_i = dO_i . out_i of head h. */
__device__ static void row_terms(const flash_args &a, const void *stats, const void *o,
                                 const void *dout, int64_t n, int64_t h, int64_t i, float *m,
                                 float *inv_l, float *d)
{
    int64_t so = ((n * a.heads + h) * a.T + i) * 2;
    *m = mp_elem_load_f32(stats, a.sdt, so);
    *inv_l = 1.0f / mp_elem_load_f32(stats, a.sdt, so + 1);
    float acc = 0.0f;
    for (int64_t c = 0; c < a.dh; c++) {
        int64_t e = (n * a.T + i) * a.D + h * a.dh + c;
        acc += mp_elem_load_f32(dout, a.dodt, e) * mp_elem_load_f32(o, a.outdt, e);
    }
    *d = acc;
}

/* dQ: block (row tile, h, n), a thread per query row i, over the key tiles. */
__global__ static void k_flash_dq(flash_args a, const void *qkv, const void *o, const void *stats,
                                  const void *dout, void *dqkv)
{
    a.offset = mp_mask_offset(a.offset, a.step);
    __shared__ float ks[MP_FLASH_STAGE], vs[MP_FLASH_STAGE];
    const int64_t n = blockIdx.z, h = blockIdx.y;
    const int64_t i0 = (int64_t)blockIdx.x * MP_FLASH_THREADS, i = i0 + threadIdx.x;
    float q[MP_ATTN_FLASH_MAX_DH], dO[MP_ATTN_FLASH_MAX_DH], dq[MP_ATTN_FLASH_MAX_DH];
    float m = 0.0f, inv = 0.0f, dr = 0.0f;
    if (i < a.T)
        row_terms(a, stats, o, dout, n, h, i, &m, &inv, &dr);
    for (int64_t c = 0; c < a.dh; c++) {
        q[c] = i < a.T ? qkv_at(a, qkv, n, i, 0, h, c) : 0.0f;
        dO[c] = i < a.T ? mp_elem_load_f32(dout, a.dodt, (n * a.T + i) * a.D + h * a.dh + c)
                        : 0.0f;
        dq[c] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < keys_end(a, i0); j0 += MP_FLASH_TILE) {
        __syncthreads();
        stage(a, qkv, 1, 2, NULL, a.w, n, h, j0, ks, vs);
        __syncthreads();
        int64_t lim = tile_cols(a, i, j0);
        for (int64_t j = 0; j < lim; j++) {
            float s = 0.0f, dp = 0.0f;
            for (int64_t c = 0; c < a.dh; c++) {
                s += q[c] * ks[j * a.dh + c];
                dp += dO[c] * vs[j * a.dh + c];
            }
            float p = mp_attn_flash_p(s * a.scale, m, inv);
            float ds = p * (dp * drop_mult(a, n, h, i, j0 + j) - dr);
            for (int64_t c = 0; c < a.dh; c++)
                dq[c] += ds * ks[j * a.dh + c];
        }
    }
    if (i >= a.T)
        return;
    for (int64_t c = 0; c < a.dh; c++)
        mp_elem_store_f32(dqkv, a.odt, (n * a.T + i) * 3 * a.D + h * a.dh + c, dq[c] * a.scale);
}

/* dK and dV: block (row tile, h, n), a thread per key row j, over the query tiles that see it. */
__global__ static void k_flash_dkv(flash_args a, const void *qkv, const void *o,
                                   const void *stats, const void *dout, void *dqkv)
{
    a.offset = mp_mask_offset(a.offset, a.step);
    __shared__ float qs[MP_FLASH_STAGE], dos[MP_FLASH_STAGE];
    __shared__ float ms[MP_FLASH_TILE], invs[MP_FLASH_TILE], drs[MP_FLASH_TILE];
    const int64_t n = blockIdx.z, h = blockIdx.y;
    const int64_t j0 = (int64_t)blockIdx.x * MP_FLASH_THREADS, j = j0 + threadIdx.x;
    float k[MP_ATTN_FLASH_MAX_DH], v[MP_ATTN_FLASH_MAX_DH], dk[MP_ATTN_FLASH_MAX_DH],
        dv[MP_ATTN_FLASH_MAX_DH];
    for (int64_t c = 0; c < a.dh; c++) {
        k[c] = j < a.T ? qkv_at(a, qkv, n, j, 1, h, c) : 0.0f;
        v[c] = j < a.T ? qkv_at(a, qkv, n, j, 2, h, c) : 0.0f;
        dk[c] = dv[c] = 0.0f;
    }
    int64_t first = a.causal ? j0 / MP_FLASH_TILE * MP_FLASH_TILE : 0;
    for (int64_t i0 = first; i0 < a.T; i0 += MP_FLASH_TILE) {
        __syncthreads();
        stage(a, qkv, 0, -1, dout, a.dodt, n, h, i0, qs, dos);
        for (int64_t r = threadIdx.x; r < MP_FLASH_TILE; r += blockDim.x)
            if (i0 + r < a.T)
                row_terms(a, stats, o, dout, n, h, i0 + r, &ms[r], &invs[r], &drs[r]);
        __syncthreads();
        if (j >= a.T)
            continue;
        for (int64_t r = 0; r < MP_FLASH_TILE && i0 + r < a.T; r++) {
            int64_t i = i0 + r;
            if (a.causal && j > i)
                continue;
            float s = 0.0f, dp = 0.0f;
            for (int64_t c = 0; c < a.dh; c++) {
                s += qs[r * a.dh + c] * k[c];
                dp += dos[r * a.dh + c] * v[c];
            }
            float p = mp_attn_flash_p(s * a.scale, ms[r], invs[r]);
            float mult = drop_mult(a, n, h, i, j), ds = p * (dp * mult - drs[r]);
            for (int64_t c = 0; c < a.dh; c++) {
                dv[c] += p * mult * dos[r * a.dh + c];
                dk[c] += ds * qs[r * a.dh + c];
            }
        }
    }
    if (j >= a.T)
        return;
    for (int64_t c = 0; c < a.dh; c++) {
        int64_t e = (n * a.T + j) * 3 * a.D + h * a.dh + c;
        mp_elem_store_f32(dqkv, a.odt, e + a.D, dk[c] * a.scale);
        mp_elem_store_f32(dqkv, a.odt, e + 2 * a.D, dv[c]);
    }
}

static flash_args args_of(const mp_attn_desc *d, const mp_attn_geom &g)
{
    flash_args a;
    a.N = g.N, a.T = g.T, a.D = g.D, a.heads = g.heads, a.dh = g.dh;
    a.causal = d->causal;
    a.drop = d->dropout_p > 0;
    a.key = mp_dropout_key(d->seed);
    a.thr = mp_dropout_threshold(d->dropout_p);
    a.offset = d->offset;
    a.step = d->step;
    a.scale = (float)(1.0 / sqrt((double)g.dh));
    a.keep_scale = (float)(1.0 / (1.0 - d->dropout_p));
    return a;
}

static dim3 grid_of(const mp_attn_geom &g)
{
    return dim3((unsigned)((g.T + MP_FLASH_THREADS - 1) / MP_FLASH_THREADS), (unsigned)g.heads,
                (unsigned)g.N);
}

extern "C" mp_status mp_cuda_attention_flash_forward(const mp_attn_desc *d, const mp_tensor *qkv,
                                                     mp_tensor *stats, mp_tensor *out)
{
    MP_CUDA_DTYPES("attention_flash_forward", qkv, stats, out);
    mp_attn_geom g;
    MP_CUDA_REQUIRE(mp_attn_flash_geometry(d, qkv, stats, out, &g) && stats->dtype == MP_F32 &&
                        g.N <= 65535 && g.heads <= 65535,
                    "attention_flash_forward");
    if (g.N == 0)
        return MP_OK;
    flash_args a = args_of(d, g);
    a.w = qkv->dtype, a.sdt = stats->dtype, a.odt = out->dtype;
    a.dodt = a.outdt = out->dtype;
    bool ran;
    MP_TRY(mp_flash_mma_forward(a, qkv->data, stats->data, out->data, &ran));
    if (!ran)
        MP_LAUNCH(k_flash_fwd, grid_of(g), MP_FLASH_THREADS, a, qkv->data, stats->data,
                  out->data);
    return MP_OK;
}

extern "C" mp_status mp_cuda_attention_flash_backward(const mp_attn_desc *d, const mp_tensor *qkv,
                                                      const mp_tensor *out,
                                                      const mp_tensor *stats,
                                                      const mp_tensor *dout, mp_tensor *dqkv)
{
    MP_CUDA_DTYPES("attention_flash_backward", qkv, out, stats, dout, dqkv);
    mp_attn_geom g;
    MP_CUDA_REQUIRE(mp_attn_flash_geometry(d, qkv, stats, out, &g) && stats->dtype == MP_F32 &&
                        g.N <= 65535 && g.heads <= 65535 &&
                        mp_attn_shaped(dout, qkv->shape[0], qkv->shape[1], qkv->shape[2], g.D) &&
                        mp_attn_shaped(dqkv, qkv->shape[0], qkv->shape[1], qkv->shape[2],
                                       qkv->shape[3]),
                    "attention_flash_backward");
    if (g.N == 0)
        return MP_OK;
    flash_args a = args_of(d, g);
    a.w = qkv->dtype, a.sdt = stats->dtype, a.odt = dqkv->dtype;
    a.dodt = dout->dtype, a.outdt = out->dtype;
    bool ran;
    MP_TRY(mp_flash_mma_backward(a, qkv->data, out->data, stats->data, dout->data, dqkv->data,
                                 &ran));
    if (ran)
        return MP_OK;
    MP_LAUNCH(k_flash_dq, grid_of(g), MP_FLASH_THREADS, a, qkv->data, out->data, stats->data,
              dout->data, dqkv->data);
    MP_LAUNCH(k_flash_dkv, grid_of(g), MP_FLASH_THREADS, a, qkv->data, out->data, stats->data,
              dout->data, dqkv->data);
    return MP_OK;
}
