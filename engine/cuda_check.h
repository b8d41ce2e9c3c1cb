/* CUDA_CHECK (DESIGN §7) for C and C++ alike: the CUDA backend (engine/backend_cuda/) and the
 * parts of comm/ that call the CUDA runtime share it. A failed check returns MP_EINTERNAL from
 * the enclosing function with "[rank R @ host] file:line: STMT failed (cuda): message". Include
 * only in builds with CUDA. */
#ifndef MP_CUDA_CHECK_H
#define MP_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "engine/check.h"

#define MP_CUDA_OK(rc) ((rc) == cudaSuccess)
#define CUDA_CHECK(stmt)                                                                    \
    MP_LIB_CHECK("cuda", MP_EINTERNAL, cudaError_t, stmt, MP_CUDA_OK, cudaGetErrorString)

#endif
