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
    .sgd_step = mp_cpu_sgd_step,
    .scale = mp_cpu_scale,
    .fill = mp_cpu_fill,
    .convert = mp_cpu_convert,
};

const mp_ops *mp_backend_cpu(void) { return &mp_cpu_ops; }

void mp_backend_cpu_threads(int n) { openblas_set_num_threads(n); }
