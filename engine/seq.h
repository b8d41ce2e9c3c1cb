/* Sequences of layers (the model, and the paths inside residual blocks): declaring and binding
 * parameters, planning activations in the opt level's dtypes, initialisation, forward and
 * backward, recursively through blocks. Internal to the engine's model code. */
#ifndef MP_SEQ_H
#define MP_SEQ_H

#include "engine/amp.h"
#include "engine/layer.h"
#include "engine/params.h"
#include "engine/plan.h"

/* Declares the parameters of every layer of s (depth first) as "<prefix><layer>.<suffix>".
 * MP_EUSAGE when a name is used twice. */
mp_status mp_seq_declare(const mp_seq *s, mp_params *p, const char *prefix);

/* Binds the parameters declared by mp_seq_declare (in the same order, *k counting them) and
 * the layers' buffers in stats' dtype: persistent ones as views of `stats` from element *off
 * on (advancing it), the others allocated. */
void mp_seq_bind(const mp_seq *s, const mp_params *p, int *k, const mp_tensor *stats,
                 int64_t *off);

/* Elements of the flat statistics the persistent buffers of s (blocks included) take, each
 * padded as mp_seq_bind places them. */
int64_t mp_seq_stats_numel(const mp_seq *s);

/* Adds each layer's output (and cast input, and saved tensor) for batches of max_batch under
 * policy a, starting from input dtype `in`, to the plan (engine/plan.h), blocks' inner storage
 * included; returns the output dtype of the last layer and raises *widest (elements per sample)
 * and *elem (bytes per element) to the largest seen. */
mp_dtype mp_seq_alloc(const mp_seq *s, const mp_amp_policy *a, mp_dtype in, int64_t max_batch,
                      int64_t *widest, size_t *elem, mp_plan *plan);

/* The tensors' lifetimes (engine/seq_plan.c): numbers the ops of a training step over s, whose
 * input x the plan does not hold, in the order mp_seq_forward and mp_seq_backward run them, and
 * tells the plan what each writes and reads; blocks' inner ops are numbered as their classes
 * run them, and with s->recompute a block's forward runs again at the start of its backward.
 * mp_seq_plan_forward returns the last output; mp_seq_plan_backward sets end[i] (may be NULL)
 * to the last op of top-level layer i's backward. */
const mp_tensor *mp_seq_plan_forward(const mp_seq *s, const mp_tensor *x, mp_plan *plan);
void mp_seq_plan_backward(const mp_seq *s, const mp_tensor *x, mp_plan *plan, int64_t *end);

/* A dtype with `elem` bytes an element, for gradient scratch that holds any activation's. */
mp_dtype mp_seq_scratch_dtype(size_t elem);

/* Gives every layer its dropout seed from the run's: seed ^ phi (k + 1), k the number of
 * parameters declared before it (*k counts them). */
void mp_seq_seed(const mp_seq *s, uint64_t seed, int *k);

/* Gives every layer of s, and of its blocks' children, step as its mask_step (NULL: none). */
void mp_seq_mask_step(const mp_seq *s, const int64_t *step);

/* Initialises parameters (FP32 masters rounded into the model copy) and buffers; *k counts the
 * parameters in declaration order. */
mp_status mp_seq_init(const mp_seq *s, mp_params *p, uint64_t seed, int *k);

/* Forward through s over x (n, ...); *out is a view of the last layer's output. */
mp_status mp_seq_forward(const mp_seq *s, const mp_tensor *x, bool train, int64_t step,
                         mp_tensor *out);

/* Called after layer `layer` of a sequence has written its gradients; a failure stops the pass. */
typedef struct mp_layer_hook {
    mp_status (*fn)(void *arg, int layer);
    void *arg;
} mp_layer_hook;

/* Backward through s for the batch last passed to forward: parameter gradients, and dx (the
 * dtype and shape of x) unless NULL; scratch are two ping-pong buffers big enough for any
 * inner activation gradient (a layer whose class allows it writes its dx over its dy when dy is
 * in one of them, so the buffer is not read and written in full twice; dy itself is never
 * written). `done` (may be NULL) hears of each layer as it finishes. With
 * s->recompute each composite layer first runs its training forward again from its input (the
 * same step, so the same dropout masks; BatchNorm's running statistics untouched). */
mp_status mp_seq_backward(const mp_seq *s, const mp_tensor *x, const mp_tensor *dy,
                          mp_tensor *dx, mp_tensor scratch[2], const mp_layer_hook *done);

/* Appends the persistent buffers of s (BatchNorm running statistics, depth first) to
 * out[*n..max) as "<prefix><layer>.<suffix>", counting them in *n (also past max). */
void mp_seq_buffers(const mp_seq *s, const char *prefix, mp_named_tensor *out, int *n, int max);

/* Parameter elements of s, and its activation elements counted without a plan: layer outputs,
 * saved tensors and the blocks' scratch each once (with s->recompute the blocks' inner storage
 * once, the largest), not O1's cast inputs (mp_model_plan_recompute; the memory check takes
 * the planned bytes from mp_model_plan_bytes). Allocates nothing. */
void mp_seq_count(const mp_seq *s, int64_t max_batch, int64_t *params, int64_t *acts);

/* Frees what bind allocated, and the blocks (the planned tensors' arena is the caller's). */
void mp_seq_free(const mp_seq *s);

#endif
