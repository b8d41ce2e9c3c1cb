/* The CUDA backend's op table. */
#include "engine/backend_cuda/api.h"
#include "engine/backend_cuda/cuda.h"

static const mp_ops mp_cuda_ops = {
    .name = "cuda",
    .host_memory = false,
#define MP_OP(ret, op, params) .op = mp_cuda_##op,
#include "engine/op_list.h"
};

extern "C" const mp_ops *mp_backend_cuda(void) { return &mp_cuda_ops; }
