/* Batch normalisation on the GPU over (N, H, W) per channel of an NHWC tensor (x of any rank is
 * seen as (M, C), C its last dimension), with our own kernels and the CPU reference's semantics
 * and FP32 operations (engine/backend_cpu/batchnorm.c), its sums in the same order
 * (engine/bn_rule.h), so that every result is the CPU's bits: the batch mean and the biased
 * variance by the rule's chunks (each chunk's sum, then its squares about its own mean in a
 * second sweep that finds the chunk in L2, the chunks' terms added in order),
 * invstd = 1 / sqrt(var + eps) (the square root in double, then rounded, as the CPU does), the
 * running statistics updated with the unbiased variance
 * (running = (1 - momentum) running + momentum batch), y = (x - mean) scale + beta with scale = invstd gamma; backward dgamma = sum(dy xhat),
 * dbeta = sum(dy), dx = gamma invstd (dy - sum(dy) / M - xhat sum(dy xhat) / M). All in FP32;
 * every tensor is loaded and stored by its runtime dtype (engine/cast_rule.h), so FP32, fp16
 * and bf16 data and per-channel tensors of any of them need no conversion copies.
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
 * order, the CPU's: blocks of 32 x MP_BN_LANES threads sum 32 channels over a chunk of rows
 * (thread y one lane, the lanes added in order), and one thread per channel adds the chunks'
 * partials in chunk order; the results are deterministic and the CPU's bits. The FP32 scratch
 * (2 C floats a chunk and MP_BN_STATS C floats of per-channel values) is mp_cuda_grow's. */
#include <limits.h>

#include "engine/backend_cuda/cuda.h"
#include "engine/bn_rule.h"
#include "engine/elem_rule.h"

enum { MP_BN_STATS = 5 };

/* What k_bn_part sums per channel j: x, then (x - the chunk's mean)^2; dy and
 * dy (x - mean) invstd. */
enum { BN_SUM_XQ, BN_SUM_DY };

static void *mp_bn_scratch;
static size_t mp_bn_scratch_bytes;

/* dy's element i (dtype dyt), or 0 where the fused ReLU's output y (x's dtype xt; NULL: no
 * ReLU) did not pass it: relu_backward's value, read where it is used. */
__device__ static float bn_dy(const void *dy, mp_dtype dyt, const void *y, mp_dtype xt, int64_t i)
{
    if (y && !mp_relu_passes_f32(mp_elem_load_f32(y, xt, i)))
        return 0.0f;
    return mp_elem_load_f32(dy, dyt, i);
}

/* Chunk blockIdx.y's two sums of channels blockIdx.x * 32 + threadIdx.x over its rows
 * [chunk rows, min((chunk + 1) rows, M)), into part[2 chunk C + j] and part[(2 chunk + 1) C + j]:
 * BN_SUM_XQ the sum of x, then, in a second sweep over the same rows (from L2 mostly), the sum
 * of (x - the chunk's mean)^2 (engine/bn_rule.h's variance rule); BN_SUM_DY the sums of dy and
 * of dy (x - mean) invstd, mean and invstd per-channel tensors of dtypes mt and it. Thread y is
 * lane y of the rule, and the lanes are added in order. Blocks of 32 x MP_BN_LANES. */
__global__ static void k_bn_part(int what, const void *x, mp_dtype xt, const void *y,
                                 const void *dy, mp_dtype dyt, const void *mean, mp_dtype mt,
                                 const void *invstd, mp_dtype it, float *part, int64_t M,
                                 int64_t C, int64_t rows)
{
    __shared__ float p1[MP_BN_LANES][33], p2[MP_BN_LANES][33], cm[32];
    const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
    const int64_t n = mp_bn_chunk_n(M, rows, chunk), r0 = chunk * rows, r1 = r0 + n;
    float s1 = 0.0f, s2 = 0.0f;
    if (j < C) {
        const float m = what == BN_SUM_DY ? mp_elem_load_f32(mean, mt, j) : 0.0f;
        const float inv = what == BN_SUM_DY ? mp_elem_load_f32(invstd, it, j) : 0.0f;
        for (int64_t r = r0 + threadIdx.y; r < r1; r += MP_BN_LANES) {
            float v = mp_elem_load_f32(x, xt, r * C + j);
            if (what == BN_SUM_XQ) {
                s1 += v;
            } else {
                float g = bn_dy(dy, dyt, y, xt, r * C + j);
                s1 += g;
                s2 += g * ((v - m) * inv);
            }
        }
    }
    p1[threadIdx.y][threadIdx.x] = s1;
    p2[threadIdx.y][threadIdx.x] = s2;
    __syncthreads();
    float t1 = 0.0f, t2 = 0.0f;
    if (threadIdx.y == 0 && j < C) {
        for (int q = 0; q < MP_BN_LANES; q++) {
            t1 += p1[q][threadIdx.x];
            t2 += p2[q][threadIdx.x];
        }
        cm[threadIdx.x] = MP_BN_CHUNK_MEAN(float, t1, n);
    }
    if (what == BN_SUM_XQ) { /* the second sweep, about the chunk's mean */
        __syncthreads();
        s2 = 0.0f;
        if (j < C) {
            const float m = cm[threadIdx.x];
            for (int64_t r = r0 + threadIdx.y; r < r1; r += MP_BN_LANES) {
                float d = mp_elem_load_f32(x, xt, r * C + j) - m;
                s2 += d * d;
            }
        }
        p2[threadIdx.y][threadIdx.x] = s2;
        __syncthreads();
        t2 = 0.0f;
        if (threadIdx.y == 0 && j < C)
            for (int q = 0; q < MP_BN_LANES; q++)
                t2 += p2[q][threadIdx.x];
    }
    if (threadIdx.y == 0 && j < C) {
        part[2 * chunk * C + j] = t1;
        part[(2 * chunk + 1) * C + j] = t2;
    }
}

/* Sum k (0 or 1) of channel j over the chunks, added in chunk order. */
__device__ static float chunk_sum(const float *part, int64_t chunks, int64_t C, int64_t j, int k)
{
    float s = 0.0f;
    for (int64_t c = 0; c < chunks; c++)
        s += part[(2 * c + k) * C + j];
    return s;
}

/* 1 / sqrt(var + eps) as the CPU reference rounds it. */
__device__ static float bn_invstd(float var, float eps)
{
    return 1.0f / (float)sqrt((double)(var + eps));
}

/* Training statistics of channel j from the chunks' sums (k_bn_part's BN_SUM_XQ), by
 * engine/bn_rule.h's rule: save_mean, save_invstd, the running statistics, and st's mean
 * (st[j]), scale (st[C + j]) and shift (st[2 C + j]) for k_bn_apply. */
__global__ static void k_bn_train_stats(const float *part, int64_t chunks, int64_t rows,
                                        int64_t C, int64_t M, float eps, float mom, const void *g,
                                        mp_dtype gt, const void *b, mp_dtype bt, void *rm,
                                        mp_dtype rmt, void *rv, mp_dtype rvt, void *sm,
                                        mp_dtype smt, void *si, mp_dtype sit, float *st)
{
    MP_CUDA_FOR(j, C)
    {
        const float mean = chunk_sum(part, chunks, C, j, 0) / (float)M;
        float ss = 0.0f;
        for (int64_t k = 0; k < chunks; k++)
            ss += MP_BN_CHUNK_DEV(float, part[2 * k * C + j], part[(2 * k + 1) * C + j],
                                  mp_bn_chunk_n(M, rows, k), mean);
        st[j] = mean;
        float invstd = bn_invstd(ss / (float)M, eps), unbiased = ss / (float)(M - 1);
        mp_elem_store_f32(sm, smt, j, mean);
        mp_elem_store_f32(si, sit, j, invstd);
        mp_elem_store_f32(rm, rmt, j, (1.0f - mom) * mp_elem_load_f32(rm, rmt, j) + mom * mean);
        mp_elem_store_f32(rv, rvt, j,
                          (1.0f - mom) * mp_elem_load_f32(rv, rvt, j) + mom * unbiased);
        st[C + j] = invstd * mp_elem_load_f32(g, gt, j);
        st[2 * C + j] = mp_elem_load_f32(b, bt, j);
    }
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
 * ReLU. */
__global__ static void k_bn_apply(const void *x, mp_dtype xt, void *y, mp_dtype yt, int64_t n,
                                  int64_t C, const float *st, bool relu)
{
    MP_CUDA_FOR(i, n)
    {
        unsigned c = (unsigned)i % (unsigned)C;
        float v = (mp_elem_load_f32(x, xt, i) - st[c]) * st[C + c] + st[2 * C + c];
        mp_elem_store_f32(y, yt, i, relu ? mp_relu_f32(v) : v);
    }
}

/* Backward's per-channel values: dgamma, dbeta, and into st mean, invstd, gamma invstd,
 * sum(dy) / M and sum(dy xhat) / M for k_bn_dx. */
__global__ static void k_bn_bwd_stats(const float *part, int64_t chunks, int64_t C, int64_t M,
                                      const void *g, mp_dtype gt, const void *sm, mp_dtype smt,
                                      const void *si, mp_dtype sit, void *dg, mp_dtype dgt,
                                      void *db, mp_dtype dbt, float *st)
{
    MP_CUDA_FOR(j, C)
    {
        float sdy = chunk_sum(part, chunks, C, j, 0), sdx = chunk_sum(part, chunks, C, j, 1);
        float invstd = mp_elem_load_f32(si, sit, j);
        mp_elem_store_f32(dg, dgt, j, sdx);
        mp_elem_store_f32(db, dbt, j, sdy);
        st[j] = mp_elem_load_f32(sm, smt, j);
        st[C + j] = invstd;
        st[2 * C + j] = mp_elem_load_f32(g, gt, j) * invstd;
        st[3 * C + j] = sdy / (float)M;
        st[4 * C + j] = sdx / (float)M;
    }
}

/* dx = gamma invstd (dy - sum(dy) / M - xhat sum(dy xhat) / M) per element (dy through y's
 * mask when y is not NULL). */
__global__ static void k_bn_dx(const void *x, mp_dtype xt, const void *y, const void *dy,
                               mp_dtype dyt, void *dx, mp_dtype dxt, int64_t n, int64_t C,
                               const float *st)
{
    MP_CUDA_FOR(i, n)
    {
        unsigned c = (unsigned)i % (unsigned)C;
        float xhat = (mp_elem_load_f32(x, xt, i) - st[c]) * st[C + c];
        float g = bn_dy(dy, dyt, y, xt, i);
        mp_elem_store_f32(dx, dxt, i, st[2 * C + c] * (g - st[3 * C + c] - xhat * st[4 * C + c]));
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

/* The column sums' layout for M >= 1 rows of C channels: *chunks chunks of *rows rows
 * (mp_bn_chunks), and the scratch: *part (2 C floats a chunk) followed by *st (MP_BN_STATS C
 * floats). */
static mp_status bn_layout(int64_t M, int64_t C, int64_t *chunks, int64_t *rows, float **part,
                           float **st)
{
    *chunks = mp_bn_chunks(M, rows);
    MP_TRY(mp_cuda_grow(&mp_bn_scratch, &mp_bn_scratch_bytes,
                        (size_t)((2 * *chunks + MP_BN_STATS) * C) * sizeof(float)));
    *part = (float *)mp_bn_scratch;
    *st = *part + 2 * *chunks * C;
    return MP_OK;
}

/* Launches k_bn_part over x (and dy, masked by y when y is not NULL) of M rows, C channels. */
static mp_status bn_part(int what, const mp_tensor *x, const mp_tensor *y, const mp_tensor *dy,
                         const void *mean, mp_dtype mt, const void *invstd, mp_dtype it,
                         float *part, int64_t M, int64_t C, int64_t chunks, int64_t rows)
{
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)chunks);
    MP_LAUNCH(k_bn_part, grid, dim3(32, MP_BN_LANES), what, x->data, x->dtype,
              y ? y->data : NULL, dy ? dy->data : NULL, dy ? dy->dtype : MP_F32, mean, mt, invstd,
              it, part, M, C, rows);
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
    int64_t chunks, rows;
    float *part, *st;
    MP_TRY(bn_layout(M, C, &chunks, &rows, &part, &st));
    const float eps = (float)a->eps;
    unsigned cb = mp_cuda_blocks(C);
    if (train) {
        MP_TRY(bn_part(BN_SUM_XQ, x, NULL, NULL, NULL, MP_F32, NULL, MP_F32, part, M, C, chunks,
                       rows));
        MP_LAUNCH(k_bn_train_stats, cb, 256, part, chunks, rows, C, M, eps, (float)a->momentum,
                  gamma->data, gamma->dtype, beta->data, beta->dtype, running_mean->data,
                  running_mean->dtype, running_var->data, running_var->dtype, save_mean->data,
                  save_mean->dtype, save_invstd->data, save_invstd->dtype, st);
    } else {
        MP_LAUNCH(k_bn_eval_stats, cb, 256, C, eps, gamma->data, gamma->dtype, beta->data,
                  beta->dtype, running_mean->data, running_mean->dtype, running_var->data,
                  running_var->dtype, st);
    }
    MP_LAUNCH(k_bn_apply, mp_cuda_blocks(M * C), 256, x->data, x->dtype, y->data, y->dtype,
              M * C, C, st, a->relu);
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
    int64_t chunks, rows;
    float *part, *st;
    MP_TRY(bn_layout(M, C, &chunks, &rows, &part, &st));
    MP_TRY(bn_part(BN_SUM_DY, x, mask, dy, save_mean->data, save_mean->dtype, save_invstd->data,
                   save_invstd->dtype, part, M, C, chunks, rows));
    MP_LAUNCH(k_bn_bwd_stats, mp_cuda_blocks(C), 256, part, chunks, C, M, gamma->data,
              gamma->dtype, save_mean->data, save_mean->dtype, save_invstd->data,
              save_invstd->dtype, dgamma->data, dgamma->dtype, dbeta->data, dbeta->dtype, st);
    if (dx)
        MP_LAUNCH(k_bn_dx, mp_cuda_blocks(M * C), 256, x->data, x->dtype,
                  mask ? mask->data : NULL, dy->data, dy->dtype, dx->data, dx->dtype, M * C, C,
                  st);
    return MP_OK;
}
