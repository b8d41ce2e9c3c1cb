/* Inverted dropout with the mask of engine/dropout_mask.h (the CPU's own, bit for bit):
 * y = x * (keep ? 1 / (1 - p) : 0) in FP32, rounded once; inf and NaN propagate through dropped
 * elements as on the CPU. y may alias x. The counters' offset is mp_mask_offset(offset, step),
 * step read by the kernel (device memory), so a graph replays the step it holds then. */
#include "engine/backend_cuda/cuda.h"
#include "engine/dropout_mask.h"

__global__ static void k_dropout(const void *x, void *y, mp_dtype dt, int64_t n, uint64_t key,
                                 uint64_t offset, const int64_t *step, uint64_t thr, float scale)
{
    const uint64_t at = mp_mask_offset(offset, step);
    MP_CUDA_FOR(i, n)
    {
        bool keep = mp_dropout_keep(key, at + (uint64_t)i, thr);
        mp_elem_store_f32(y, dt, i, mp_elem_load_f32(x, dt, i) * (keep ? scale : 0.0f));
    }
}

static mp_status dropout(const char *op, double p, uint64_t seed, uint64_t offset,
                         const int64_t *step, const mp_tensor *x, mp_tensor *y)
{
    MP_CUDA_DTYPES(op, x, y);
    int64_t n = mp_tensor_numel(x);
    MP_CUDA_REQUIRE(p >= 0 && p < 1, op);
    MP_CUDA_REQUIRE(mp_tensor_numel(y) == n && y->dtype == x->dtype, op);
    if (n)
        MP_LAUNCH(k_dropout, mp_cuda_blocks(n), 256, x->data, y->data, x->dtype, n,
                  mp_dropout_key(seed), offset, step, mp_dropout_threshold(p),
                  (float)(1.0 / (1.0 - p)));
    return MP_OK;
}

extern "C" mp_status mp_cuda_dropout_forward(double p, uint64_t seed, uint64_t offset,
                                             const int64_t *step, const mp_tensor *x,
                                             mp_tensor *y)
{
    return dropout("dropout_forward", p, seed, offset, step, x, y);
}

extern "C" mp_status mp_cuda_dropout_backward(double p, uint64_t seed, uint64_t offset,
                                              const int64_t *step, const mp_tensor *dy,
                                              mp_tensor *dx)
{
    return dropout("dropout_backward", p, seed, offset, step, dy, dx);
}
