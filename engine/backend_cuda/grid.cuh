/* The grid-stride loop, for kernels in headers that build without the CUDA runtime's headers
 * (tests/emu runs them on the CPU). */
#ifndef MP_BACKEND_CUDA_GRID_CUH
#define MP_BACKEND_CUDA_GRID_CUH

#include <stdint.h>

/* Grid-stride loop over [0, n). */
#define MP_CUDA_FOR(i, n)                                                                   \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);               \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
