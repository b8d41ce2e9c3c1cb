/* CUDA_CHECK (docs/ARCHITECTURE.md §7) and mp_cuda_query for C and C++ alike: the CUDA backend
 * (engine/backend_cuda/) and the parts of comm/ that call the CUDA runtime share them. A failed
 * check returns MP_EINTERNAL from the enclosing function with "[rank R @ host] file:line: STMT
 * failed (cuda): message". Include only in builds with CUDA. */
#ifndef MP_CUDA_CHECK_H
#define MP_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "engine/check.h"

#define MP_CUDA_OK(rc) ((rc) == cudaSuccess)
#define CUDA_CHECK(stmt)                                                                    \
    MP_LIB_CHECK("cuda", MP_EINTERNAL, cudaError_t, stmt, MP_CUDA_OK, cudaGetErrorString)

/* The answer rc of cudaEventQuery or cudaStreamQuery, returned as it is: cudaSuccess (done),
 * cudaErrorNotReady (not yet) or an error. The runtime may also leave cudaErrorNotReady in the
 * calling thread's last-error slot, where the next CUDA_CHECK(cudaGetLastError()) after a kernel
 * launch would read it as a failed launch, so it is cleared from there (only that value: any
 * other error in the slot stays for its check). Wrap every event or stream query in it. */
static inline cudaError_t mp_cuda_query(cudaError_t rc)
{
    if (rc == cudaErrorNotReady && cudaPeekAtLastError() == cudaErrorNotReady)
        (void)cudaGetLastError();
    return rc;
}

#endif
