/* The environment variables that choose among the engine's paths (docs/reproducibility.md):
 * each takes one of a fixed list of values, and a value outside it (a typo) is an error that
 * src/ reports before anything runs, not a silent fallback to the default path. */
#ifndef MP_ENV_CHOICE_H
#define MP_ENV_CHOICE_H

#include "engine/status.h"

typedef enum mp_env_var {
    MP_ENV_CPU_ISA,    /* MPDIST_CPU_ISA: base, avx2, avx512 (lowers the CPU kernels' level) */
    MP_ENV_CPU_GEMM,   /* MPDIST_CPU_GEMM: openblas (bf16 GEMMs widened for OpenBLAS) */
    MP_ENV_CPU_CONV,   /* MPDIST_CPU_CONV: im2col (convolutions without oneDNN) */
    MP_ENV_CPU_STAGED, /* MPDIST_CPU_STAGED: 0, 1 (the CPU backend as a device backend) */
    MP_ENV_NVARS
} mp_env_var;

/* The index in var's list of the value it is set to, or -1 when it is unset, empty or set to a
 * value outside the list (which mp_env_check reports). Thread-safe (reads only). */
int mp_env_choice(mp_env_var var);

/* MP_OK when every variable is unset, empty or set to a value of its list; else MP_EUSAGE
 * with the message "MPDIST_CPU_GEMM: \"openbals\" is not one of its values (openblas)" for the
 * first that is not. */
mp_status mp_env_check(void);

#endif
