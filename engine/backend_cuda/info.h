/* Version facts of the CUDA libraries linked into the binary. */
#ifndef MP_CUDA_INFO_H
#define MP_CUDA_INFO_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints the CUDA runtime and driver versions, cuBLAS and cuDNN versions and the visible GPUs
 * ("gpus: none (...)" when no driver or device is present). */
void mp_cuda_info(FILE *out);

#ifdef __cplusplus
}
#endif

#endif
