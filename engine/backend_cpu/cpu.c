/* The CPU backend's op table. */
#include <cblas.h>

#include "engine/backend_cpu/cpu.h"

static const mp_ops mp_cpu_ops = {
    .name = "cpu",
    .gemm = mp_cpu_gemm,
    .bias_add = mp_cpu_bias_add,
    .bias_grad = mp_cpu_bias_grad,
    .relu_forward = mp_cpu_relu_forward,
    .relu_backward = mp_cpu_relu_backward,
    .softmax_xent = mp_cpu_softmax_xent,
    .optim_step = mp_cpu_optim_step,
    .grad_stats = mp_cpu_grad_stats,
    .scale = mp_cpu_scale,
    .add = mp_cpu_add,
    .batchnorm_forward = mp_cpu_batchnorm_forward,
    .batchnorm_backward = mp_cpu_batchnorm_backward,
    .pool_forward = mp_cpu_pool_forward,
    .pool_backward = mp_cpu_pool_backward,
    .dropout_forward = mp_cpu_dropout_forward,
    .dropout_backward = mp_cpu_dropout_backward,
    .fill = mp_cpu_fill,
    .convert = mp_cpu_convert,
    .conv2d_forward = mp_cpu_conv2d_forward,
    .conv2d_backward_data = mp_cpu_conv2d_backward_data,
    .conv2d_backward_filter = mp_cpu_conv2d_backward_filter,
};

const mp_ops *mp_backend_cpu(void) { return &mp_cpu_ops; }

void mp_backend_cpu_threads(int n) { openblas_set_num_threads(n); }
