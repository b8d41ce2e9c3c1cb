/* Which compute backends this binary carries, for `mpdist info`. */
#ifndef MP_BACKENDS_H
#define MP_BACKENDS_H

#include <stdio.h>

/* Prints one "key: value" line per backend fact (backends, BLAS, CUDA runtime, cuBLAS, cuDNN,
 * visible GPUs when built with CUDA). Never fails; a missing driver is reported as such. */
void mp_backends_info(FILE *out);

#endif
