/* Layers: a forward/backward pair written once against the op table (DESIGN §5). A layer knows
 * its per-sample input and output shapes (H, W, C; features are (1, 1, C)) and declares its
 * parameters; the model binds each declared parameter and gradient to tensors (views into the
 * flat buffers, or a test's own tensors of any dtype). */
#ifndef MP_LAYER_H
#define MP_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/ops.h"

#define MP_LAYER_MAX_PARAMS 4

typedef struct mp_layer mp_layer;

typedef struct mp_layer_class {
    const char *type;
    /* y (n, out_shape) from x (n, in_shape). */
    mp_status (*forward)(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train);
    /* Given x, the forward output y and dy, writes the parameter gradients into the bound
     * gradient tensors (overwriting) and dx when dx is not NULL. */
    mp_status (*backward)(mp_layer *l, const mp_tensor *x, const mp_tensor *y, const mp_tensor *dy,
                          mp_tensor *dx);
} mp_layer_class;

struct mp_layer {
    const mp_layer_class *cls;
    const mp_ops *ops;
    char name[48];
    int64_t in_shape[3], out_shape[3];
    int nparams;
    const char *param_suffix[MP_LAYER_MAX_PARAMS]; /* "weight", "bias" */
    int param_ndim[MP_LAYER_MAX_PARAMS];
    int64_t param_shape[MP_LAYER_MAX_PARAMS][MP_MAX_DIMS];
    double fan_in;                                 /* for initialisation */
    mp_tensor w[MP_LAYER_MAX_PARAMS], dw[MP_LAYER_MAX_PARAMS]; /* bound by the owner */
};

/* Per-sample element count of a (H, W, C) shape. */
int64_t mp_shape_numel(const int64_t shape[3]);

/* Sets up a fully connected layer y = x W^T + b on the flattened input: weight (out, in),
 * bias (out). MP_EUSAGE when out < 1. */
mp_status mp_layer_linear_init(mp_layer *l, const mp_ops *ops, const char *name,
                               const int64_t in_shape[3], int64_t out);

/* Sets up an elementwise ReLU (no parameters). */
mp_status mp_layer_relu_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3]);

#endif
