/* Fusing layers at model build (layer.h: mp_layers_fuse): BatchNorm followed by ReLU becomes one
 * batchnorm_relu layer, and a residual block's sum followed by its ReLU one add_relu
 * (engine/layer_residual.c): the fused ops of engine/op_list.h, a pass over the activations
 * fewer in forward and, on the GPU, in backward. */
#include <string.h>

#include "engine/layer.h"

void mp_layers_fuse(mp_layer *layers, int *n)
{
    for (int i = 0; i < *n; i++) {
        mp_block *b = layers[i].block;
        for (int c = 0; b && c < b->nchild; c++)
            mp_layers_fuse(b->layers[c], &b->n[c]);
        if (b)
            b->fused_relu = b->post_relu;
        if (i + 1 < *n && strcmp(layers[i + 1].cls->type, "relu") == 0 &&
            mp_layer_batchnorm_fuse_relu(&layers[i])) {
            memmove(&layers[i + 1], &layers[i + 2], (size_t)(*n - i - 2) * sizeof *layers);
            (*n)--;
            memset(&layers[*n], 0, sizeof *layers);
        }
    }
}
