/* GELU (tanh form) forward and backward: a grid-stride kernel around engine/gelu_rule.h's FP32
 * arithmetic, the CPU backend's rule, with loads and stores by each tensor's runtime dtype
 * (engine/cast_rule.h), each output element rounded once. An element is read before it is
 * written by the same thread, so y may alias x and dx may alias dy. */
#include "engine/backend_cuda/cuda.h"
#include "engine/gelu_rule.h"

__global__ static void k_gelu_fwd(const void *x, mp_dtype xt, void *y, mp_dtype yt, int64_t n)
{
    MP_CUDA_FOR(i, n)
        mp_elem_store_f32(y, yt, i, mp_gelu_f32(mp_elem_load_f32(x, xt, i)));
}

extern "C" mp_status mp_cuda_gelu_forward(const mp_tensor *x, mp_tensor *y)
{
    MP_CUDA_DTYPES("gelu_forward", x, y);
    int64_t n = mp_tensor_numel(x);
    MP_CUDA_REQUIRE(mp_tensor_numel(y) == n, "gelu_forward");
    if (n)
        MP_LAUNCH(k_gelu_fwd, mp_cuda_blocks(n), 256, x->data, x->dtype, y->data, y->dtype, n);
    return MP_OK;
}

__global__ static void k_gelu_bwd(const void *x, mp_dtype xt, const void *dy, mp_dtype dyt,
                                  void *dx, mp_dtype dxt, int64_t n)
{
    MP_CUDA_FOR(i, n)
    {
        float g = mp_gelu_grad_f32(mp_elem_load_f32(x, xt, i), mp_elem_load_f32(dy, dyt, i));
        mp_elem_store_f32(dx, dxt, i, g);
    }
}

extern "C" mp_status mp_cuda_gelu_backward(const mp_tensor *x, const mp_tensor *dy,
                                           mp_tensor *dx)
{
    MP_CUDA_DTYPES("gelu_backward", x, dy, dx);
    int64_t n = mp_tensor_numel(x);
    MP_CUDA_REQUIRE(mp_tensor_numel(dy) == n && mp_tensor_numel(dx) == n, "gelu_backward");
    if (n)
        MP_LAUNCH(k_gelu_bwd, mp_cuda_blocks(n), 256, x->data, x->dtype, dy->data, dy->dtype,
                  dx->data, dx->dtype, n);
    return MP_OK;
}
