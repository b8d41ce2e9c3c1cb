/* CUDA library versions for `mpdist info`; needs no GPU (a missing driver is reported). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "engine/backend_cuda/info.h"

extern "C" void mp_cuda_info(FILE *out)
{
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    fprintf(out, "cuda runtime: %d.%d\n", rt / 1000, (rt % 1000) / 10);
    if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
        fprintf(out, "cuda driver: %d.%d\n", drv / 1000, (drv % 1000) / 10);
    else
        fprintf(out, "cuda driver: none\n");
    int cublas = 0;
    cublasGetProperty(MAJOR_VERSION, &cublas);
    int cublas_minor = 0, cublas_patch = 0;
    cublasGetProperty(MINOR_VERSION, &cublas_minor);
    cublasGetProperty(PATCH_LEVEL, &cublas_patch);
    fprintf(out, "cublas: %d.%d.%d\n", cublas, cublas_minor, cublas_patch);
    size_t dnn = cudnnGetVersion();
    fprintf(out, "cudnn: %zu.%zu.%zu\n", dnn / 10000, (dnn % 10000) / 100, dnn % 100);
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        fprintf(out, "gpus: none (%s)\n", cudaGetErrorString(err));
        return;
    }
    for (int i = 0; i < n; i++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) == cudaSuccess)
            fprintf(out, "gpu %d: %s, %.1f GiB, sm_%d%d\n", i, p.name,
                    (double)p.totalGlobalMem / (1 << 30), p.major, p.minor);
    }
}
