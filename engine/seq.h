/* Sequences of layers (the model, and the paths inside residual blocks): declaring and binding
 * parameters, planning activations in the opt level's dtypes, initialisation, forward and
 * backward, recursively through blocks. Internal to the engine's model code. */
#ifndef MP_SEQ_H
#define MP_SEQ_H

#include "engine/amp.h"
#include "engine/layer.h"
#include "engine/params.h"

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

/* Where composite blocks' inner storage comes from when the model recomputes (mp_seq.recompute):
 * one region of `size` bytes at base, which every block's storage views from its start (only one
 * block's is live at a time). While base is NULL, allocation only measures: the tensors get no
 * storage, and size becomes the largest block's need. */
typedef struct mp_arena {
    char *base;
    size_t off, size;
} mp_arena;

/* Allocates each layer's output (and cast input) for batches of max_batch under policy a,
 * starting from input dtype `in`; returns the output dtype of the last layer and raises
 * *widest (elements per sample) and *elem (bytes per element) to the largest seen. With an
 * arena, blocks' inner storage is the arena's (see mp_arena), the sequence's own fresh. */
mp_dtype mp_seq_alloc(const mp_seq *s, const mp_amp_policy *a, mp_dtype in, int64_t max_batch,
                      int64_t *widest, size_t *elem, mp_arena *arena);

/* After mp_seq_alloc measured the arena and its region is allocated (base set): points every
 * block's inner storage into it. `in` as for mp_seq_alloc. */
void mp_seq_place_blocks(const mp_seq *s, const mp_amp_policy *a, mp_dtype in, int64_t max_batch,
                         mp_arena *arena);

/* A dtype with `elem` bytes an element, for gradient scratch that holds any activation's. */
mp_dtype mp_seq_scratch_dtype(size_t elem);

/* Gives every layer its dropout seed from the run's: seed ^ phi (k + 1), k the number of
 * parameters declared before it (*k counts them). */
void mp_seq_seed(const mp_seq *s, uint64_t seed, int *k);

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

/* Parameter and activation elements s would allocate (blocks included; with s->recompute the
 * blocks' inner storage once, the largest), without allocating. */
void mp_seq_count(const mp_seq *s, int64_t max_batch, int64_t *params, int64_t *acts);

/* Frees what alloc and bind allocated, and the blocks. */
void mp_seq_free(const mp_seq *s);

#endif
