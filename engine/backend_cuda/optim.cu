/* The fused mixed-precision kernels over the flat buffers:
 * - optimizer steps (SGD, Adam, AdamW) that read the device overflow flag and scale when given
 *   an mp_amp_state, do nothing when the step overflowed, update the FP32 masters (or the half
 *   parameters at O3) and write the half copy in the same pass. The arithmetic is
 *   engine/optim_rule.h's, shared with the CPU reference, and this backend is compiled without
 *   FMA contraction, so FP32 masters come out bitwise equal to the CPU's.
 * - the unscale-and-check pass (sum of squares in FP64, non-finite flag, the largest |gradient|
 *   as the scaler's fill) into the state or, for grad_stats, into the context's scratch handed
 *   back to the host: each element is engine/check_rule.h's, as on the CPU, and the partial
 *   results are combined by warp shuffles, shared memory and atomics;
 * - the revert of a skipped step's BatchNorm statistics (amp_revert), reading the flag;
 * - the loss scaler's update: mp_scaler_update itself, in a one-thread kernel on device state. */
#include "engine/backend_cuda/cuda.h"
#include "engine/check_rule.h"
#include "engine/optim_rule.h"

__global__ static void k_optim(mp_optim_args a, const mp_amp_state *st, void *w, mp_dtype wt,
                               void *copy, mp_dtype ct, const void *g, mp_dtype gt, float *m1,
                               float *m2, int64_t n)
{
    __shared__ mp_optim_coef_f32 sc;
    if (st && st->found_inf)
        return;
    if (threadIdx.x == 0)
        sc = mp_optim_coef_f32_make(&a, st);
    __syncthreads();
    const mp_optim_coef_f32 c = sc;
    bool adam = a.kind != MP_OPTIM_SGD;
    MP_CUDA_FOR(i, n)
    {
        float wi = mp_elem_load_f32(w, wt, i), gi = mp_elem_load_f32(g, gt, i);
        if (adam)
            mp_adam_f32(&c, &wi, gi, &m1[i], &m2[i], c.decoupled);
        else
            mp_sgd_f32(&c, &wi, gi, m1 ? &m1[i] : NULL, c.first, c.nesterov);
        mp_elem_store_f32(w, wt, i, wi);
        if (copy)
            mp_elem_store_f32(copy, ct, i, wi);
    }
}

extern "C" mp_status mp_cuda_optim_step(const mp_optim_args *args, const mp_amp_state *st,
                                        mp_tensor *param, mp_tensor *copy, const mp_tensor *grad,
                                        mp_tensor *slot1, mp_tensor *slot2)
{
    int64_t n = mp_tensor_numel(param);
    bool adam = args->kind != MP_OPTIM_SGD, mom = adam || args->momentum != 0.0;
    /* Slots the optimizer does not use are ignored, as on the CPU. */
    mp_tensor *s1 = mom ? slot1 : NULL, *s2 = adam ? slot2 : NULL;
    MP_CUDA_DTYPES("optim_step", param, copy, grad, s1, s2);
    MP_CUDA_REQUIRE(mp_tensor_numel(grad) == n && (!copy || mp_tensor_numel(copy) == n),
                    "optim_step");
    MP_CUDA_REQUIRE(st || args->step >= 1, "optim_step");
    MP_CUDA_REQUIRE((s1 != NULL) == mom && (s2 != NULL) == adam, "optim_step");
    MP_CUDA_REQUIRE(!s1 || (mp_tensor_numel(s1) == n && s1->dtype == MP_F32), "optim_step");
    MP_CUDA_REQUIRE(!s2 || (mp_tensor_numel(s2) == n && s2->dtype == MP_F32), "optim_step");
    if (n)
        MP_LAUNCH(k_optim, mp_cuda_blocks(n), 256, *args, st, param->data, param->dtype,
                  copy ? copy->data : NULL, copy ? copy->dtype : MP_F32, grad->data, grad->dtype,
                  s1 ? (float *)s1->data : NULL, s2 ? (float *)s2->data : NULL, n);
    return MP_OK;
}

/* Adds the sum of squares of g * mp_check_mult(mult, st) to *sumsq and sets *bad to 1 when any
 * is inf or NaN; with fill not NULL, raises *fill to mp_check_fill(max|g|, limit): per block, a
 * warp then shared-memory reduction and one atomic each (a MAX on the bits of a non-negative
 * double orders as the value does). */
__global__ static void k_gstats(const void *g, mp_dtype dt, int64_t n, double mult,
                                const mp_amp_state *st, double *sumsq, double *bad, double limit,
                                double *fill)
{
    __shared__ double ssum[8];
    __shared__ int sbad[8];
    __shared__ float smax[8];
    float m = (float)mp_check_mult(mult, st);
    mp_check_f32 c = {0.0, 0.0f, false};
    MP_CUDA_FOR(i, n)
        mp_check_f32_elem(&c, mp_elem_load_f32(g, dt, i), m);
    double s = c.sumsq;
    int nf = c.bad;
    float mx = c.amax;
    for (int o = 16; o > 0; o /= 2) {
        s += __shfl_down_sync(0xffffffffu, s, o);
        nf |= __shfl_down_sync(0xffffffffu, nf, o);
        mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, o));
    }
    int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0)
        ssum[warp] = s, sbad[warp] = nf, smax[warp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        int b = 0;
        float bm = 0.0f;
        for (int q = 0; q < (int)(blockDim.x / 32); q++)
            t += ssum[q], b |= sbad[q], bm = fmaxf(bm, smax[q]);
        atomicAdd(sumsq, t);
        if (b)
            *bad = 1.0; /* every writer stores the same value */
        if (fill)
            atomicMax((unsigned long long *)fill,
                      (unsigned long long)__double_as_longlong(mp_check_fill(bm, limit)));
    }
}

/* Launches k_gstats over grad; blocks of 256 threads (8 warps, the shared arrays' size). */
static mp_status gstats(const mp_tensor *grad, double mult, const mp_amp_state *st,
                        double *sumsq, double *bad, double limit, double *fill)
{
    MP_CUDA_DTYPES("grad_stats", grad);
    int64_t n = mp_tensor_numel(grad);
    if (n)
        MP_LAUNCH(k_gstats, mp_cuda_blocks(n) < 1024 ? mp_cuda_blocks(n) : 1024, 256, grad->data,
                  grad->dtype, n, mult, st, sumsq, bad, limit, limit > 0.0 ? fill : NULL);
    return MP_OK;
}

extern "C" mp_status mp_cuda_grad_stats(const mp_tensor *grad, double scale, double *sumsq,
                                        bool *nonfinite)
{
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    CUDA_CHECK(cudaMemsetAsync(c->scratch, 0, 2 * sizeof(double), c->stream));
    MP_TRY(gstats(grad, scale, NULL, &c->scratch[0], &c->scratch[1], 0.0, NULL));
    MP_TRY(mp_cuda_copy_out(c->host_scratch, c->scratch, 2 * sizeof(double)));
    *sumsq += c->host_scratch[0];
    *nonfinite = *nonfinite || c->host_scratch[1] != 0.0;
    return MP_OK;
}

extern "C" mp_status mp_cuda_amp_check(const mp_tensor *grad, double mult, double limit,
                                       mp_amp_state *st)
{
    return gstats(grad, mult, st, &st->sumsq, &st->found_inf, limit, &st->fill);
}

/* live = saved, in units of W (4-byte words, or bytes when the size is not a whole number of
 * words), when the step overflowed. */
template <typename W>
__global__ static void k_amp_revert(const mp_amp_state *st, const W *saved, W *live, int64_t n)
{
    if (st->found_inf == 0.0)
        return;
    MP_CUDA_FOR(i, n)
    {
        live[i] = saved[i];
    }
}

extern "C" mp_status mp_cuda_amp_revert(const mp_amp_state *st, const mp_tensor *saved,
                                        mp_tensor *live)
{
    MP_CUDA_REQUIRE(mp_tensor_numel(saved) == mp_tensor_numel(live) &&
                        saved->dtype == live->dtype,
                    "amp_revert");
    int64_t bytes = mp_tensor_bytes(live);
    if (bytes % 4 == 0 && bytes > 0)
        MP_LAUNCH(k_amp_revert<uint32_t>, mp_cuda_blocks(bytes / 4), 256, st,
                  (const uint32_t *)saved->data, (uint32_t *)live->data, bytes / 4);
    else if (bytes > 0)
        MP_LAUNCH(k_amp_revert<uint8_t>, mp_cuda_blocks(bytes), 256, st,
                  (const uint8_t *)saved->data, (uint8_t *)live->data, bytes);
    return MP_OK;
}

__global__ static void k_amp_step_values(mp_amp_state *st, double lr, int64_t step)
{
    st->lr = lr;
    st->mask_step = step;
}

extern "C" mp_status mp_cuda_amp_step_values(mp_amp_state *st, double lr, int64_t step)
{
    MP_LAUNCH(k_amp_step_values, 1, 1, st, lr, step);
    return MP_OK;
}

__global__ static void k_amp_update(mp_scaler_config c, mp_amp_state *st)
{
    mp_amp_state_update(st, &c);
}

extern "C" mp_status mp_cuda_amp_update(const mp_scaler_config *c, mp_amp_state *st)
{
    MP_LAUNCH(k_amp_update, 1, 1, *c, st);
    return MP_OK;
}
