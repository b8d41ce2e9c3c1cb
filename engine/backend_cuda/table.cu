/* The CUDA backend's op table. */
#include "engine/backend_cuda/api.h"
#include "engine/backend_cuda/cuda.h"

static const mp_ops mp_cuda_ops = {
    .name = "cuda",
    .host_memory = false,
    .mem_alloc = mp_cuda_mem_alloc,
    .mem_free = mp_cuda_mem_free,
    .host_alloc = mp_cuda_host_alloc,
    .host_free = mp_cuda_mem_free,
    .copy_in = mp_cuda_copy_in,
    .copy_out = mp_cuda_copy_out,
    .copy = mp_cuda_copy,
    .sync = mp_cuda_sync,
    .mem_free_bytes = mp_cuda_mem_free_bytes,
    .gemm = mp_cuda_gemm,
    .gemm_bias = mp_cuda_gemm_bias,
    .bias_add = mp_cuda_bias_add,
    .bias_grad = mp_cuda_bias_grad,
    .relu_forward = mp_cuda_relu_forward,
    .relu_backward = mp_cuda_relu_backward,
    .softmax_xent = mp_cuda_softmax_xent,
    .optim_step = mp_cuda_optim_step,
    .amp_check = mp_cuda_amp_check,
    .amp_update = mp_cuda_amp_update,
    .grad_stats = mp_cuda_grad_stats,
    .scale = mp_cuda_scale,
    .fill = mp_cuda_fill,
    .convert = mp_cuda_convert,
    .add = mp_cuda_add,
    .conv2d_forward = mp_cuda_conv2d_forward,
    .conv2d_backward_data = mp_cuda_conv2d_backward_data,
    .conv2d_backward_filter = mp_cuda_conv2d_backward_filter,
    .batchnorm_forward = mp_cuda_batchnorm_forward,
    .batchnorm_backward = mp_cuda_batchnorm_backward,
    .pool_forward = mp_cuda_pool_forward,
    .pool_backward = mp_cuda_pool_backward,
    .dropout_forward = mp_cuda_dropout_forward,
    .dropout_backward = mp_cuda_dropout_backward,
};

extern "C" const mp_ops *mp_backend_cuda(void) { return &mp_cuda_ops; }
