/* The check macros of DESIGN §7 for comm's C files that call the CUDA runtime and NCCL (the
 * CUDA backend's own are C++ and live in engine/backend_cuda/cuda.h). Include only in builds
 * with CUDA (MPDIST_HAVE_CUDA); NCCL_CHECK exists when NCCL is built in (MP_HAVE_NCCL). A failed
 * check returns from the enclosing function with "[rank R @ host] file:line: STMT failed (lib):
 * message": MP_EINTERNAL for CUDA, MP_ECOMM for NCCL (a communication failure, exit code 6). */
#ifndef MP_GPU_CHECK_H
#define MP_GPU_CHECK_H

#include <cuda_runtime_api.h>

#include "engine/check.h"

#define MP_CUDA_OK(rc) ((rc) == cudaSuccess)
#define CUDA_CHECK(stmt)                                                                    \
    MP_LIB_CHECK("cuda", MP_EINTERNAL, cudaError_t, stmt, MP_CUDA_OK, cudaGetErrorString)

#ifdef MP_HAVE_NCCL
#include <nccl.h>

#define MP_NCCL_OK(rc) ((rc) == ncclSuccess)
#define NCCL_CHECK(stmt)                                                                    \
    MP_LIB_CHECK("nccl", MP_ECOMM, ncclResult_t, stmt, MP_NCCL_OK, ncclGetErrorString)
#endif

#endif
