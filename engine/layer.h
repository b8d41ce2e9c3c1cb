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

/* A named tensor view (a persistent buffer, for checkpoints). */
typedef struct mp_named_tensor {
    char name[96];
    mp_tensor t;
} mp_named_tensor;
typedef struct mp_block mp_block;

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
    /* Initial values: PARAM_INIT_UNIFORM draws U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's
     * Linear/Conv2d default), ONES and ZEROS are BatchNorm's weight and bias. */
    enum { MP_INIT_UNIFORM, MP_INIT_ONES, MP_INIT_ZEROS } param_init[MP_LAYER_MAX_PARAMS];
    bool param_norm[MP_LAYER_MAX_PARAMS];          /* a normalisation parameter (kept in FP32
                                                      when amp.keep_batchnorm_fp32) */
    mp_tensor w[MP_LAYER_MAX_PARAMS], dw[MP_LAYER_MAX_PARAMS]; /* bound by the owner */

    /* Non-trainable FP32 state the owner allocates and binds like parameters: BatchNorm's
     * running statistics (persistent: checkpointed, initialised to buffer_init) and its saved
     * batch statistics (scratch between forward and backward). */
    int nbuffers;
    const char *buffer_suffix[MP_LAYER_MAX_PARAMS];
    int64_t buffer_numel[MP_LAYER_MAX_PARAMS];
    bool buffer_persistent[MP_LAYER_MAX_PARAMS];
    double buffer_init[MP_LAYER_MAX_PARAMS];
    mp_tensor buf[MP_LAYER_MAX_PARAMS];

    /* Layer settings. */
    mp_conv_desc conv;  /* conv2d */
    mp_pool_desc pool;  /* max/avg/global average pooling */
    mp_bn_args bn;      /* batchnorm */
    double dropout_p;   /* dropout */
    uint64_t seed;      /* dropout: the run's seed, set by the owner */
    int64_t step;       /* dropout: the training step, set by the owner before forward */
    mp_block *block;    /* residual blocks: their inner layers (owned), else NULL */
};

/* A sequence of layers with the planned storage of their outputs (and of their inputs cast to
 * the compute dtype where a GEMM/conv layer needs it). */
typedef struct mp_seq {
    mp_layer *layers;
    int n;
    mp_tensor *acts;  /* (n): each layer's output (max_batch, ...) */
    mp_tensor *xcast; /* (n): empty unless the layer's input is cast */
} mp_seq;

#define MP_BLOCK_MAX 8

/* A residual block: y = [relu](main(x) + shortcut(x)), shortcut = identity or projection. */
struct mp_block {
    mp_layer main[MP_BLOCK_MAX], shortcut[2];
    int nmain, nshortcut;
    mp_tensor main_acts[MP_BLOCK_MAX], main_xcast[MP_BLOCK_MAX], sc_acts[2], sc_xcast[2];
    mp_tensor gbuf[2]; /* ping-pong activation gradients inside the block */
    mp_tensor gsum;    /* gradient at the addition (after the ReLU's backward) */
    mp_tensor gsc;     /* the projection shortcut's input gradient */
    bool post_relu;
};

/* The block's main path and shortcut as sequences. */
mp_seq mp_block_main(mp_block *b);
mp_seq mp_block_shortcut(mp_block *b);

/* Sets up a residual block over an (H, W, C) input with `out` output channels:
 *   basic      conv3x3(stride)-bn-relu-conv3x3-bn, + shortcut, relu (ResNet);
 *   bottleneck conv1x1(width)-bn-relu-conv3x3(width, stride, groups)-bn-relu-conv1x1(out)-bn,
 *              + shortcut, relu (ResNet bottleneck; ResNeXt with groups > 1);
 *   wide       bn-relu-conv3x3(stride)-bn-relu-[dropout p]-conv3x3, + shortcut (pre-activation
 *              Wide ResNet; the projection reads x itself).
 * The shortcut is a 1x1 convolution (with stride) and batchnorm when the shape changes, else
 * the identity. Convolutions have no bias. MP_EUSAGE naming the block for a bad setting. */
mp_status mp_layer_residual_init(mp_layer *l, const mp_ops *ops, const char *name,
                                 const int64_t in_shape[3], const char *kind, int64_t out,
                                 int64_t stride, int64_t groups, int64_t width, double p);

/* Per-sample element count of a (H, W, C) shape. */
int64_t mp_shape_numel(const int64_t shape[3]);

/* Sets up a fully connected layer y = x W^T + b on the flattened input: weight (out, in),
 * bias (out). MP_EUSAGE when out < 1. */
mp_status mp_layer_linear_init(mp_layer *l, const mp_ops *ops, const char *name,
                               const int64_t in_shape[3], int64_t out);

/* Sets up an elementwise ReLU (no parameters). */
mp_status mp_layer_relu_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3]);

/* Sets up a 2-D convolution with `out` channels and a kernel of kernel[0] x kernel[1] over an
 * (H, W, C) input: weight (out, kh, kw, C / groups), and bias (out) when `bias`. MP_EUSAGE
 * naming the layer when channels do not divide by groups or the output would be empty. */
mp_status mp_layer_conv2d_init(mp_layer *l, const mp_ops *ops, const char *name,
                               const int64_t in_shape[3], int64_t out, const int kernel[2],
                               const mp_conv_desc *d, bool bias);

/* Sets up batch normalisation over the channels of an (H, W, C) input: weight (C) = 1,
 * bias (C) = 0, buffers running_mean (0), running_var (1), save_mean, save_invstd. */
mp_status mp_layer_batchnorm_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], double eps, double momentum);

/* Sets up max or average pooling (mp_pool_desc); MP_EUSAGE when the output would be empty. */
mp_status mp_layer_pool_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3], const mp_pool_desc *d);

/* Sets up global average pooling: (H, W, C) -> (1, 1, C). */
mp_status mp_layer_global_avgpool_init(mp_layer *l, const mp_ops *ops, const char *name,
                                       const int64_t in_shape[3]);

/* Sets up inverted dropout with drop probability p in [0, 1); identity in evaluation. The mask
 * of a step depends only on (seed, step, element), so it is the same on every backend. */
mp_status mp_layer_dropout_init(mp_layer *l, const mp_ops *ops, const char *name,
                                const int64_t in_shape[3], double p);

/* Sets up flatten: (H, W, C) -> (1, 1, H * W * C), the same memory. */
mp_status mp_layer_flatten_init(mp_layer *l, const mp_ops *ops, const char *name,
                                const int64_t in_shape[3]);

#endif
