/* The check macros of docs/ARCHITECTURE.md §7 for comm's C files that call the CUDA runtime and
 * NCCL: CUDA_CHECK from engine/cuda_check.h, and NCCL_CHECK when NCCL is built in (MP_HAVE_NCCL),
 * which returns MP_ECOMM (a communication failure, exit code 6) with "[rank R @ host]
 * file:line: STMT failed (nccl): message". Include only in builds with CUDA. */
#ifndef MP_GPU_CHECK_H
#define MP_GPU_CHECK_H

#include "engine/check.h"
#include "engine/cuda_check.h"

#ifdef MP_HAVE_NCCL
#include <nccl.h>

#define MP_NCCL_OK(rc) ((rc) == ncclSuccess)
#define NCCL_CHECK(stmt)                                                                    \
    MP_LIB_CHECK("nccl", MP_ECOMM, ncclResult_t, stmt, MP_NCCL_OK, ncclGetErrorString)
#endif

#endif
