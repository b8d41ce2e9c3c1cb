/* The batch normalisation kernels that engine/backend_cuda/batchnorm.cu launches (it says what
 * they compute and in which order they add), in a header that builds without the CUDA runtime's
 * headers, so that tests/emu/test_batchnorm_kernels.cpp runs them on the CPU against the CPU
 * backend's bits. The per-channel statistics kernels stage every chunk's partial sums of
 * BN_STAT_CH channels in shared memory (MP_BN_MAX_CHUNKS chunks: about 32 KiB at most), add them in
 * chunk order on one thread a channel, and form the variance's per-chunk terms on all
 * BN_STAT_ROWS threads of a channel between its two sums: the rule's one serial chain per sum
 * is all that is left serial. */
#ifndef MP_BACKEND_CUDA_BATCHNORM_KERNELS_CUH
#define MP_BACKEND_CUDA_BATCHNORM_KERNELS_CUH

#include "engine/backend_cuda/grid.cuh"
#include "engine/backend_cuda/vec.cuh"
#include "engine/bn_rule.h"
#include "engine/elem_rule.h"

/* MP_BN_STATS per-channel rows in the scratch; at most BN_THREADS threads a block of k_bn_part,
 * at least two blocks an SM; blocks of BN_STAT_CH channels x BN_STAT_ROWS threads for the
 * statistics kernels. */
enum { MP_BN_STATS = 5, BN_THREADS = 256, BN_STAT_CH = 8, BN_STAT_ROWS = 32 };

/* What k_bn_part sums per channel j: x, then (x - the chunk's mean)^2; dy and dy (x - mean)
 * invstd. */
enum { BN_SUM_XQ, BN_SUM_DY };

/* Rows each lane of k_bn_part has in flight: BN_SUM_XQ reads x alone, BN_SUM_DY up to three
 * tensors (twice these spill registers at V = 8 of a half type, by ptxas -v). */
__host__ __device__ constexpr int bn_unroll(int what)
{
    return what == BN_SUM_XQ ? 4 : 2;
}

/* Dynamic shared memory of k_bn_part with V channels a thread: the lanes' two sums and the
 * chunks' means. */
__host__ __device__ constexpr size_t bn_part_smem(int V)
{
    const int floats = 2 * BN_THREADS + (int)BN_THREADS / (int)MP_BN_LANES;
    return (size_t)floats * (size_t)V * sizeof(float);
}

/* k_bn_part's launch for `groups` vectors of channels and `chunks` chunks on a device of `sms`
 * SMs: blocks of bx groups x MP_BN_LANES lanes x bz chunks, up to 32 groups and as many chunks
 * as fill BN_THREADS threads (16 at 16 channels of a half type), bz halved while the grid of gx
 * x gy blocks is under two blocks an SM and a block stays a warp or more. */
typedef struct bn_part_grid {
    int bx, bz;
    int64_t gx, gy;
} bn_part_grid;

static inline bn_part_grid bn_part_layout(int64_t groups, int64_t chunks, int sms)
{
    bn_part_grid g;
    g.bx = (int)(groups < 32 ? groups : 32);
    g.gx = (groups + g.bx - 1) / g.bx;
    g.bz = BN_THREADS / (g.bx * MP_BN_LANES);
    while (g.bz > 1 && g.bx * MP_BN_LANES * (g.bz / 2) >= 32 &&
           g.gx * ((chunks + g.bz - 1) / g.bz) < 2 * (int64_t)sms)
        g.bz /= 2;
    g.gy = (chunks + g.bz - 1) / g.bz;
    return g;
}

/* Dynamic shared memory of the statistics kernels for `chunks` chunks: two partial sums of each
 * chunk for each of the block's channels, and one value a channel. */
__host__ __device__ constexpr size_t bn_stat_smem(int64_t chunks)
{
    return (size_t)(2 * chunks + 1) * BN_STAT_CH * sizeof(float);
}

/* One batch normalisation call: its tensors' data (x, y, dy and dx all of x's dtype, the
 * template's DT), its rows M and channels C, the rule's chunks, and the FP32 scratch. */
typedef struct bn_call {
    const void *x, *y, *dy;
    void *out; /* y forward, dx backward (NULL: no dx) */
    int64_t M, C, chunks, rows;
    float *part, *st;
} bn_call;

/* Element k of dy, or 0 where the fused ReLU's output (element k of y; has_y false: no ReLU)
 * did not pass it: relu_backward's value, read where it is used. */
template <mp_dtype DT, int V>
__device__ static float bn_dy(const mp_vec<DT, V> &dy, const mp_vec<DT, V> &y, bool has_y, int k)
{
    if (has_y && !mp_relu_passes_f32(y.f32(k)))
        return 0.0f;
    return dy.f32(k);
}

/* Calls f(x, dy, y) with the vectors of channels j0 .. j0 + V - 1 of rows r, r + MP_BN_LANES,
 * ... below r1 in row order (one lane of engine/bn_rule.h), U rows loaded before they are used
 * (their loads in flight together); dy and y are read when not NULL (otherwise their vectors
 * are undefined). */
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
 * blockIdx.x blockDim.x + x) for chunk blockIdx.y blockDim.z + threadIdx.z, into part[2 chunk C
 * + j] and part[(2 chunk + 1) C + j]: BN_SUM_XQ the sum of x, then, in a second sweep over the
 * same rows (from L2 mostly), the sum of (x - the chunk's mean)^2 (engine/bn_rule.h's variance
 * rule); BN_SUM_DY the sums of dy (masked by y when not NULL) and of dy (x - mean) invstd, mean
 * and invstd per-channel tensors of dtypes mt and it. Thread y is lane y of the rule
 * (blockDim.y == MP_BN_LANES), and the lanes are added in order; blockDim.x blockDim.z <=
 * BN_THREADS / MP_BN_LANES. */
template <mp_dtype DT, int V, int WHAT>
__global__ static void __launch_bounds__(BN_THREADS, 2)
    k_bn_part(bn_call b, const void *mean, mp_dtype mt, const void *invstd, mp_dtype it)
{
    typedef mp_vec<DT, V> vec;
    extern __shared__ __align__(16) unsigned char smem[]; /* bn_part_smem(V) bytes */
    float *p1 = (float *)smem, *p2 = p1 + BN_THREADS * V, *cm = p2 + BN_THREADS * V;
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
        bn_lane_rows<DT, V, bn_unroll(WHAT)>(b.x, NULL, NULL, r0 + threadIdx.y, r0 + n, b.C, j0,
                                             sums);
    else if (live)
        bn_lane_rows<DT, V, bn_unroll(WHAT)>(b.x, b.dy, b.y, r0 + threadIdx.y, r0 + n, b.C, j0,
                                             sums);
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
            bn_lane_rows<DT, V, bn_unroll(WHAT)>(b.x, NULL, NULL, r0 + threadIdx.y, r0 + n, b.C,
                                                 j0, squares);
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

/* Stages the two sums of every chunk c of the block's channel j = blockIdx.x BN_STAT_CH +
 * threadIdx.x (part[2 c C + j] and part[(2 c + 1) C + j]; 0 for j >= C) into a[c BN_STAT_CH +
 * threadIdx.x] and q[...] of shared memory; every thread of the (BN_STAT_CH, BN_STAT_ROWS)
 * block calls it. */
__device__ static void bn_stage(const float *part, int64_t chunks, int64_t C, float *a, float *q)
{
    const int64_t j = (int64_t)blockIdx.x * BN_STAT_CH + threadIdx.x;
    for (int64_t c = threadIdx.y; c < chunks; c += BN_STAT_ROWS) {
        a[c * BN_STAT_CH + threadIdx.x] = j < C ? part[2 * c * C + j] : 0.0f;
        q[c * BN_STAT_CH + threadIdx.x] = j < C ? part[(2 * c + 1) * C + j] : 0.0f;
    }
    __syncthreads();
}

/* 0 + v_0 + v_1 + ... + v_{n-1} in that order, v_c = v[c BN_STAT_CH + threadIdx.x] (one
 * channel's values of the chunks, staged by bn_stage): the rule's serial chain, its loads
 * issued ahead of the adds. */
__device__ static float bn_sum_in_order(const float *v, int64_t n)
{
    float s = 0.0f;
#pragma unroll 8
    for (int64_t c = 0; c < n; c++)
        s += v[c * BN_STAT_CH + threadIdx.x];
    return s;
}

/* 1 / sqrt(var + eps) as the CPU reference rounds it. */
__device__ static float bn_invstd(float var, float eps)
{
    return 1.0f / (float)sqrt((double)(var + eps));
}

/* Training statistics of channel j = blockIdx.x BN_STAT_CH + threadIdx.x (blocks of BN_STAT_CH
 * x BN_STAT_ROWS, bn_stat_smem(chunks) bytes) from the chunks' sums (k_bn_part's BN_SUM_XQ), by
 * engine/bn_rule.h's rule: save_mean, save_invstd, the running statistics, and st's mean
 * (st[j]), scale (st[C + j]) and shift (st[2 C + j]) for k_bn_apply. */
__global__ static void __launch_bounds__(BN_STAT_CH * BN_STAT_ROWS)
    k_bn_train_stats(const float *part, int64_t chunks, int64_t rows, int64_t C, int64_t M,
                     float eps, float mom, const void *g, mp_dtype gt, const void *b, mp_dtype bt,
                     void *rm, mp_dtype rmt, void *rv, mp_dtype rvt, void *sm, mp_dtype smt,
                     void *si, mp_dtype sit, float *st)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float *a = (float *)smem, *q = a + chunks * BN_STAT_CH, *means = q + chunks * BN_STAT_CH;
    const int64_t j = (int64_t)blockIdx.x * BN_STAT_CH + threadIdx.x;
    bn_stage(part, chunks, C, a, q);
    if (threadIdx.y == 0)
        means[threadIdx.x] = bn_sum_in_order(a, chunks) / (float)M;
    __syncthreads();
    const float mean = means[threadIdx.x];
    for (int64_t c = threadIdx.y; c < chunks; c += BN_STAT_ROWS) { /* each chunk's own term */
        float *qc = &q[c * BN_STAT_CH + threadIdx.x];
        *qc = MP_BN_CHUNK_DEV(float, a[c * BN_STAT_CH + threadIdx.x], *qc,
                              mp_bn_chunk_n(M, rows, c), mean);
    }
    __syncthreads();
    if (threadIdx.y != 0 || j >= C)
        return;
    const float ss = bn_sum_in_order(q, chunks);
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

/* Backward's per-channel values of channel j = blockIdx.x BN_STAT_CH + threadIdx.x (blocks of
 * BN_STAT_CH x BN_STAT_ROWS, bn_stat_smem(chunks) bytes): dgamma, dbeta, and into st mean,
 * invstd, gamma invstd, sum(dy) / M and sum(dy xhat) / M for k_bn_dx. The two sums run on
 * threads of different warps. */
__global__ static void __launch_bounds__(BN_STAT_CH * BN_STAT_ROWS)
    k_bn_bwd_stats(const float *part, int64_t chunks, int64_t C, int64_t M, const void *g,
                   mp_dtype gt, const void *sm, mp_dtype smt, const void *si, mp_dtype sit,
                   void *dg, mp_dtype dgt, void *db, mp_dtype dbt, float *st)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float *a = (float *)smem, *q = a + chunks * BN_STAT_CH, *sdxs = q + chunks * BN_STAT_CH;
    const int64_t j = (int64_t)blockIdx.x * BN_STAT_CH + threadIdx.x;
    bn_stage(part, chunks, C, a, q);
    float sdy = 0.0f;
    if (threadIdx.y == 0)
        sdy = bn_sum_in_order(a, chunks);
    else if (threadIdx.y == BN_STAT_ROWS / 2)
        sdxs[threadIdx.x] = bn_sum_in_order(q, chunks);
    __syncthreads();
    if (threadIdx.y != 0 || j >= C)
        return;
    const float sdx = sdxs[threadIdx.x], invstd = mp_elem_load_f32(si, sit, j);
    mp_elem_store_f32(dg, dgt, j, sdx);
    mp_elem_store_f32(db, dbt, j, sdy);
    st[j] = mp_elem_load_f32(sm, smt, j);
    st[C + j] = invstd;
    st[2 * C + j] = mp_elem_load_f32(g, gt, j) * invstd;
    st[3 * C + j] = sdy / (float)M;
    st[4 * C + j] = sdx / (float)M;
}

/* dx = gamma invstd (dy - sum(dy) / M - xhat sum(dy xhat) / M) per element (dy through y's mask
 * when y is not NULL). V elements a thread (C a multiple of V). */
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

#endif
