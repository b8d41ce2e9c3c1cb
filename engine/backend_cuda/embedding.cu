/* Token embedding on the GPU. ids (R, any dtype) hold integers in [0, V); table and dtable are
 * (V, D), y and dy (R, D); every tensor is loaded and stored by its runtime dtype
 * (engine/cast_rule.h). The GPU does not wait to check ids: forward writes a zero row for an id
 * that is not an integer in [0, V) (the CPU reference fails instead), and backward skips it.
 * Backward's kernel (engine/backend_cuda/embedding_kernels.cuh) is deterministic without float
 * atomics and gives the CPU's increasing-r sums bit for bit. */
#include "engine/backend_cuda/cuda.h"

#include "engine/backend_cuda/embedding_kernels.cuh"

/* The row width D of a table (V, D...): the product of its dimensions after the first. */
static int64_t width(const mp_tensor *t)
{
    int64_t d = 1;
    for (int i = 1; i < t->ndim; i++)
        d *= t->shape[i];
    return d;
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
        MP_LAUNCH_SMEM(k_emb_bwd, (unsigned)grid, MP_EMB_THREADS, MP_EMB_SMEM, ids->data,
                       ids->dtype, dy->data, dy->dtype, accumulate, dtable->data, dtable->dtype,
                       R, V, D, tiles);
    return MP_OK;
}
