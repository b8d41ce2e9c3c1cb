/* What the GPU's tiled attention kernels share (attention_flash.cu, the scalar kernels;
 * attention_mma.cu, the tensor-core kernels): the call's arguments (attention_flash_args.cuh)
 * and the tensor-core kernels' entry points. */
#ifndef MP_ATTENTION_FLASH_CUH
#define MP_ATTENTION_FLASH_CUH

#include "engine/backend_cuda/cuda.h" /* first: it includes the C headers as extern "C" */

#include "engine/backend_cuda/attention_flash_args.cuh"

/* The tensor-core kernels (attention_mma.cu) for a call that mp_attn_flash_mma admits: true and
 * the work queued when they ran it, false (nothing queued) when this build or GPU has no
 * tensor-core kernel for it (compiled for a GPU before sm_80) or qkv, dout or out are not
 * 16-byte aligned; an error of the launch as a status. */
mp_status mp_flash_mma_forward(const flash_args &a, const void *qkv, void *stats, void *out,
                               bool *ran);
mp_status mp_flash_mma_backward(const flash_args &a, const void *qkv, const void *out,
                                const void *stats, const void *dout, void *dqkv, bool *ran);

#endif
