/* Which compute backend a run uses (amp.device), and which ones this binary carries. */
#ifndef MP_BACKENDS_H
#define MP_BACKENDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/ops.h"

/* The memory layout FP32 convolutions run in on the CUDA backend (the engine's tensors stay
 * NHWC; an NCHW call works on copies): AUTO lets amp.conv_algo = "timed" time both and keep the
 * faster (NHWC under "heuristic"); NHWC and NCHW fix it (the GPU tests). Half convolutions, on
 * tensor cores, always run NHWC. */
typedef enum mp_conv_layout {
    MP_CONV_LAYOUT_AUTO,
    MP_CONV_LAYOUT_NHWC,
    MP_CONV_LAYOUT_NCHW
} mp_conv_layout;

/* How the CUDA backend is set up; the CPU backend ignores them. */
typedef struct mp_backend_options {
    int device;                   /* CUDA device index (comm/ binds local rank -> device) */
    bool allow_tf32;              /* FP32 GEMMs and convolutions may use TF32 tensor cores */
    int64_t conv_workspace_bytes; /* most cuDNN workspace a convolution algorithm may use */
    bool conv_timed;              /* time cuDNN's algorithms once per shape (amp.conv_algo) */
    bool conv_deterministic;      /* only algorithms cuDNN lists as deterministic */
    mp_conv_layout conv_layout;   /* FP32 convolutions' layout (AUTO when zero-initialised) */
} mp_backend_options;

/* Opens the backend `device` names: "cpu"; "cuda" (MP_EUSAGE with a one-line reason when the
 * binary was built without CUDA or no GPU can be used); "auto" (CUDA when a GPU can be used,
 * else the CPU). *ops is the table; *why (cap bytes) says what was chosen and why, or, when it
 * fails, the reason alone (the message adds which amp.device asked). The CUDA
 * backend is opened once per process; a second open with other options changes only
 * allow_tf32, the workspace bound, conv_timed, conv_deterministic and conv_layout. */
mp_status mp_backend_open(const char *device, const mp_backend_options *o, const mp_ops **ops,
                          char *why, size_t cap);

/* Number of CUDA devices this process can use (0 without CUDA, a driver or a device). */
int mp_backend_cuda_devices(void);

/* Prints the convolution plans the CUDA backend has made in this process (direction, shape,
 * dtype, cuDNN's algorithm, its workspace and, when timed, its time), one line each after a
 * heading; nothing when the CUDA backend is not open or made none. */
void mp_backends_conv_plans(FILE *out);

/* Prints one "key: value" line per backend fact (backends, BLAS, CUDA runtime, cuBLAS, cuDNN,
 * visible GPUs when built with CUDA). Never fails; a missing driver is reported as such. */
void mp_backends_info(FILE *out);

#endif
