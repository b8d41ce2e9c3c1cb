/* LayerNorm on the GPU over the last dimension C = numel(gamma), the CPU reference's semantics
 * (engine/backend_cpu/layernorm.c): per row the mean and the biased variance in FP32, two passes
 * (the second over x - mean), invstd = 1 / sqrtf(var + eps), y = (x - mean) invstd gamma + beta
 * rounded once; every tensor loaded and stored by its runtime dtype (engine/cast_rule.h).
 * One block of MP_LN_THREADS threads per row (a grid-stride loop over rows); a row's sums are
 * the threads' strided partial sums reduced in a fixed tree (block_sum), so the statistics are
 * the same bits in forward and backward, and every result is deterministic.
 * Backward: one kernel per row recomputes the statistics (keeping them in scratch) and writes
 * dx; dgamma and dbeta are column sums of dy xhat and dy, formed without atomics: each block of
 * 32 x 8 threads sums 32 columns over a chunk of MP_LN_CHUNK rows (8 strided partials added in
 * order), and a last kernel adds the chunks' partials in chunk order. The scratch (2 floats a
 * row, 2 C floats a chunk) is device memory grown on demand, never shrunk. The column sums read
 * x and dy after dx is written, so dx may alias neither. */
#include "engine/backend_cuda/cuda.h"

enum { MP_LN_THREADS = 256, MP_LN_CHUNK = 256, MP_LN_MAX_GRID = 65535 };

static void *mp_ln_scratch; /* backward's row statistics and column partials */
static size_t mp_ln_scratch_bytes;

/* The sum over the block of each thread's v, the same bits in every thread: a butterfly within
 * each warp, then the warps' sums in warp order. sh holds 32 floats of shared memory. Every
 * thread of the block must call it. */
__device__ static float block_sum(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* a previous call's readers are done with sh */
    if (threadIdx.x % 32 == 0)
        sh[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.0f;
    for (int w = 0; w < MP_LN_THREADS / 32; w++)
        s += sh[w];
    return s;
}

/* The mean and invstd of row x[base .. base + C) (dtype xt), in every thread of the block. */
__device__ static void row_stats(const void *x, mp_dtype xt, int64_t base, int64_t C, float eps,
                                 float *sh, float *mean, float *invstd)
{
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < C; j += MP_LN_THREADS)
        s += mp_elem_load_f32(x, xt, base + j);
    float m = block_sum(s, sh) / (float)C;
    s = 0.0f;
    for (int64_t j = threadIdx.x; j < C; j += MP_LN_THREADS) {
        float d = mp_elem_load_f32(x, xt, base + j) - m;
        s += d * d;
    }
    float var = block_sum(s, sh) / (float)C;
    *mean = m;
    *invstd = 1.0f / sqrtf(var + eps);
}

__global__ static void k_ln_fwd(const void *x, mp_dtype xt, const void *g, mp_dtype gt,
                                const void *b, mp_dtype bt, void *y, mp_dtype yt, int64_t rows,
                                int64_t C, float eps)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float mean, invstd;
        row_stats(x, xt, r * C, C, eps, sh, &mean, &invstd);
        for (int64_t j = threadIdx.x; j < C; j += MP_LN_THREADS) {
            float v = mp_elem_load_f32(x, xt, r * C + j) - mean;
            v = v * invstd * mp_elem_load_f32(g, gt, j) + mp_elem_load_f32(b, bt, j);
            mp_elem_store_f32(y, yt, r * C + j, v);
        }
    }
}

/* Row statistics into stats (mean, invstd per row) and, when dx is not NULL,
 * dx = invstd (gg - mean(gg) - xhat mean(gg xhat)) with gg = dy gamma. */
__global__ static void k_ln_bwd_rows(const void *x, mp_dtype xt, const void *dy, mp_dtype dyt,
                                     const void *g, mp_dtype gt, void *dx, mp_dtype dxt,
                                     float *stats, int64_t rows, int64_t C, float eps)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float mean, invstd;
        row_stats(x, xt, r * C, C, eps, sh, &mean, &invstd);
        if (threadIdx.x == 0) {
            stats[2 * r] = mean;
            stats[2 * r + 1] = invstd;
        }
        if (!dx)
            continue;
        float s1 = 0.0f, s2 = 0.0f;
        for (int64_t j = threadIdx.x; j < C; j += MP_LN_THREADS) {
            float xhat = (mp_elem_load_f32(x, xt, r * C + j) - mean) * invstd;
            float gg = mp_elem_load_f32(dy, dyt, r * C + j) * mp_elem_load_f32(g, gt, j);
            s1 += gg;
            s2 += gg * xhat;
        }
        float m1 = block_sum(s1, sh) / (float)C;
        float m2 = block_sum(s2, sh) / (float)C;
        for (int64_t j = threadIdx.x; j < C; j += MP_LN_THREADS) {
            float xhat = (mp_elem_load_f32(x, xt, r * C + j) - mean) * invstd;
            float gg = mp_elem_load_f32(dy, dyt, r * C + j) * mp_elem_load_f32(g, gt, j);
            mp_elem_store_f32(dx, dxt, r * C + j, invstd * (gg - m1 - xhat * m2));
        }
    }
}

/* Chunk c's partial column sums: part[2 c C + j] = sum of dy xhat, part[(2 c + 1) C + j] = sum
 * of dy over rows [c MP_LN_CHUNK, (c + 1) MP_LN_CHUNK) of column j. Blocks of 32 x 8. */
__global__ static void k_ln_bwd_part(const void *x, mp_dtype xt, const void *dy, mp_dtype dyt,
                                     const float *stats, float *part, int64_t rows, int64_t C,
                                     int64_t chunks)
{
    __shared__ float pg[8][33], pb[8][33];
    int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
    for (int64_t c = blockIdx.y; c < chunks; c += gridDim.y) {
        int64_t r1 = (c + 1) * MP_LN_CHUNK < rows ? (c + 1) * MP_LN_CHUNK : rows;
        float sg = 0.0f, sb = 0.0f;
        if (j < C)
            for (int64_t r = c * MP_LN_CHUNK + threadIdx.y; r < r1; r += 8) {
                float d = mp_elem_load_f32(dy, dyt, r * C + j);
                float xhat = (mp_elem_load_f32(x, xt, r * C + j) - stats[2 * r]) *
                             stats[2 * r + 1];
                sg += d * xhat;
                sb += d;
            }
        pg[threadIdx.y][threadIdx.x] = sg;
        pb[threadIdx.y][threadIdx.x] = sb;
        __syncthreads();
        if (threadIdx.y == 0 && j < C) {
            float tg = 0.0f, tb = 0.0f;
            for (int q = 0; q < 8; q++) {
                tg += pg[q][threadIdx.x];
                tb += pb[q][threadIdx.x];
            }
            part[2 * c * C + j] = tg;
            part[(2 * c + 1) * C + j] = tb;
        }
        __syncthreads(); /* pg and pb are read before the next chunk writes them */
    }
}

/* dgamma[j], dbeta[j]: the chunks' partials of column j added in chunk order, rounded once. */
__global__ static void k_ln_bwd_sum(const float *part, int64_t chunks, int64_t C, void *dg,
                                    mp_dtype dgt, void *db, mp_dtype dbt)
{
    MP_CUDA_FOR(j, C)
    {
        float tg = 0.0f, tb = 0.0f;
        for (int64_t c = 0; c < chunks; c++) {
            tg += part[2 * c * C + j];
            tb += part[(2 * c + 1) * C + j];
        }
        mp_elem_store_f32(dg, dgt, j, tg);
        mp_elem_store_f32(db, dbt, j, tb);
    }
}

/* The scratch of at least n floats. */
static mp_status ln_scratch(size_t n, float **out)
{
    MP_TRY(mp_cuda_grow(&mp_ln_scratch, &mp_ln_scratch_bytes, n * sizeof(float)));
    *out = (float *)mp_ln_scratch;
    return MP_OK;
}

static unsigned row_blocks(int64_t rows)
{
    return (unsigned)(rows < (int64_t)MP_LN_MAX_GRID ? rows : (int64_t)MP_LN_MAX_GRID);
}

extern "C" mp_status mp_cuda_layernorm_forward(double eps, const mp_tensor *x,
                                               const mp_tensor *gamma, const mp_tensor *beta,
                                               mp_tensor *y)
{
    MP_CUDA_DTYPES("layernorm_forward", x, gamma, beta, y);
    int64_t C = mp_tensor_numel(gamma), n = mp_tensor_numel(x);
    MP_CUDA_REQUIRE(eps >= 0 && C >= 1 && n % C == 0, "layernorm_forward");
    MP_CUDA_REQUIRE(mp_tensor_numel(beta) == C && mp_tensor_numel(y) == n, "layernorm_forward");
    int64_t rows = n / C;
    if (rows)
        MP_LAUNCH(k_ln_fwd, row_blocks(rows), MP_LN_THREADS, x->data, x->dtype, gamma->data,
                  gamma->dtype, beta->data, beta->dtype, y->data, y->dtype, rows, C,
                  (float)eps);
    return MP_OK;
}

extern "C" mp_status mp_cuda_layernorm_backward(double eps, const mp_tensor *x,
                                                const mp_tensor *dy, const mp_tensor *gamma,
                                                mp_tensor *dx, mp_tensor *dgamma,
                                                mp_tensor *dbeta)
{
    MP_CUDA_DTYPES("layernorm_backward", x, dy, gamma, dx, dgamma, dbeta);
    int64_t C = mp_tensor_numel(gamma), n = mp_tensor_numel(x);
    MP_CUDA_REQUIRE(eps >= 0 && C >= 1 && n % C == 0, "layernorm_backward");
    MP_CUDA_REQUIRE(mp_tensor_numel(dy) == n && (!dx || mp_tensor_numel(dx) == n),
                    "layernorm_backward");
    MP_CUDA_REQUIRE(mp_tensor_numel(dgamma) == C && mp_tensor_numel(dbeta) == C,
                    "layernorm_backward");
    int64_t rows = n / C, chunks = (rows + MP_LN_CHUNK - 1) / MP_LN_CHUNK;
    float *stats;
    MP_TRY(ln_scratch((size_t)(2 * rows + 2 * chunks * C), &stats));
    float *part = stats + 2 * rows;
    if (rows) {
        MP_LAUNCH(k_ln_bwd_rows, row_blocks(rows), MP_LN_THREADS, x->data, x->dtype, dy->data,
                  dy->dtype, gamma->data, gamma->dtype, dx ? dx->data : NULL,
                  dx ? dx->dtype : MP_F32, stats, rows, C, (float)eps);
        dim3 grid((unsigned)((C + 31) / 32), row_blocks(chunks));
        MP_LAUNCH(k_ln_bwd_part, grid, dim3(32, 8), x->data, x->dtype, dy->data, dy->dtype,
                  stats, part, rows, C, chunks);
    }
    MP_LAUNCH(k_ln_bwd_sum, mp_cuda_blocks(C), 256, part, chunks, C, dgamma->data,
              dgamma->dtype, dbeta->data, dbeta->dtype);
    return MP_OK;
}
