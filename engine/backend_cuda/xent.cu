/* Softmax cross-entropy: one warp per row, each lane over columns lane, lane + 32, ... with
 * engine/xent_rule.h's rules (the CPU reference's own): the lanes' arg-max are combined in the
 * rule's order (the first maximum, NaN above numbers, as on the CPU) and their sums added by
 * warp shuffles, then lane 0 forms the row's loss and every lane writes its columns of the
 * gradient (softmax - target) * scale / N, in FP32 with the rule's exponential and the log
 * taken in double. The
 * batch's loss and hit count are summed in the context's scratch (FP64 atomics: the order
 * differs from the CPU's row order) and copied back when the caller asks for them; without a
 * result nothing is copied and the host does not wait. The loss scale is read from the
 * mp_amp_state in device memory. Labels live in device memory; a row whose label is outside
 * [0, C) gets a zero gradient and sets the state's found_inf (the step is skipped) and
 * bad_labels (the trainer ends the run at its next host point, on every rank), and is counted in
 * a scratch counter that persists until the next call that copies a result back, which fails
 * with it when it has no state (evaluation). */
#include "engine/backend_cuda/cuda.h"
#include "engine/xent_rule.h"

/* The warp's arg-max (*v, *j) in mp_xent_before_f32's order, in every lane. */
__device__ static inline void warp_argmax(float *v, int64_t *j)
{
    for (int o = 16; o > 0; o /= 2) {
        float ov = __shfl_down_sync(0xffffffffu, *v, o);
        int64_t oj = __shfl_down_sync(0xffffffffu, *j, o);
        if (mp_xent_before_f32(ov, oj, *v, *j))
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
 * factor is mp_xent_grad_factor(grad_scale, st, rows). */
__global__ static void k_xent(const void *x, mp_dtype dt, const int32_t *labels, int64_t rows,
                              int64_t cols, double eps, double grad_scale, mp_amp_state *st,
                              void *dx, double *out)
{
    int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    const mp_xent_coef_f32 c =
        mp_xent_coef_f32_make(eps, mp_xent_grad_factor(grad_scale, st, rows), cols);
    const mp_xent_span s = {x, dx, dt, r * cols, lane, 32};
    int32_t y = labels[r];
    if (!mp_xent_label_ok(y, cols)) {
        if (lane == 0) {
            atomicAdd(&out[2], 1.0);
            mp_xent_bad_label(st); /* every writer stores the same value */
        }
        if (dx)
            mp_xent_grad_f32(&c, &s, 0.0f, y);
        return;
    }
    float mx = -INFINITY, sum = 0.0f, zsum = 0.0f;
    int64_t best = cols;
    mp_xent_max_f32(&s, &c, &mx, &best);
    warp_argmax(&mx, &best);
    mp_xent_sums_f32(&s, &c, mx, &sum, &zsum);
    sum = warp_sum(sum);
    zsum = warp_sum(zsum);
    float lse = mp_xent_lse_f32(mx, sum);
    if (lane == 0) {
        float xy = mp_elem_load_f32(x, dt, s.base + y);
        atomicAdd(&out[0], (double)mp_xent_loss_f32(&c, lse, xy, zsum));
        atomicAdd(&out[1], best == y ? 1.0 : 0.0);
    }
    if (dx)
        mp_xent_grad_f32(&c, &s, lse, y);
}

extern "C" mp_status mp_cuda_softmax_xent(const mp_tensor *logits, const int32_t *labels,
                                          double smoothing, double grad_scale,
                                          mp_amp_state *st, mp_xent_result *out,
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
              cols, smoothing, grad_scale, st, dlogits ? dlogits->data : NULL, c->scratch);
    if (!out)
        return MP_OK;
    MP_TRY(mp_cuda_copy_out(c->host_scratch, c->scratch, 3 * sizeof(double)));
    if (c->host_scratch[2] != 0.0) {
        CUDA_CHECK(cudaMemsetAsync(&c->scratch[2], 0, sizeof(double), c->stream));
        /* In training the state's bad_labels, agreed by every rank, ends the run at the host
         * point: failing here, on this rank alone, would leave the others in a collective. */
        if (!st)
            return mp_fail(MP_EINTERNAL, "cuda softmax_xent: %.0f labels outside [0, %lld)",
                           c->host_scratch[2], (long long)cols);
    }
    out->loss = (double)(float)(c->host_scratch[0] / (double)rows);
    out->correct = (int64_t)c->host_scratch[1];
    return MP_OK;
}
