/* The CUDA backend as the rest of the engine sees it (engine/backends.c alone includes this). */
#ifndef MP_CUDA_API_H
#define MP_CUDA_API_H

#ifdef __cplusplus
extern "C" {
#endif

#include "engine/backends.h"
#include "engine/ops.h"

/* Number of CUDA devices usable by this process: 0 without a driver or a device. */
int mp_cuda_device_count(void);

/* Sets up the backend on device o->device: stream, cuBLAS/cuBLASLt/cuDNN handles, workspaces.
 * The first call does the set-up; later ones update allow_tf32, the workspace bound and
 * conv_timed.
 * MP_EUSAGE when the device cannot be used, MP_EINTERNAL when a library fails. */
mp_status mp_cuda_open(const mp_backend_options *o);

/* Prints the convolution plans made so far (mp_backends_conv_plans); nothing before the first. */
void mp_cuda_conv_plans(FILE *out);

/* The CUDA op table (after mp_cuda_open). */
const mp_ops *mp_backend_cuda(void);

#ifdef __cplusplus
}
#endif

#endif
