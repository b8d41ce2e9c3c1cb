/* Batch normalisation on the GPU over (N, H, W) per channel of an NHWC tensor (x of any rank is
 * seen as (M, C), C its last dimension), with our own kernels and the CPU reference's semantics
 * and FP32 operations (engine/backend_cpu/batchnorm.c), its sums in the same order
 * (engine/bn_rule.h), so that every result is the CPU's bits: the batch mean and the biased
 * variance by the rule's chunks (each chunk's sum, then its squares about its own mean in a
 * second sweep that finds the chunk in L2, the chunks' terms added in order),
 * invstd = 1 / sqrt(var + eps) (the square root in double, then rounded, as the CPU does), the
 * running statistics updated with the unbiased variance
 * (running = (1 - momentum) running + momentum batch), y = (x - mean) scale + beta with
 * scale = invstd gamma; backward dgamma = sum(dy xhat), dbeta = sum(dy),
 * dx = gamma invstd (dy - sum(dy) / M - xhat sum(dy xhat) / M). All in FP32; every tensor is
 * loaded and stored by engine/cast_rule.h (x, y, dy and dx of one dtype fixed at compile time,
 * the per-channel tensors by their runtime dtypes), so FP32, fp16 and bf16 data and per-channel
 * tensors of any of them need no conversion copies.
 * Why not cuDNN: its legacy BatchNorm call in SPATIAL_PERSISTENT mode took 77% of a WRN-16-4
 * step at batch 512 on an H200 (bench/results/gpu-h200-2026-11-27), the API is deprecated in
 * cuDNN 9 and documents no bf16 data, and its fast NHWC path (the Ex calls) is fp16 only and
 * wants a reserve space kept per layer from forward to backward, which the op table's contract
 * has no place for. These kernels move the data 3 times in a training forward (x twice from
 * memory, y once; evaluation twice) and 5 times backward (x and dy twice, dx once).
 * With mp_bn_args.relu (BatchNorm + ReLU, fused) the apply kernel takes engine/elem_rule.h's ReLU
 * before its rounding, and backward reads dy through the mask of y (the forward's output) where
 * it reads dy, in the sums and in dx: the unfused pair's bits without its pass over memory.
 * Column sums (per channel over the M rows) are formed without atomics in engine/bn_rule.h's
 * order, the CPU's: in k_bn_part a thread is one lane of one chunk for V channels (V = 8 when C
 * is a multiple of 8 and the tensors are aligned: 16-byte loads of a half type, several rows'
 * loads in flight at once; else V = 1), a block holds the 8 lanes of up to 32 channel vectors
 * and of as many chunks as make 256 threads, and the lanes are added in order in shared memory;
 * then a block of 32 x 8 threads per 32 channels stages the chunks' partials through shared
 * memory, coalesced, and one thread per channel adds them in chunk order. The element-wise
 * passes (apply, dx) take V elements a thread with the dtype fixed at compile time
 * (engine/backend_cuda/vec.cuh). The results are deterministic and the CPU's bits. The FP32
 * scratch (2 C floats a chunk and MP_BN_STATS C floats of per-channel values) is mp_cuda_grow's.
 */
#include <limits.h>

#include "engine/backend_cuda/cuda.h"
#include "engine/backend_cuda/vec.cuh"
#include "engine/bn_rule.h"
#include "engine/elem_rule.h"

/* MP_BN_STATS per-channel rows in the scratch; chunk partials staged through shared memory
 * BN_TILE chunks at a time; BN_THREADS threads a block of k_bn_part, at least two blocks an SM. */
enum { MP_BN_STATS = 5, BN_TILE = 64, BN_THREADS = 256 };

/* What k_bn_part sums per channel j: x, then (x - the chunk's mean)^2; dy and
 * dy (x - mean) invstd. */
enum { BN_SUM_XQ, BN_SUM_DY };

static void *mp_bn_scratch;
static size_t mp_bn_scratch_bytes;

/* One batch normalisation call: its tensors' data (x, y, dy and dx all of x's dtype, the
 * template's DT), its rows M and channels C, the rule's chunks, and the FP32 scratch. */
typedef struct bn_call {
    const void *x, *y, *dy;
    void *out; /* y forward, dx backward (NULL: no dx) */
    int64_t M, C, chunks, rows;
    float *part, *st;
} bn_call;

/* Element k of dy, or 0 where the fused ReLU's output (element k of y; has_y false: no ReLU) did
 * not pass it: relu_backward's value, read where it is used. */
template <mp_dtype DT, int V>
__device__ static float bn_dy(const mp_vec<DT, V> &dy, const mp_vec<DT, V> &y, bool has_y, int k)
{
    if (has_y && !mp_relu_passes_f32(y.f32(k)))
        return 0.0f;
    return dy.f32(k);
}

/* Calls f(x, dy, y) with the vectors of channels j0 .. j0 + V - 1 of rows r, r + MP_BN_LANES,
 * ... below r1 in row order (one lane of engine/bn_rule.h), U rows loaded before they are used
 * (their loads in flight together); dy and y are read when not NULL (otherwise their vectors are
 * undefined). */
template <mp_dtype DT, int V, int U, typename F>
__device__ static void bn_lane_rows(const void *x, const void *dy, const void *y, int64_t r,
                                    int64_t r1, int64_t C, int64_t j0, F f)
{
    typedef mp_vec<DT, V> vec;
    for (; r < r1; r += MP_BN_LANES * U) {
        vec xv[U], dv[U], yv[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t ru = r + u * MP_BN_LANES;
            if (ru < r1) {
                xv[u].load(x, ru * C + j0);
                if (dy)
                    dv[u].load(dy, ru * C + j0);
                if (y)
                    yv[u].load(y, ru * C + j0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (r + u * MP_BN_LANES < r1)
                f(xv[u], dv[u], yv[u]);
    }
}

/* The chunks' two sums of channels j0 .. j0 + V - 1 (thread x of the block is channel group
 * blockIdx.x blockDim.x + x) for chunk blockIdx.y blockDim.z + threadIdx.z, into
 * part[2 chunk C + j] and part[(2 chunk + 1) C + j]: BN_SUM_XQ the sum of x, then, in a second
 * sweep over the same rows (from L2 mostly), the sum of (x - the chunk's mean)^2
 * (engine/bn_rule.h's variance rule); BN_SUM_DY the sums of dy (masked by y when not NULL) and
 * of dy (x - mean) invstd, mean and invstd per-channel tensors of dtypes mt and it. Thread y is
 * lane y of the rule (blockDim.y == MP_BN_LANES), and the lanes are added in order. */
template <mp_dtype DT, int V, int WHAT>
__global__ static void __launch_bounds__(BN_THREADS, 2)
    k_bn_part(bn_call b, const void *mean, mp_dtype mt, const void *invstd, mp_dtype it)
{
    typedef mp_vec<DT, V> vec;
    __shared__ float p1[BN_THREADS * V], p2[BN_THREADS * V], cm[BN_THREADS / MP_BN_LANES * V];
    const int64_t j0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    const int64_t chunk = (int64_t)blockIdx.y * blockDim.z + threadIdx.z;
    const bool live = j0 < b.C && chunk < b.chunks;
    const int64_t n = live ? mp_bn_chunk_n(b.M, b.rows, chunk) : 0, r0 = chunk * b.rows;
    const int head = threadIdx.z * blockDim.x + threadIdx.x;
    const int slot = (threadIdx.z * MP_BN_LANES + threadIdx.y) * blockDim.x + threadIdx.x;
    float s1[V], s2[V], m[V], inv[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        s1[k] = s2[k] = 0.0f;
        m[k] = WHAT == BN_SUM_DY && live ? mp_elem_load_f32(mean, mt, j0 + k) : 0.0f;
        inv[k] = WHAT == BN_SUM_DY && live ? mp_elem_load_f32(invstd, it, j0 + k) : 0.0f;
    }
    auto sums = [&](const vec &xv, const vec &dv, const vec &yv) {
#pragma unroll
        for (int k = 0; k < V; k++) {
            const float v = xv.f32(k);
            if (WHAT == BN_SUM_XQ) {
                s1[k] += v;
            } else {
                const float g = bn_dy(dv, yv, b.y != NULL, k);
                s1[k] += g;
                s2[k] += g * ((v - m[k]) * inv[k]);
            }
        }
    };
    if (live && WHAT == BN_SUM_XQ)
        bn_lane_rows<DT, V, 4>(b.x, NULL, NULL, r0 + threadIdx.y, r0 + n, b.C, j0, sums);
    else if (live)
        bn_lane_rows<DT, V, 2>(b.x, b.dy, b.y, r0 + threadIdx.y, r0 + n, b.C, j0, sums);
#pragma unroll
    for (int k = 0; k < V; k++) {
        p1[k * BN_THREADS + slot] = s1[k];
        p2[k * BN_THREADS + slot] = s2[k];
    }
    __syncthreads();
    float t1[V], t2[V];
#pragma unroll
    for (int k = 0; k < V; k++)
        t1[k] = t2[k] = 0.0f;
    const bool lead = threadIdx.y == 0 && live;
    if (lead) {
        for (int q = 0; q < MP_BN_LANES; q++) {
            const int sq = (threadIdx.z * MP_BN_LANES + q) * blockDim.x + threadIdx.x;
#pragma unroll
            for (int k = 0; k < V; k++) {
                t1[k] += p1[k * BN_THREADS + sq];
                t2[k] += p2[k * BN_THREADS + sq];
            }
        }
        if (WHAT == BN_SUM_XQ)
#pragma unroll
            for (int k = 0; k < V; k++)
                cm[head * V + k] = MP_BN_CHUNK_MEAN(float, t1[k], n);
    }
    if (WHAT == BN_SUM_XQ) { /* the second sweep, about the chunk's mean */
        __syncthreads();
#pragma unroll
        for (int k = 0; k < V; k++) {
            s2[k] = 0.0f;
            m[k] = live ? cm[head * V + k] : 0.0f;
        }
        auto squares = [&](const vec &xv, const vec &, const vec &) {
#pragma unroll
            for (int k = 0; k < V; k++) {
                const float d = xv.f32(k) - m[k];
                s2[k] += d * d;
            }
        };
        if (live)
            bn_lane_rows<DT, V, 4>(b.x, NULL, NULL, r0 + threadIdx.y, r0 + n, b.C, j0, squares);
#pragma unroll
        for (int k = 0; k < V; k++)
            p2[k * BN_THREADS + slot] = s2[k];
        __syncthreads();
        if (lead)
            for (int q = 0; q < MP_BN_LANES; q++) {
                const int sq = (threadIdx.z * MP_BN_LANES + q) * blockDim.x + threadIdx.x;
#pragma unroll
                for (int k = 0; k < V; k++)
                    t2[k] = (q == 0 ? 0.0f : t2[k]) + p2[k * BN_THREADS + sq];
            }
    }
    if (lead)
#pragma unroll
        for (int k = 0; k < V; k++) {
            b.part[2 * chunk * b.C + j0 + k] = t1[k];
            b.part[(2 * chunk + 1) * b.C + j0 + k] = t2[k];
        }
}

/* Calls f(c, a, q) on the threads with threadIdx.y == 0, for the chunks c = 0, 1, ... in order,
 * a and q chunk c's two sums of channel j = blockIdx.x 32 + threadIdx.x (part[2 c C + j] and
 * part[(2 c + 1) C + j]); the block's 32 x 8 threads stage the sums through shared memory,
 * BN_TILE chunks at a time, coalesced. Every thread of the block calls it. */
template <typename F>
__device__ static void bn_chunks_in_order(const float *part, int64_t chunks, int64_t C, F f)
{
    __shared__ float a[BN_TILE][32], q[BN_TILE][32];
    const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
    for (int64_t c0 = 0; c0 < chunks; c0 += BN_TILE) {
        const int nt = (int)(chunks - c0 < BN_TILE ? chunks - c0 : BN_TILE);
        if (j < C)
            for (int c = threadIdx.y; c < nt; c += blockDim.y) {
                a[c][threadIdx.x] = part[2 * (c0 + c) * C + j];
                q[c][threadIdx.x] = part[(2 * (c0 + c) + 1) * C + j];
            }
        __syncthreads();
        if (threadIdx.y == 0 && j < C)
            for (int c = 0; c < nt; c++)
                f(c0 + c, a[c][threadIdx.x], q[c][threadIdx.x]);
        __syncthreads();
    }
}

/* 1 / sqrt(var + eps) as the CPU reference rounds it. */
__device__ static float bn_invstd(float var, float eps)
{
    return 1.0f / (float)sqrt((double)(var + eps));
}

/* Training statistics of channel j = blockIdx.x 32 + threadIdx.x (blocks of 32 x 8) from the
 * chunks' sums (k_bn_part's BN_SUM_XQ), by engine/bn_rule.h's rule: save_mean, save_invstd, the
 * running statistics, and st's mean (st[j]), scale (st[C + j]) and shift (st[2 C + j]) for
 * k_bn_apply. */
__global__ static void k_bn_train_stats(const float *part, int64_t chunks, int64_t rows,
                                        int64_t C, int64_t M, float eps, float mom, const void *g,
                                        mp_dtype gt, const void *b, mp_dtype bt, void *rm,
                                        mp_dtype rmt, void *rv, mp_dtype rvt, void *sm,
                                        mp_dtype smt, void *si, mp_dtype sit, float *st)
{
    const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
    float sum = 0.0f, ss = 0.0f;
    bn_chunks_in_order(part, chunks, C, [&](int64_t, float a, float) { sum += a; });
    const float mean = sum / (float)M;
    bn_chunks_in_order(part, chunks, C, [&](int64_t c, float a, float q) {
        ss += MP_BN_CHUNK_DEV(float, a, q, mp_bn_chunk_n(M, rows, c), mean);
    });
    if (threadIdx.y != 0 || j >= C)
        return;
    st[j] = mean;
    float invstd = bn_invstd(ss / (float)M, eps), unbiased = ss / (float)(M - 1);
    mp_elem_store_f32(sm, smt, j, mean);
    mp_elem_store_f32(si, sit, j, invstd);
    mp_elem_store_f32(rm, rmt, j, (1.0f - mom) * mp_elem_load_f32(rm, rmt, j) + mom * mean);
    mp_elem_store_f32(rv, rvt, j, (1.0f - mom) * mp_elem_load_f32(rv, rvt, j) + mom * unbiased);
    st[C + j] = invstd * mp_elem_load_f32(g, gt, j);
    st[2 * C + j] = mp_elem_load_f32(b, bt, j);
}

/* Evaluation's per-channel values from the running statistics: st's mean, scale and shift. */
__global__ static void k_bn_eval_stats(int64_t C, float eps, const void *g, mp_dtype gt,
                                       const void *b, mp_dtype bt, const void *rm, mp_dtype rmt,
                                       const void *rv, mp_dtype rvt, float *st)
{
    MP_CUDA_FOR(j, C)
    {
        st[j] = mp_elem_load_f32(rm, rmt, j);
        st[C + j] = bn_invstd(mp_elem_load_f32(rv, rvt, j), eps) * mp_elem_load_f32(g, gt, j);
        st[2 * C + j] = mp_elem_load_f32(b, bt, j);
    }
}

/* y = (x - mean) scale + shift per element, from st's three per-channel rows; with relu, its
 * ReLU. V elements a thread (C a multiple of V). */
template <mp_dtype DT, int V>
__global__ static void k_bn_apply(bn_call b, bool relu)
{
    const int64_t n = b.M * b.C;
    MP_CUDA_FOR(q, n / V)
    {
        const int64_t i = q * V, c = (int64_t)((unsigned)i % (unsigned)b.C);
        mp_vec<DT, V> xv, yv;
        mp_vec<MP_F32, V> mean, scale, shift;
        xv.load(b.x, i);
        mean.load(b.st, c);
        scale.load(b.st, b.C + c);
        shift.load(b.st, 2 * b.C + c);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const float v = (xv.f32(k) - mean.f32(k)) * scale.f32(k) + shift.f32(k);
            yv.set(k, relu ? mp_relu_f32(v) : v);
        }
        yv.store(b.out, i);
    }
}

/* Backward's per-channel values of channel j = blockIdx.x 32 + threadIdx.x (blocks of 32 x 8):
 * dgamma, dbeta, and into st mean, invstd, gamma invstd, sum(dy) / M and sum(dy xhat) / M for
 * k_bn_dx. */
__global__ static void k_bn_bwd_stats(const float *part, int64_t chunks, int64_t C, int64_t M,
                                      const void *g, mp_dtype gt, const void *sm, mp_dtype smt,
                                      const void *si, mp_dtype sit, void *dg, mp_dtype dgt,
                                      void *db, mp_dtype dbt, float *st)
{
    const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
    float sdy = 0.0f, sdx = 0.0f;
    bn_chunks_in_order(part, chunks, C, [&](int64_t, float a, float q) {
        sdy += a;
        sdx += q;
    });
    if (threadIdx.y != 0 || j >= C)
        return;
    float invstd = mp_elem_load_f32(si, sit, j);
    mp_elem_store_f32(dg, dgt, j, sdx);
    mp_elem_store_f32(db, dbt, j, sdy);
    st[j] = mp_elem_load_f32(sm, smt, j);
    st[C + j] = invstd;
    st[2 * C + j] = mp_elem_load_f32(g, gt, j) * invstd;
    st[3 * C + j] = sdy / (float)M;
    st[4 * C + j] = sdx / (float)M;
}

/* dx = gamma invstd (dy - sum(dy) / M - xhat sum(dy xhat) / M) per element (dy through y's
 * mask when y is not NULL). V elements a thread (C a multiple of V). */
template <mp_dtype DT, int V>
__global__ static void k_bn_dx(bn_call b)
{
    const int64_t n = b.M * b.C;
    MP_CUDA_FOR(q, n / V)
    {
        const int64_t i = q * V, c = (int64_t)((unsigned)i % (unsigned)b.C);
        mp_vec<DT, V> xv, yv, dv, dx;
        mp_vec<MP_F32, V> mean, invstd, gi, mdy, mdx;
        xv.load(b.x, i);
        dv.load(b.dy, i);
        if (b.y)
            yv.load(b.y, i);
        mean.load(b.st, c);
        invstd.load(b.st, b.C + c);
        gi.load(b.st, 2 * b.C + c);
        mdy.load(b.st, 3 * b.C + c);
        mdx.load(b.st, 4 * b.C + c);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const float xhat = (xv.f32(k) - mean.f32(k)) * invstd.f32(k);
            const float g = bn_dy(dv, yv, b.y != NULL, k);
            dx.set(k, gi.f32(k) * (g - mdy.f32(k) - xhat * mdx.f32(k)));
        }
        dx.store(b.out, i);
    }
}

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

/* b's layout for its M >= 1 rows of C channels: the rule's chunks (mp_bn_chunks), and the
 * scratch: b->part (2 C floats a chunk) followed by b->st (MP_BN_STATS C floats). */
static mp_status bn_layout(bn_call *b)
{
    b->chunks = mp_bn_chunks(b->M, &b->rows);
    MP_TRY(mp_cuda_grow(&mp_bn_scratch, &mp_bn_scratch_bytes,
                        (size_t)((2 * b->chunks + MP_BN_STATS) * b->C) * sizeof(float)));
    b->part = (float *)mp_bn_scratch;
    b->st = b->part + 2 * b->chunks * b->C;
    return MP_OK;
}

/* k_bn_part over b: V channels a thread, up to 32 channel groups x MP_BN_LANES lanes a block,
 * and as many chunks a block as fill BN_THREADS threads (16 at 16 channels of a half type). */
template <mp_dtype DT, int V> struct bn_sums {
    static mp_status run(const bn_call &b, int what, const void *mean, mp_dtype mt,
                         const void *invstd, mp_dtype it)
    {
        const int64_t groups = (b.C + V - 1) / V;
        const int bx = (int)(groups < 32 ? groups : 32), bz = BN_THREADS / (bx * MP_BN_LANES);
        dim3 grid((unsigned)((groups + bx - 1) / bx), (unsigned)((b.chunks + bz - 1) / bz));
        void (*k)(bn_call, const void *, mp_dtype, const void *, mp_dtype) =
            what == BN_SUM_XQ ? k_bn_part<DT, V, BN_SUM_XQ> : k_bn_part<DT, V, BN_SUM_DY>;
        MP_LAUNCH(k, grid, dim3(bx, MP_BN_LANES, bz), b, mean, mt, invstd, it);
        return MP_OK;
    }
};

/* The element-wise pass over b: k_bn_apply (forward, with relu its ReLU) or k_bn_dx. */
template <mp_dtype DT, int V> struct bn_map {
    static mp_status run(const bn_call &b, bool backward, bool relu)
    {
        const unsigned blocks = mp_cuda_blocks(b.M * b.C / V);
        void (*dx)(bn_call) = k_bn_dx<DT, V>;
        void (*apply)(bn_call, bool) = k_bn_apply<DT, V>;
        if (backward)
            MP_LAUNCH(dx, blocks, 256, b);
        else
            MP_LAUNCH(apply, blocks, 256, b, relu);
        return MP_OK;
    }
};

/* Runs K<DT, V>::run(b, args...) with DT the dtype dt of b's tensors and V = MP_VEC when C is a
 * multiple of it and every tensor and the scratch are aligned to a vector, else V = 1. */
template <template <mp_dtype, int> class K, typename... A>
static mp_status bn_dispatch(const bn_call &b, mp_dtype dt, A... args)
{
    const bool c8 = b.C % MP_VEC == 0;
    MP_VEC_BY_DTYPE(dt, DT, {
        if (c8 && mp_vec_aligned(alignof(mp_vec<DT, MP_VEC>), {b.x, b.y, b.dy, b.out}) &&
            mp_vec_aligned(alignof(mp_vec<MP_F32, MP_VEC>), {b.st}))
            return K<DT, MP_VEC>::run(b, args...);
        return K<DT, 1>::run(b, args...);
    });
    return MP_OK;
}

extern "C" mp_status mp_cuda_batchnorm_forward(const mp_bn_args *a, bool train,
                                               const mp_tensor *x, const mp_tensor *gamma,
                                               const mp_tensor *beta, mp_tensor *running_mean,
                                               mp_tensor *running_var, mp_tensor *save_mean,
                                               mp_tensor *save_invstd, mp_tensor *y)
{
    MP_CUDA_DTYPES("batchnorm_forward", x, gamma, beta, running_mean, running_var, save_mean,
                   save_invstd, y);
    int64_t C = mp_tensor_numel(gamma);
    MP_CUDA_REQUIRE(channels_last(x, C), "batchnorm_forward");
    int64_t M = mp_tensor_numel(x) / C;
    MP_CUDA_REQUIRE(mp_tensor_numel(y) == M * C && y->dtype == x->dtype, "batchnorm_forward");
    MP_CUDA_REQUIRE(per_channel(beta, C, false) && per_channel(running_mean, C, false) &&
                        per_channel(running_var, C, false),
                    "batchnorm_forward");
    MP_CUDA_REQUIRE(per_channel(save_mean, C, !train) && per_channel(save_invstd, C, !train),
                    "batchnorm_forward");
    MP_CUDA_REQUIRE(a->eps > 0 && a->momentum >= 0 && a->momentum <= 1, "batchnorm_forward");
    MP_CUDA_REQUIRE(M >= (train ? 2 : 1), "batchnorm_forward values per channel");
    MP_CUDA_REQUIRE(M * C <= INT_MAX, "batchnorm_forward");
    bn_call b = {x->data, NULL, NULL, y->data, M, C, 0, 0, NULL, NULL};
    MP_TRY(bn_layout(&b));
    const float eps = (float)a->eps;
    const unsigned cb = (unsigned)((C + 31) / 32);
    if (train) {
        MP_TRY(bn_dispatch<bn_sums>(b, x->dtype, (int)BN_SUM_XQ, (const void *)NULL, MP_F32,
                                    (const void *)NULL, MP_F32));
        MP_LAUNCH(k_bn_train_stats, cb, dim3(32, 8), b.part, b.chunks, b.rows, C, M, eps,
                  (float)a->momentum, gamma->data, gamma->dtype, beta->data, beta->dtype,
                  running_mean->data, running_mean->dtype, running_var->data, running_var->dtype,
                  save_mean->data, save_mean->dtype, save_invstd->data, save_invstd->dtype, b.st);
    } else {
        MP_LAUNCH(k_bn_eval_stats, mp_cuda_blocks(C), 256, C, eps, gamma->data, gamma->dtype,
                  beta->data, beta->dtype, running_mean->data, running_mean->dtype,
                  running_var->data, running_var->dtype, b.st);
    }
    MP_TRY(bn_dispatch<bn_map>(b, x->dtype, false, (bool)a->relu));
    return MP_OK;
}

extern "C" mp_status mp_cuda_batchnorm_backward(const mp_bn_args *a, const mp_tensor *x,
                                                const mp_tensor *y, const mp_tensor *dy,
                                                const mp_tensor *gamma,
                                                const mp_tensor *save_mean,
                                                const mp_tensor *save_invstd, mp_tensor *dx,
                                                mp_tensor *dgamma, mp_tensor *dbeta)
{
    MP_CUDA_DTYPES("batchnorm_backward", x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
    int64_t C = mp_tensor_numel(gamma);
    MP_CUDA_REQUIRE(channels_last(x, C), "batchnorm_backward");
    int64_t M = mp_tensor_numel(x) / C;
    MP_CUDA_REQUIRE(mp_tensor_numel(dy) == M * C && dy->dtype == x->dtype, "batchnorm_backward");
    MP_CUDA_REQUIRE(!dx || (mp_tensor_numel(dx) == M * C && dx->dtype == x->dtype),
                    "batchnorm_backward");
    MP_CUDA_REQUIRE(per_channel(save_mean, C, false) && per_channel(save_invstd, C, false) &&
                        per_channel(dgamma, C, false) && per_channel(dbeta, C, false),
                    "batchnorm_backward");
    MP_CUDA_REQUIRE(a->eps > 0, "batchnorm_backward"); /* as the CPU checks it */
    MP_CUDA_REQUIRE(!a->relu || (y && mp_tensor_numel(y) == M * C && y->dtype == x->dtype),
                    "batchnorm_backward");
    const mp_tensor *mask = a->relu ? y : NULL;
    MP_CUDA_REQUIRE(M * C <= INT_MAX, "batchnorm_backward");
    if (M == 0) { /* empty batch: zero parameter gradients (all-zero bits in every dtype) */
        cudaStream_t stream = mp_cuda_ctx_get()->stream;
        CUDA_CHECK(cudaMemsetAsync(dgamma->data, 0, (size_t)mp_tensor_bytes(dgamma), stream));
        CUDA_CHECK(cudaMemsetAsync(dbeta->data, 0, (size_t)mp_tensor_bytes(dbeta), stream));
        return MP_OK;
    }
    bn_call b = {x->data, mask ? mask->data : NULL, dy->data, dx ? dx->data : NULL, M, C, 0, 0,
                 NULL, NULL};
    MP_TRY(bn_layout(&b));
    MP_TRY(bn_dispatch<bn_sums>(b, x->dtype, (int)BN_SUM_DY, save_mean->data, save_mean->dtype,
                                save_invstd->data, save_invstd->dtype));
    MP_LAUNCH(k_bn_bwd_stats, (unsigned)((C + 31) / 32), dim3(32, 8), b.part, b.chunks, C, M,
              gamma->data, gamma->dtype, save_mean->data, save_mean->dtype, save_invstd->data,
              save_invstd->dtype, dgamma->data, dgamma->dtype, dbeta->data, dbeta->dtype, b.st);
    if (dx)
        MP_TRY(bn_dispatch<bn_map>(b, x->dtype, true, false));
    return MP_OK;
}
