/* The model: a sequence of layers built from specs, with every parameter a named view into one
 * flat FP32 buffer and every gradient a view into one flat gradient buffer (docs/ARCHITECTURE.md
 * §4), and activations planned once at build time for the largest batch: nothing is allocated in a
  * step. */
#ifndef MP_MODEL_H
#define MP_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/amp.h"
#include "engine/layer.h"
#include "engine/ops.h"
#include "engine/params.h"
#include "engine/plan.h"

#define MP_MAX_LAYERS 64

/* How a model is built beyond its layers: ZeRO-1 sharding of the parameters (mp_params_shard)
 * and activation recomputation of its composite blocks. Zeroed: whole, no recomputation. */
typedef struct mp_model_opts {
    int shard_rank, shard_size; /* this rank among shard_size (0 or 1: unsharded) */
    bool recompute;             /* model.recompute: blocks keep only their input and output,
                                   and run their forward again before their backward */
    bool unplanned;             /* every activation in bytes of its own (engine/plan.h's
                                   apart: the tests' reference for the plan) */
    bool unfused;               /* BatchNorm and ReLU as two layers (mp_layers_fuse not run:
                                   the tests' reference for the fused ops) */
    bool forward_only;          /* evaluation and sampling: activations planned over the
                                   forward pass alone (no activation gradients, no backward
                                   scratch, no recomputation); backward is refused */
} mp_model_opts;

typedef struct mp_model {
    const mp_ops *ops;
    mp_amp_policy amp;
    int nlayers;
    mp_layer layers[MP_MAX_LAYERS];
    mp_params params;
    mp_tensor xcast[MP_MAX_LAYERS]; /* a GEMM/conv layer's input cast to the compute dtype,
                                       when it arrives in another dtype (O1); else empty */
    uint64_t seed;                  /* the run's seed (dropout masks) */
    int64_t step;                   /* set before each training forward (dropout masks) */
    int64_t max_batch;
    int64_t in_shape[3];            /* per-sample input (H, W, C) */
    int64_t num_classes;
    int64_t positions;              /* outputs per sample: logits (n positions, num_classes) */
    mp_dtype input;                 /* dtype of the batches (FP32 token ids for an embedding) */
    mp_tensor acts[MP_MAX_LAYERS];  /* each layer's output (max_batch, ...) */
    mp_tensor dbuf[2];              /* ping-pong activation gradients (max_batch, widest) */
    bool recompute;                 /* the blocks recompute (mp_model_opts) */
    bool forward_only;              /* planned for the forward pass alone (mp_model_opts) */
    /* Every activation and scratch tensor above (the layers' and their blocks') is a view of
     * one arena (MP_MEM_ACTIVATIONS) that the plan lays out over a training step: tensors
     * whose lifetimes do not overlap share bytes (engine/plan.h, docs/memory.md). The plan
     * keeps the lifetimes: its ops are numbered from 1, forward_end the last op of forward,
     * then the loss, then backward_end[i] the last op of top-level layer i's backward (a
     * block's: its window's, where every read of its inner layers counts). A forward_only
     * model's plan ends at the loss: backward_end is all zero, and dbuf and the blocks'
     * backward scratch have no storage (data NULL). */
    mp_plan plan;
    void *arena;
    int64_t forward_end, backward_end[MP_MAX_LAYERS];
    mp_tensor logits;               /* view of the last forward's output (n positions,
                                       num_classes) */
    mp_tensor stats;                /* the persistent buffers (BatchNorm running statistics),
                                       which the layers' buffers view; no data when none */
    mp_tensor stats_saved;          /* stats as the step found them (mp_model_stats_save) */
    int first_param[MP_MAX_LAYERS]; /* index of each layer's first parameter (blocks: the
                                       first of their inner layers) */
    /* Called during backward each time a top-level layer has written its gradients, with that
     * layer's first parameter index: from then on the gradients of parameters first..count-1
     * are final for this step (gradient buckets start their all-reduce on it). A head tied to
     * the token embedding has no parameters of its own: it passes count, and the embedding's
     * weight gradient, which the head writes first, is final only once the embedding (layer 0,
     * parameter 0) has added its own. A failure stops the backward pass. NULL: no calls. */
    mp_status (*grads_ready)(void *arg, int first_param);
    void *grads_ready_arg;
} mp_model;

/* Builds the layers of `specs` for inputs of per-sample shape in_shape (H, W, C) and batches of
 * up to max_batch, allocating parameters, gradients, buffers and activations in the dtypes the
 * opt-level policy `amp` says (NULL: O0, all FP32). GEMM/conv layers produce the compute dtype,
 * other layers keep their input's dtype (BatchNorm computes in FP32 whatever it stores), with
 * the exceptions of mp_layer_class.out_dtype. The last layer must produce num_classes features
 * per position: one position for a classifier, one per token for a language model. MP_EUSAGE
 * with a message naming the layer for a bad spec. */
mp_status mp_model_build(mp_model *m, const mp_ops *ops, const mp_layer_spec *specs, int nspecs,
                         const int64_t in_shape[3], int64_t num_classes, int64_t max_batch,
                         const mp_amp_policy *amp);

/* mp_model_build with options o (NULL: as mp_model_build). Sharded, each rank holds the
 * masters of its block only (mp_params_shard); recomputing, the activations inside the blocks
 * take the largest block's storage once instead of every block's, and their gradients are
 * bitwise those without recomputation. */
mp_status mp_model_build_opts(mp_model *m, const mp_ops *ops, const mp_layer_spec *specs,
                              int nspecs, const int64_t in_shape[3], int64_t num_classes,
                              int64_t max_batch, const mp_amp_policy *amp,
                              const mp_model_opts *o);

/* Counts, without allocating, the parameter elements and activation elements (for batches of
 * max_batch) that mp_model_build would allocate. MP_EUSAGE for a bad spec, as mp_model_build. */
mp_status mp_model_plan(const mp_layer_spec *specs, int nspecs, const int64_t in_shape[3],
                        int64_t num_classes, int64_t max_batch, int64_t *param_elems,
                        int64_t *act_elems);

/* mp_model_plan for a model that recomputes its blocks (fewer activation elements) or not. */
mp_status mp_model_plan_recompute(const mp_layer_spec *specs, int nspecs,
                                  const int64_t in_shape[3], int64_t num_classes,
                                  int64_t max_batch, bool recompute, int64_t *param_elems,
                                  int64_t *act_elems);

/* The bytes of the activation arena mp_model_build_opts would allocate for these specs under
 * policy amp and options o (NULL: the defaults; recompute, unplanned, unfused and forward_only
 * are read: the plan, engine/plan.h, made without memory), into *act_bytes. MP_EUSAGE for a bad
 * spec, as mp_model_build. */
mp_status mp_model_plan_bytes(const mp_layer_spec *specs, int nspecs, const int64_t in_shape[3],
                              int64_t num_classes, int64_t max_batch, const mp_amp_policy *amp,
                              const mp_model_opts *o, int64_t *act_bytes);

/* Fills the specs for the "mlp" preset: linear(hidden[i]) + relu for each hidden size, then
 * linear(num_classes), named fc1, relu1, ..., fcK. Returns the number of specs written. */
int mp_model_mlp_specs(mp_layer_spec *specs, const int64_t *hidden, int nhidden,
                       int64_t num_classes);

/* Initialises every parameter from `seed` (PyTorch's defaults: U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) for linear and conv weights and biases, ones and zeros for BatchNorm), in FP32
 * masters rounded once into the model copy, and the buffers to their initial values;
 * identically on every rank (a sharded master takes its block of the same values). */
mp_status mp_model_init(mp_model *m, uint64_t seed);

/* Gives the layers their dropout seeds from the run's `seed` (mp_model_init does too): every rank
 * draws the same masks for a step, whichever of them initialised the parameters. */
void mp_model_seed(mp_model *m, uint64_t seed);

/* Makes the model's dropout and attention masks draw from the step index the ops read at `step`
 * in the backend's memory as they run (mp_amp_state.mask_step, which amp_step_values writes
 * before each micro-batch), instead of m->step passed by value: the same counters when the two
 * agree, and a captured graph's launches draw each micro-batch's own masks. NULL goes back to
 * m->step. */
void mp_model_mask_step(mp_model *m, const int64_t *step);

/* The dtype of the batches the model takes (the policy's input dtype). */
mp_dtype mp_model_input_dtype(const mp_model *m);

/* MP_OK when every layer (blocks' children too) can run a batch of n samples (train: in
 * training), else the first refusal's MP_EUSAGE (BatchNorm over one value a channel, dropout's
 * counters of a step exceeded), which forward would give at that batch: for set-up to say it
 * before any step. */
mp_status mp_model_check_batch(const mp_model *m, int64_t n, bool train);

/* Forward over a batch x (n, H, W, C), n <= max_batch; *logits points at the last activation
 * viewed as (n positions, num_classes), owned by the model. */
mp_status mp_model_forward(mp_model *m, const mp_tensor *x, bool train, const mp_tensor **logits);

/* Backward from dlogits (n positions, num_classes) for the batch last passed to forward;
 * writes every parameter's gradient into the flat gradient buffer (overwriting it), calling
 * grads_ready as the layers finish (last layer first). MP_EINTERNAL for a model built
 * forward_only. */
mp_status mp_model_backward(mp_model *m, const mp_tensor *x, const mp_tensor *dlogits);

/* Sets the persistent buffers (BatchNorm running statistics) aside before a training forward
 * updates them: one copy in backend memory, queued. Nothing when the model has none. */
mp_status mp_model_stats_save(mp_model *m);

/* Puts back what mp_model_stats_save set aside when the step was skipped (st->found_inf, read
 * on the device by the amp_revert op), so a skipped step changes no statistic either; call
 * after the optimizer step and before amp_update clears the flag. */
mp_status mp_model_stats_revert(mp_model *m, const mp_amp_state *st);

/* Prints the layer table (name, type, output shape, parameters) and totals. */
void mp_model_summary(const mp_model *m, FILE *out);

/* The model's persistent buffers (BatchNorm running statistics; FP32), named
 * "<layer>.<suffix>" like parameters, in declaration order, written to out[0..max). Returns
 * how many there are (also when more than max). The tensors are views owned by the model. */
int mp_model_buffers(mp_model *m, mp_named_tensor *out, int max);

/* Frees everything the model allocated. */
void mp_model_free(mp_model *m);

#endif
