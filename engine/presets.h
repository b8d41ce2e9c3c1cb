/* Built-in models (model.preset), expanded into layer specs for a given input shape. */
#ifndef MP_PRESETS_H
#define MP_PRESETS_H

#include <stdint.h>

#include "engine/model.h"

/* Writes the layer specs of preset `name` for inputs of per-sample shape in_shape (H, W, C) and
 * num_classes outputs into specs (room for MP_MAX_LAYERS) and returns how many, or -1 for an
 * unknown name. Presets:
 *   mlp     linear(hidden[i]) + relu for each hidden width, then linear(num_classes);
 *   cnn     conv 32 3x3 - relu - maxpool 2 - conv 64 3x3 - relu - maxpool 2 - linear 128 -
 *           relu - dropout 0.25 - linear(num_classes) (hidden is ignored);
 *   cnn_bn  the same with batchnorm after each conv (convs without bias). */
int mp_preset_specs(const char *name, const int64_t *hidden, int nhidden, int64_t num_classes,
                    mp_layer_spec *specs);

#endif
