/* Layers: a forward/backward pair written once against the op table (docs/ARCHITECTURE.md §5). A
 * layer knows its per-sample input and output shapes (H, W, C; features are (1, 1, C)) and declares
 * its parameters; the model binds each declared parameter and gradient to tensors (views into the
 * flat buffers, or a test's own tensors of any dtype). */
#ifndef MP_LAYER_H
#define MP_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/amp.h"
#include "engine/layer_spec.h"
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
    /* The dtype of the output for input dtype `in` under policy a; NULL keeps the input's. */
    mp_dtype (*out_dtype)(const mp_layer *l, const mp_amp_policy *a, mp_dtype in);
    /* A GEMM or convolution: its input is cast to the policy's compute dtype first. */
    bool cast_input;
    /* backward may be given dx over dy's own memory (dtype and elements per sample the same):
     * it reads dy at other positions only before it writes any of dx (BatchNorm's sums), and
     * dy at a position before it writes dx there (ReLU, BatchNorm). */
    bool inplace_backward;
    /* backward does not read x (skips_x), or y (skips_y): for the memory plan (engine/plan.h),
     * where a tensor no later op reads gives its bytes to others */
    bool skips_x, skips_y;
    /* forward may be given y over x's own memory (element for element) */
    bool inplace_forward;
    /* MP_OK when a batch of n samples can run (train: a training forward and backward), else
     * MP_EUSAGE saying why; forward refuses the same batches. NULL: any batch runs. */
    mp_status (*check_batch)(const mp_layer *l, int64_t n, bool train);
} mp_layer_class;

/* Starts a layer class's set-up of l: zeroes it and sets its class, backend, name and input
 * shape (H, W, C), and its output shape to (H, W, out_c), which the class changes where its
 * positions differ. */
void mp_layer_begin(mp_layer *l, const mp_layer_class *cls, const mp_ops *ops, const char *name,
                    const int64_t in_shape[3], int64_t out_c);

/* Output dtypes shared by several layer classes (mp_layer_class.out_dtype): the policy's
 * compute dtype (GEMM and convolution layers), and its weights dtype (embeddings: the residual
 * stream of a transformer is FP32 at O0 and O1, half at O2 and O3, as PyTorch's type promotion
 * makes it under autocast). */
mp_dtype mp_out_compute(const mp_layer *l, const mp_amp_policy *a, mp_dtype in);
mp_dtype mp_out_weights(const mp_layer *l, const mp_amp_policy *a, mp_dtype in);

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
     * Linear/Conv2d default; embeddings set fan_in for a bound of 0.02 sqrt(3), a standard
     * deviation of 0.02 as GPT-2's), ONES and ZEROS are the norm layers' weight and bias. */
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

    /* A saved activation beside the output (attention's probabilities or row statistics): its
     * per-sample shape (all zero: none), allocated by the owner like the output, in the
     * output's dtype or, with save_fp32, in FP32 (FP64 when the output is FP64). */
    int64_t save_shape[3];
    bool save_fp32;
    mp_tensor save;

    /* Layer settings. */
    mp_conv_desc conv;  /* conv2d */
    mp_pool_desc pool;  /* max/avg/global average pooling */
    mp_bn_args bn;      /* batchnorm; layernorm uses bn.eps */
    mp_attn_desc attn;  /* attention (seed and offset set at each call) */
    bool attn_flash;    /* attention: the tiled ops */
    bool per_token;     /* linear: over the last dimension of each position (else flattened) */
    mp_layer *tie;      /* linear: uses tie's weight (an embedding's) instead of its own */
    bool shared;        /* embedding: its weight gradient is added to (a tied head wrote first) */
    double dropout_p;   /* dropout */
    uint64_t seed;      /* dropout: the run's seed, set by the owner */
    int64_t step;       /* dropout: the training step, set by the owner before forward */
    const int64_t *mask_step; /* dropout, attention: NULL, or the step's index in backend memory
                                 (mp_amp_state.mask_step), read by the ops as they run in place
                                 of step (mp_model_mask_step: a graph's launches) */
    bool recomputing;   /* set while a forward runs again in backward (recomputation):
                           BatchNorm then leaves its running statistics alone */
    mp_block *block;    /* composite layers: their child sequences (owned), else NULL */
};

/* A sequence of layers with the planned storage of their outputs (and of their inputs cast to
 * the compute dtype where a GEMM/conv layer needs it). */
typedef struct mp_seq {
    mp_layer *layers;
    int n;
    mp_tensor *acts;  /* (n): each layer's output (max_batch, ...) */
    mp_tensor *xcast; /* (n): empty unless the layer's input is cast */
    bool recompute;   /* its composite layers run their forward again before their backward,
                         their inner storage being shared (the model's, model.recompute) */
} mp_seq;

#define MP_BLOCK_MAX 8
#define MP_BLOCK_CHILDREN 2

/* A composite layer's storage: child sequences of layers, walked by the sequence code like the
 * model's own (declaring, binding, planning, initialising, freeing, depth first, child by
 * child), and the tensors its class combines them with. Each child takes an input of the
 * block's input dtype. Residual blocks: child 0 the main path, child 1 the shortcut (empty for
 * the identity); transformer blocks: child 0 the attention path, child 1 the MLP. */
struct mp_block {
    int nchild;
    mp_layer layers[MP_BLOCK_CHILDREN][MP_BLOCK_MAX];
    int n[MP_BLOCK_CHILDREN];
    mp_tensor acts[MP_BLOCK_CHILDREN][MP_BLOCK_MAX], xcast[MP_BLOCK_CHILDREN][MP_BLOCK_MAX];
    int out_child;     /* the child whose output dtype the block's output has; -1: the input's */
    bool in_tmp_used;  /* in_tmp is needed */
    mp_tensor gbuf[2]; /* ping-pong activation gradients inside the children */
    mp_tensor out_tmp; /* (max_batch, out_shape) in the output dtype, the class's own */
    mp_tensor in_tmp;  /* (max_batch, in_shape) in the input dtype, the class's own */
    bool post_relu;    /* residual: a ReLU after the sum */
    bool fused_relu;   /* residual: that ReLU in the sum's op (add_relu; mp_layers_fuse) */
    /* How the class uses its tensors, for the memory plan (engine/seq_plan.c): with mid_tmp,
     * out_tmp holds a value the block writes between its children in forward, child 1's input,
     * kept for backward (the transformer's h); without, out_tmp, in_tmp and gbuf are backward
     * scratch. With sum_over_main the block's output may be written over child 0's output
     * (the residual sum, element for element). */
    bool mid_tmp, sum_over_main;
};

/* Child i of a block as a sequence. */
mp_seq mp_block_child(mp_block *b, int i);

/* Appends a layer to child `child` of b after it is set up by the caller through the returned
 * pointer; NULL when the child is full (MP_BLOCK_MAX). */
mp_layer *mp_block_append(mp_block *b, int child);

/* Sets up a residual block (engine/layer_residual.c) over an (H, W, C) input with `out` output
 * channels:
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

/* Builds layer l of type s->type (engine/layer_list.h) from its spec over a per-sample input of
 * in_shape, named `name`, with the defaults of the keys a config left unset (0 or false in s):
 * the type's init with its arguments. MP_EUSAGE naming the layer for a bad setting. */
typedef mp_status mp_layer_make(mp_layer *l, const mp_ops *ops, const char *name,
                                const mp_layer_spec *s, const int64_t in_shape[3]);

/* The make function of every registered type. */
#define MP_LAYER(type, make, nrequired, keys) mp_layer_make make;
#include "engine/layer_list.h"

/* Per-sample element count of a (H, W, C) shape. */
int64_t mp_shape_numel(const int64_t shape[3]);

/* Sets up a fully connected layer y = x W^T + b on the flattened input, or with per_token on
 * the last dimension of each position ((H, W, in) -> (H, W, out)): weight (out, in), bias
 * (out). MP_EUSAGE when out < 1. */
mp_status mp_layer_linear_init(mp_layer *l, const mp_ops *ops, const char *name,
                               const int64_t in_shape[3], int64_t out, bool per_token);

/* Ties a per-token linear layer to an embedding layer (an output head sharing the token
 * embedding's weight, GPT-2's): the layer then has no parameters of its own and no bias, and
 * the embedding adds its weight gradient to the head's. MP_EUSAGE when the shapes differ. */
mp_status mp_layer_linear_tie(mp_layer *l, mp_layer *embedding);

/* Sets up LayerNorm over the last dimension C of an (H, W, C) input: weight (C) = 1,
 * bias (C) = 0 (normalisation parameters). MP_EUSAGE for eps <= 0. */
mp_status mp_layer_layernorm_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], double eps);

/* Sets up an elementwise GELU, tanh form (no parameters). */
mp_status mp_layer_gelu_init(mp_layer *l, const mp_ops *ops, const char *name,
                             const int64_t in_shape[3]);

/* Sets up a token embedding over token ids (H, W, 1) -> (H, W, width): weight (vocab, width).
 * It must be the first layer (ids have no gradient). MP_EUSAGE for a bad shape. */
mp_status mp_layer_embedding_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], int64_t vocab, int64_t width);

/* Sets up a learned position embedding added to an (H, W, D) input: weight (H W, D). */
mp_status mp_layer_posembed_init(mp_layer *l, const mp_ops *ops, const char *name,
                                 const int64_t in_shape[3]);

/* Sets up the self-attention core over qkv (H, W, 3D) -> (H, W, D) (the op's layout) with
 * `heads` heads dividing D, an optional causal mask and dropout p on the probabilities; `flash`:
 * the tiled ops (attention_flash_*), saving 2 FP32 numbers per row instead of the (T, T)
 * probabilities. MP_EUSAGE for a bad shape, p outside [0, 1), or with flash heads wider than
 * MP_ATTN_FLASH_MAX_DH. */
mp_status mp_layer_attention_init(mp_layer *l, const mp_ops *ops, const char *name,
                                  const int64_t in_shape[3], int heads, bool causal, double p,
                                  bool flash);

/* Sets up a pre-LN transformer block over (H, W, D) (engine/layer_transformer.c): attention
 * with `heads` heads (causal or not; tiled when `flash`, as mp_layer_attention_init) and a 4x
 * MLP, dropout p on the attention probabilities and both residual branches (none when 0),
 * LayerNorm eps. MP_EUSAGE naming the block. */
mp_status mp_layer_transformer_init(mp_layer *l, const mp_ops *ops, const char *name,
                                    const int64_t in_shape[3], int heads, bool causal, double p,
                                    double eps, bool flash);

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

/* Makes batchnorm layer l one that applies a ReLU to its output (type "batchnorm_relu": the
 * fused ops, mp_bn_args.relu; its backward reads its output). false, changing nothing, when l
 * is not a plain batchnorm layer. */
bool mp_layer_batchnorm_fuse_relu(mp_layer *l);

/* Fuses every batchnorm layer followed by a relu layer among the n layers of `layers` and, depth
 * first, of their blocks' children into one (mp_layer_batchnorm_fuse_relu, the relu removed and
 * the layers after it moved up, the freed slot zeroed), and a block's ReLU after its sum into
 * the sum (mp_block.fused_relu): the same values, a pass over memory fewer each. Layer names,
 * parameters and buffers do not change. */
void mp_layers_fuse(mp_layer *layers, int *n);

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
