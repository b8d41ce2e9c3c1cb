/* The inverted dropout layer: in training, each element is zeroed with probability p and the
 * kept ones scaled by 1 / (1 - p); in evaluation it is the identity (a copy). The mask is never
 * stored: it is the backend's counter-based hash of (seed, offset + i) with
 *   offset = step * MP_MASK_STEP_STRIDE,  MP_MASK_STEP_STRIDE = 2^32,
 * i the element's index in the (N, H, W, C) batch tensor. Each step thus draws from its own
 * range of 2^32 counters whatever the batch size (a short last batch uses a prefix of it), and
 * backward, run with the same step, recomputes the forward's mask. The step is l->step, or, when
 * l->mask_step is set (a model whose steps may be graphs: mp_model_mask_step), the index the op
 * reads there as it runs (the op's offset 0 and step that pointer: the same counters).
 * Two dropout layers given the same seed draw the same mask for equal shapes: the owner should
 * give each its own seed. */
#include "engine/dropout_mask.h"
#include "engine/layer.h"

/* One counter of a step's 2^32 per element of the batch. */
static mp_status dropout_check_batch(const mp_layer *l, int64_t n, bool train)
{
    int64_t elems = n * mp_shape_numel(l->in_shape);
    if (train && l->dropout_p > 0 && (uint64_t)elems > MP_MASK_STEP_STRIDE)
        return mp_fail(MP_EUSAGE, "layer %s: dropout over a batch of %lld draws %lld counters, "
                       "more than the 2^32 of a step: a smaller batch or no dropout", l->name,
                       (long long)n, (long long)elems);
    return MP_OK;
}

/* The counter offset of this layer's current step (0 when the op reads the step at
 * l->mask_step); MP_EUSAGE for a batch too large for the per-step range. */
static mp_status step_offset(const mp_layer *l, const mp_tensor *t, uint64_t *offset)
{
    MP_TRY(dropout_check_batch(l, mp_tensor_numel(t) / mp_shape_numel(l->in_shape), true));
    *offset = l->mask_step ? 0 : (uint64_t)l->step * MP_MASK_STEP_STRIDE;
    return MP_OK;
}

static mp_status dropout_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    if (!train)
        return l->ops->convert(x, y);
    uint64_t offset = 0;
    MP_TRY(step_offset(l, x, &offset));
    return l->ops->dropout_forward(l->dropout_p, l->seed, offset, l->mask_step, x, y);
}

static mp_status dropout_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                  const mp_tensor *dy, mp_tensor *dx)
{
    (void)x;
    (void)y;
    if (!dx)
        return MP_OK;
    uint64_t offset = 0;
    MP_TRY(step_offset(l, dy, &offset));
    if (dy->dtype == dx->dtype)
        return l->ops->dropout_backward(l->dropout_p, l->seed, offset, l->mask_step, dy, dx);
    /* dy in a wider dtype than the output (the last layer of a transformer branch at O1, whose
     * FP32 residual sum passes its gradient back): rounded to dx's dtype first, as autograd
     * casts the gradient of a half input of a promoted add, then dropped in place. */
    MP_TRY(l->ops->convert(dy, dx));
    return l->ops->dropout_backward(l->dropout_p, l->seed, offset, l->mask_step, dx, dx);
}

static const mp_layer_class mp_dropout_class = {
    .type = "dropout", .forward = dropout_forward, .backward = dropout_backward,
    .skips_x = true, .skips_y = true, .check_batch = dropout_check_batch};

mp_status mp_layer_dropout_init(mp_layer *l, const mp_ops *ops, const char *name,
                                const int64_t in_shape[3], double p)
{
    if (!(p >= 0 && p < 1))
        return mp_fail(MP_EUSAGE, "layer %s: dropout probability must be in [0, 1) (got %g)",
                       name, p);
    mp_layer_begin(l, &mp_dropout_class, ops, name, in_shape, in_shape[2]);
    l->dropout_p = p;
    return MP_OK;
}

mp_status mp_layer_dropout_make(mp_layer *l, const mp_ops *ops, const char *name,
                                const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_dropout_init(l, ops, name, in_shape, s->p);
}
