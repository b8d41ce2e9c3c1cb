/* The CPU backend's op table. */
#include <cblas.h>
#include <pthread.h>

#include "engine/backend_cpu/cpu.h"

static const mp_ops mp_cpu_ops = {
    .name = "cpu",
    .host_memory = true,
    .mem_alloc = mp_cpu_mem_alloc,
    .mem_free = mp_cpu_mem_free,
    .host_alloc = mp_cpu_host_alloc,
    .host_free = mp_cpu_host_free,
    .copy_in = mp_cpu_copy_in,
    .copy_out = mp_cpu_copy_out,
    .copy = mp_cpu_copy,
    .sync = mp_cpu_sync,
    .fence_record = mp_cpu_fence_record,
    .fence_wait = mp_cpu_fence_wait,
    .fence_free = mp_cpu_fence_free,
    .queue = mp_cpu_queue,
    .counters = mp_cpu_counters,
    .mem_free_bytes = mp_cpu_mem_free_bytes,
    .gemm = mp_cpu_gemm,
    .gemm_bias = mp_cpu_gemm_bias,
    .bias_add = mp_cpu_bias_add,
    .bias_grad = mp_cpu_bias_grad,
    .relu_forward = mp_cpu_relu_forward,
    .relu_backward = mp_cpu_relu_backward,
    .softmax_xent = mp_cpu_softmax_xent,
    .optim_step = mp_cpu_optim_step,
    .grad_stats = mp_cpu_grad_stats,
    .amp_check = mp_cpu_amp_check,
    .amp_revert = mp_cpu_amp_revert,
    .amp_update = mp_cpu_amp_update,
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

static mp_ops mp_cpu_staged_ops;

static void make_staged(void)
{
    mp_cpu_staged_ops = mp_cpu_ops;
    mp_cpu_staged_ops.name = "cpu-staged";
    mp_cpu_staged_ops.host_memory = false;
}

const mp_ops *mp_backend_cpu_staged(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_staged);
    return &mp_cpu_staged_ops;
}

void mp_backend_cpu_threads(int n) { openblas_set_num_threads(n); }
