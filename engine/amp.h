/* Opt levels (docs/ARCHITECTURE.md §3, NVIDIA Apex's semantics): which dtype the model's weights,
 * the normalisation parameters, the activations and the gradients use, whether FP32 master weights
 * exist, and how the loss is scaled. A level gives the defaults; keep_batchnorm_fp32,
 * master_weights and loss_scale can each be overridden. */
#ifndef MP_AMP_H
#define MP_AMP_H

#include <stdbool.h>
#include <stdio.h>

#include "engine/dtype.h"

typedef enum mp_opt_level { MP_O0, MP_O1, MP_O2, MP_O3 } mp_opt_level;

/* The properties a level sets, before overrides. */
typedef struct mp_amp_defaults {
    bool keep_batchnorm_fp32;
    bool master_weights;
    double loss_scale; /* 0 = dynamic */
} mp_amp_defaults;

typedef struct mp_amp_policy {
    mp_opt_level level;
    mp_dtype half;        /* fp16 or bf16 */
    mp_dtype weights;     /* dtype of the model's weights (what layers read and grads are in) */
    mp_dtype norm;        /* dtype of BatchNorm weight and bias */
    mp_dtype compute;     /* dtype of GEMM/conv inputs and outputs */
    mp_dtype input;       /* dtype of the batches the loader produces */
    bool cast_weights;    /* O1: FP32 weights with a half copy written once per step */
    bool master_weights;  /* FP32 masters that the optimizer updates */
    bool keep_batchnorm_fp32;
    bool allow_tf32;
    double loss_scale;    /* 0 = dynamic, else static */
} mp_amp_policy;

/* Parses "O0".."O3"; -1 for anything else. */
int mp_opt_level_parse(const char *s, mp_opt_level *level);

/* The name "O0".."O3". */
const char *mp_opt_level_name(mp_opt_level level);

/* The defaults of a level for a half type: keep_batchnorm_fp32 (O0-O2 true, O3 false),
 * master weights (O2 only; O0/O1 weights are FP32 already), loss scale (dynamic at O1/O2 with
 * fp16, static 1 with bf16 and at O0/O3). */
mp_amp_defaults mp_amp_level_defaults(mp_opt_level level, mp_dtype half);

/* Resolves the policy of a level with the given (possibly overridden) properties. */
mp_amp_policy mp_amp_resolve(mp_opt_level level, mp_dtype half, bool keep_batchnorm_fp32,
                             bool master_weights, double loss_scale, bool allow_tf32);

/* Prints the resolved table (one "property: value" line each) with a leading title. */
void mp_amp_print(const mp_amp_policy *p, FILE *out);

#endif
