/* Token embedding on the GPU. ids (R, any dtype) hold integers in [0, V); table and dtable are
 * (V, D), y and dy (R, D); every tensor is loaded and stored by its runtime dtype
 * (engine/cast_rule.h). The GPU does not wait to check ids: forward writes a zero row for an id
 * that is not an integer in [0, V) (the CPU reference fails instead), and backward skips it.
 * Backward is deterministic without float atomics: a block owns one vocabulary row v and up to
 * MP_EMB_TILE of its columns (MP_EMB_COLS per thread, accumulated in FP32 registers that start
 * at dtable's old value when accumulating, else 0); it scans all R ids in chunks of one per
 * thread, gathers the chunk's rows with id v in increasing order in shared memory (a ballot per
 * warp, warps in order), and every thread adds those rows of dy to its columns in that order:
 * the CPU's increasing-r sums, bit for bit. The scan costs O(V R) id loads per call. */
#include "engine/backend_cuda/cuda.h"

enum {
    MP_EMB_THREADS = 256,
    MP_EMB_COLS = 8,
    MP_EMB_TILE = MP_EMB_THREADS * MP_EMB_COLS,
    MP_EMB_WARPS = MP_EMB_THREADS / 32,
    MP_EMB_MAX_GRID = 65535
};

/* The row width D of a table (V, D...): the product of its dimensions after the first. */
static int64_t width(const mp_tensor *t)
{
    int64_t d = 1;
    for (int i = 1; i < t->ndim; i++)
        d *= t->shape[i];
    return d;
}

/* Whether element r of ids (dtype it) is the id v (an integer in [0, V) equal to v). */
__device__ static bool id_is(const void *ids, mp_dtype it, int64_t r, int64_t v)
{
    return (double)mp_elem_load_f32(ids, it, r) == (double)v;
}

/* y[r][d] = table[ids[r]][d], or 0 for an invalid id. */
__global__ static void k_emb_fwd(const void *ids, mp_dtype it, const void *table, mp_dtype tt,
                                 void *y, mp_dtype yt, int64_t R, int64_t V, int64_t D)
{
    MP_CUDA_FOR(i, R * D)
    {
        float id = mp_elem_load_f32(ids, it, i / D);
        bool ok = id >= 0.0f && (double)id < (double)V && id == floorf(id);
        float v = ok ? mp_elem_load_f32(table, tt, (int64_t)id * D + i % D) : 0.0f;
        mp_elem_store_f32(y, yt, i, v);
    }
}

extern "C" mp_status mp_cuda_embedding_forward(const mp_tensor *ids, const mp_tensor *table,
                                               mp_tensor *y)
{
    MP_CUDA_DTYPES("embedding_forward", ids, table, y);
    int64_t R = mp_tensor_numel(ids);
    MP_CUDA_REQUIRE(table->ndim >= 1, "embedding_forward");
    int64_t V = table->shape[0], D = width(table);
    MP_CUDA_REQUIRE(mp_tensor_numel(y) == R * D, "embedding_forward");
    if (R * D > 0)
        MP_LAUNCH(k_emb_fwd, mp_cuda_blocks(R * D), 256, ids->data, ids->dtype, table->data,
                  table->dtype, y->data, y->dtype, R, V, D);
    return MP_OK;
}

/* Units u of work: vocabulary row u / tiles, columns from (u % tiles) MP_EMB_TILE. */
__global__ static void k_emb_bwd(const void *ids, mp_dtype it, const void *dy, mp_dtype dyt,
                                 bool accumulate, void *dt, mp_dtype dtt, int64_t R, int64_t V,
                                 int64_t D, int64_t tiles)
{
    __shared__ int64_t hit[MP_EMB_THREADS];
    __shared__ int wcount[MP_EMB_WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int64_t u = blockIdx.x; u < V * tiles; u += gridDim.x) {
        int64_t v = u / tiles, d0 = (u % tiles) * MP_EMB_TILE + threadIdx.x;
        float acc[MP_EMB_COLS];
        for (int k = 0; k < MP_EMB_COLS; k++) {
            int64_t d = d0 + k * MP_EMB_THREADS;
            acc[k] = accumulate && d < D ? mp_elem_load_f32(dt, dtt, v * D + d) : 0.0f;
        }
        for (int64_t r0 = 0; r0 < R; r0 += MP_EMB_THREADS) {
            int64_t r = r0 + threadIdx.x;
            bool match = r < R && id_is(ids, it, r, v);
            unsigned ballot = __ballot_sync(0xffffffffu, match);
            __syncthreads(); /* the previous chunk's readers are done with hit and wcount */
            if (lane == 0)
                wcount[warp] = __popc(ballot);
            __syncthreads();
            int off = 0, n = 0;
            for (int w = 0; w < MP_EMB_WARPS; w++) {
                off += w < warp ? wcount[w] : 0;
                n += wcount[w];
            }
            if (match)
                hit[off + __popc(ballot & ((1u << lane) - 1u))] = r;
            __syncthreads();
            for (int h = 0; h < n; h++)
                for (int k = 0; k < MP_EMB_COLS; k++) {
                    int64_t d = d0 + k * MP_EMB_THREADS;
                    if (d < D)
                        acc[k] += mp_elem_load_f32(dy, dyt, hit[h] * D + d);
                }
        }
        for (int k = 0; k < MP_EMB_COLS; k++) {
            int64_t d = d0 + k * MP_EMB_THREADS;
            if (d < D)
                mp_elem_store_f32(dt, dtt, v * D + d, acc[k]);
        }
    }
}

extern "C" mp_status mp_cuda_embedding_backward(const mp_tensor *ids, const mp_tensor *dy,
                                                bool accumulate, mp_tensor *dtable)
{
    MP_CUDA_DTYPES("embedding_backward", ids, dy, dtable);
    int64_t R = mp_tensor_numel(ids);
    MP_CUDA_REQUIRE(dtable->ndim >= 1, "embedding_backward");
    int64_t V = dtable->shape[0], D = width(dtable);
    MP_CUDA_REQUIRE(mp_tensor_numel(dy) == R * D, "embedding_backward");
    int64_t tiles = (D + MP_EMB_TILE - 1) / MP_EMB_TILE, units = V * tiles;
    int64_t grid = units < (int64_t)MP_EMB_MAX_GRID ? units : (int64_t)MP_EMB_MAX_GRID;
    if (units > 0)
        MP_LAUNCH(k_emb_bwd, (unsigned)grid, MP_EMB_THREADS, ids->data, ids->dtype, dy->data,
                  dy->dtype, accumulate, dtable->data, dtable->dtype, R, V, D, tiles);
    return MP_OK;
}
