/* Built-in models (model.preset), expanded into layer specs for a given input shape. */
#ifndef MP_PRESETS_H
#define MP_PRESETS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/model.h"

typedef struct mp_preset_args {
    const int64_t *hidden; /* mlp */
    int nhidden;
    int64_t depth;         /* resnet20, wrn, resnext; 0: 20, 16, 29 */
    int64_t widen;         /* wrn */
    int64_t cardinality, width; /* resnext */
    double dropout;        /* wrn, vit, gpt */
    int64_t dim, heads;    /* vit, gpt: token width and attention heads */
    int64_t patch;         /* vit: patch side; 0: 7 */
    bool conv_stem;        /* vit: a convolutional stem instead of the patch convolution */
    bool matrix_attention; /* vit, gpt: the blocks keep the (T, T) probabilities (not tiled) */
} mp_preset_args;

/* Writes the layer specs of preset `name` with num_classes outputs into specs (room for
 * MP_MAX_LAYERS) and returns how many; -1 with an MP_EUSAGE message "model.depth: ..." for a
 * depth the architecture cannot have or that needs more than MP_MAX_LAYERS layers, or
 * "model.preset: ..." for an unknown name. Presets:
 *   mlp       linear(hidden[i]) + relu for each hidden width, then linear(num_classes);
 *   cnn       conv 32 3x3 - relu - maxpool 2 - conv 64 3x3 - relu - maxpool 2 - linear 128 -
 *             relu - dropout 0.25 - linear (hidden is ignored);
 *   cnn_bn    the same with batchnorm after each conv (convs without bias);
 *   resnet20  He et al.'s CIFAR ResNet: conv 16 - bn - relu, three stages of n basic blocks
 *             (16, 32, 64 channels; strides 1, 2, 2; depth = 6n + 2), global average pool, linear;
 *   wrn       Zagoruyko and Komodakis's WRN-depth-widen: conv 16, three stages of n wide blocks
 *             (16k, 32k, 64k; depth = 6n + 4), bn - relu, global average pool, linear;
 *   resnext   Xie et al.'s CIFAR ResNeXt: conv 64 - bn - relu, three stages of n bottleneck
 *             blocks (256, 512, 1024 channels; inner width cardinality x width x 2^stage;
 *             depth = 9n + 2), global average pool, linear;
 *   vit       a Vision Transformer for 28x28 images: tokens of width dim from a patch x patch
 *             convolution of stride patch (0: 7, 16 tokens; 4: 49 tokens), or with conv_stem
 *             from three 3x3 stride-2 convolutions with BatchNorm and ReLU (32, 64, 128
 *             channels, 4x4 = 16 tokens) and a 1x1 convolution; a position embedding, depth
 *             (0: 4) pre-LN transformer blocks with `heads` heads, LayerNorm, mean over the
 *             tokens, linear;
 *   gpt       a byte-level GPT over (1, T, 1) token ids: token embedding (num_classes x dim),
 *             position embedding, dropout, depth (0: 4) causal blocks, LayerNorm, a per-token
 *             head tied to the token embedding (num_classes logits per token). */
int mp_preset_specs(const char *name, const mp_preset_args *a, int64_t num_classes,
                    mp_layer_spec *specs);

#endif
