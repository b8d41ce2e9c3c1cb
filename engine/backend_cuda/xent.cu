/* Softmax cross-entropy: one warp per row computes the log-sum-exp, the smoothed loss, the
 * arg-max (the first maximum, as on the CPU) and the gradient (softmax - target) * scale / N, in
 * FP32 with exp and log taken in double and rounded, as the CPU reference does. The batch's loss
 * and hit count are summed in the context's scratch (FP64 atomics: the order differs from the
 * CPU's row order) and copied back when the caller asks for them; without a result nothing is
 * copied and the host does not wait. The loss scale is read from the mp_amp_state in device
 * memory. Labels live in device memory; one outside [0, C) is counted in a scratch counter
 * that persists until the next call that copies a result back, which reports it. */
#include "engine/backend_cuda/cuda.h"

/* The warp's maximum with the smallest index among equal values. */
__device__ static inline void warp_argmax(float *v, int64_t *j)
{
    for (int o = 16; o > 0; o /= 2) {
        float ov = __shfl_down_sync(0xffffffffu, *v, o);
        int64_t oj = __shfl_down_sync(0xffffffffu, *j, o);
        if (ov > *v || (ov == *v && oj < *j))
            *v = ov, *j = oj;
    }
    *v = __shfl_sync(0xffffffffu, *v, 0);
    *j = __shfl_sync(0xffffffffu, *j, 0);
}

__device__ static inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

/* out[0] += loss of each row, out[1] += hits, out[2] += labels out of range. The gradient
 * factor is grad_scale * *scale / rows (scale NULL: 1), rounded to FP32 as on the CPU. */
__global__ static void k_xent(const void *x, mp_dtype dt, const int32_t *labels, int64_t rows,
                              int64_t cols, float eps, double grad_scale, const double *scale,
                              void *dx, double *out)
{
    float g = (float)(grad_scale * (scale ? *scale : 1.0) / (double)rows);
    int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    int32_t y = labels[r];
    if (y < 0 || y >= cols) {
        if (lane == 0)
            atomicAdd(&out[2], 1.0);
        return;
    }
    int64_t base = r * cols;
    float mx = -INFINITY;
    int64_t best = cols;
    for (int64_t j = lane; j < cols; j += 32) {
        float v = mp_cu_ld(x, dt, base + j);
        if (v > mx || best == cols)
            mx = v, best = j;
    }
    warp_argmax(&mx, &best);
    float sum = 0.0f, zsum = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) {
        float v = mp_cu_ld(x, dt, base + j);
        sum += (float)exp((double)(v - mx));
        zsum += v;
    }
    sum = warp_sum(sum);
    zsum = warp_sum(zsum);
    float lse = mx + (float)log((double)sum);
    float on = 1.0f - eps, off = eps / (float)cols;
    if (lane == 0) {
        float loss = on * (lse - mp_cu_ld(x, dt, base + y)) + eps * (lse - zsum / (float)cols);
        atomicAdd(&out[0], (double)loss);
        atomicAdd(&out[1], best == y ? 1.0 : 0.0);
    }
    if (dx)
        for (int64_t j = lane; j < cols; j += 32) {
            float p = (float)exp((double)(mp_cu_ld(x, dt, base + j) - lse));
            mp_cu_st(dx, dt, base + j, (p - (j == y ? on + off : off)) * g);
        }
}

extern "C" mp_status mp_cuda_softmax_xent(const mp_tensor *logits, const int32_t *labels,
                                          double smoothing, double grad_scale,
                                          const mp_amp_state *st, mp_xent_result *out,
                                          mp_tensor *dlogits)
{
    MP_CUDA_DTYPES("softmax_xent", logits, dlogits);
    int64_t rows = logits->shape[0], cols = mp_tensor_row(logits);
    MP_CUDA_REQUIRE(rows > 0 && cols > 0, "softmax_xent");
    MP_CUDA_REQUIRE(!dlogits || (mp_tensor_numel(dlogits) == rows * cols &&
                                 dlogits->dtype == logits->dtype),
                    "softmax_xent");
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    CUDA_CHECK(cudaMemsetAsync(c->scratch, 0, 2 * sizeof(double), c->stream));
    MP_LAUNCH(k_xent, (unsigned)((rows + 7) / 8), 256, logits->data, logits->dtype, labels, rows,
              cols, (float)smoothing, grad_scale, st ? &st->scaler.scale : NULL,
              dlogits ? dlogits->data : NULL, c->scratch);
    if (!out)
        return MP_OK;
    MP_TRY(mp_cuda_copy_out(c->host_scratch, c->scratch, 3 * sizeof(double)));
    if (c->host_scratch[2] != 0.0) {
        CUDA_CHECK(cudaMemsetAsync(&c->scratch[2], 0, sizeof(double), c->stream));
        return mp_fail(MP_EINTERNAL, "cuda softmax_xent: %.0f labels outside [0, %lld)",
                       c->host_scratch[2], (long long)cols);
    }
    out->loss = (double)(float)(c->host_scratch[0] / (double)rows);
    out->correct = (int64_t)c->host_scratch[1];
    return MP_OK;
}
