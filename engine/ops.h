/* The backend op table (DESIGN §5): the primitives layers are written against. Every op takes
 * tensors of any dtype the backend supports; inputs stored in half are widened to FP32 and
 * arithmetic accumulates in FP32 (FP64 for FP64 tensors, used by gradient checks), and each
 * output element is rounded once to its tensor's dtype. 2-D ops read a tensor as
 * (shape[0], numel / shape[0]). Ops return MP_OK, or MP_EINTERNAL for shapes that do not match.
 * Tensors, labels and mp_amp_state live in the backend's memory (host memory for the CPU, device
 * memory for CUDA: mem_alloc and the copies below). A backend may queue work: an op's results
 * are in place once a later copy_out or sync returns. Ops that hand back host values
 * (softmax_xent, grad_stats) wait for their own results. */
#ifndef MP_OPS_H
#define MP_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/amp_state.h"
#include "engine/scaler.h"
#include "engine/status.h"
#include "engine/tensor.h"

/* Output of softmax_xent: the mean loss over the batch and the count of rows whose arg-max is
 * the label. */
typedef struct mp_xent_result {
    double loss;
    int64_t correct;
} mp_xent_result;

typedef enum mp_optim_kind { MP_OPTIM_SGD, MP_OPTIM_ADAM, MP_OPTIM_ADAMW } mp_optim_kind;

/* Hyper-parameters of one optimizer step, with PyTorch's semantics: torch.optim.SGD (weight
 * decay added to the gradient, momentum buffer initialised to the first gradient, dampening,
 * Nesterov), torch.optim.Adam (L2 weight decay added to the gradient) and torch.optim.AdamW
 * (decoupled decay w -= lr * wd * w), both with bias correction. */
typedef struct mp_optim_args {
    mp_optim_kind kind;
    double lr, weight_decay;
    double momentum, dampening; /* SGD */
    bool nesterov;              /* SGD */
    double beta1, beta2, eps;   /* Adam, AdamW */
    int64_t step;               /* 1-based count of steps taken, this one included */
    double grad_scale;          /* every gradient is multiplied by this first (unscaling,
                                   averaging over ranks, clipping) */
    double max_norm;            /* with an mp_amp_state: clip to this global norm (0: never) */
} mp_optim_args;

/* What a backend counts of the host waiting for it (ops->counters): reads are copies from
 * backend memory to the host and results handed back to the host (copy_out, softmax_xent's
 * result, grad_stats), syncs are calls of sync; fence_waits are fence_wait calls (by loader
 * threads, before they reuse a batch slot); copies_in are copy_in calls, and pageable_in those
 * of them whose source is not host_alloc's memory (on a GPU such a copy cannot run
 * asynchronously: the driver may wait for the device). Totals since the process started. */
typedef struct mp_ops_counters {
    int64_t reads, syncs, fence_waits, copies_in, pageable_in;
} mp_ops_counters;

/* A 2-D convolution: x (N, H, W, C), w (K, R, S, C / groups), y (N, P, Q, K) with
 * P = (H + 2 pad[0] - dilation[0] (R - 1) - 1) / stride[0] + 1, Q likewise along W. NHWC and
 * KRSC as cuDNN's NHWC layout; cross-correlation as in PyTorch. */
typedef struct mp_conv_desc {
    int stride[2], pad[2], dilation[2];
    int groups; /* C and K divisible by groups */
} mp_conv_desc;

/* A 2-D pooling window over x (N, H, W, C) -> y (N, P, Q, C), P = (H + 2 pad[0] - window[0]) /
 * stride[0] + 1. Max pooling ignores padding; average pooling counts padded zeros in the
 * divisor (PyTorch's count_include_pad=True). Global average pooling is window = (H, W). */
typedef struct mp_pool_desc {
    int window[2], stride[2], pad[2];
    bool max;
} mp_pool_desc;

/* Batch normalisation over (N, H, W) per channel C, PyTorch's semantics: training uses the
 * batch mean and biased variance, and updates running_mean/running_var (unbiased variance)
 * with `momentum`; evaluation uses the running statistics. */
typedef struct mp_bn_args {
    double eps, momentum;
} mp_bn_args;

typedef struct mp_ops {
    const char *name;
    bool host_memory; /* the host may read and write this backend's memory directly */

    /* Backend memory: a zeroed block of `bytes` counted under `cat` (mp_mem_current), or NULL
     * when the device is out of memory (host memory aborts instead, as mp_alloc); mem_free
     * frees one (NULL is ignored). */
    void *(*mem_alloc)(size_t bytes, mp_mem_cat cat);
    void (*mem_free)(void *p);

    /* Host memory that copy_in reads fastest (pinned on CUDA, so the copy runs asynchronously:
     * the block must stay unchanged until a later copy_out or sync returns; mp_alloc's on the
     * CPU), zeroed and counted, or NULL; host_free frees one (NULL is ignored). */
    void *(*host_alloc)(size_t bytes, mp_mem_cat cat);
    void (*host_free)(void *p);

    /* Copies `bytes` from host memory into backend memory (copy_in), from backend memory into
     * host memory (copy_out, which waits for the ops queued before it), or within backend
     * memory (copy). */
    mp_status (*copy_in)(void *dst, const void *host, size_t bytes);
    mp_status (*copy_out)(void *host, const void *src, size_t bytes);
    mp_status (*copy)(void *dst, const void *src, size_t bytes);

    /* Waits until every queued op has finished, and reports a failure of any of them. */
    mp_status (*sync)(void);

    /* Fences: a point in the backend's queue that another thread can wait for. fence_record
     * creates *fence when it is NULL (it may stay NULL on a backend that queues nothing) and
     * marks the end of the work queued so far; fence_wait waits (from any thread) until that
     * work has finished; fence_free frees one (NULL is ignored). On CUDA a fence is a
     * cudaEvent_t. */
    mp_status (*fence_record)(void **fence);
    mp_status (*fence_wait)(void *fence);
    void (*fence_free)(void *fence);

    /* The backend's native queue (CUDA: its cudaStream_t), for a transport that orders its own
     * work after it (comm/transport_nccl.c); NULL on the CPU. */
    void *(*queue)(void);

    /* Copies the counters of host waits into *out (mp_ops_counters). */
    void (*counters)(mp_ops_counters *out);

    /* Bytes of backend memory free now, or -1 when the backend does not know (the CPU: the
     * caller judges host memory itself). */
    int64_t (*mem_free_bytes)(void);

    /* c (m, n) = alpha * op(a) * op(b) + beta * c, op(a) (m, k), op(b) (k, n); op transposes
     * when ta / tb. a, b and c may mix FP32, fp16 and bf16; FP64 only with FP64. */
    mp_status (*gemm)(bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                      double beta, mp_tensor *c);

    /* c (m, n) = op(a) op(b) + bias (n) broadcast over rows: gemm(ta, tb, 1, a, b, 0, c) then
     * bias_add(c, bias), except that a backend may add the bias in the product's epilogue
     * (cuBLASLt), rounding c once instead of twice. The linear layer's forward. */
    mp_status (*gemm_bias)(bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                           const mp_tensor *bias, mp_tensor *c);

    /* y (N, C) += b (C) broadcast over rows. */
    mp_status (*bias_add)(mp_tensor *y, const mp_tensor *b);

    /* db (C) = sum over rows of dy (N, C). */
    mp_status (*bias_grad)(const mp_tensor *dy, mp_tensor *db);

    /* y = max(x, 0), elementwise (NaN propagates); x and y same numel (may alias). */
    mp_status (*relu_forward)(const mp_tensor *x, mp_tensor *y);

    /* dx = dy where y > 0, else 0 (y is the forward output); may alias dy. */
    mp_status (*relu_backward)(const mp_tensor *y, const mp_tensor *dy, mp_tensor *dx);

    /* Softmax cross-entropy of logits (N, C) against labels (N) in [0, C) with label smoothing
     * eps (PyTorch's: the target is (1 - eps) onehot + eps / C), computed in FP32 (FP64 for
     * FP64 logits) with engine/xent_rule.h's rules. When out is not NULL, fills *out with the
     * mean loss and the arg-max hit count (the arg-max is the first maximum, a NaN above any
     * number), and the host waits for them; NULL queues nothing for the host. When dlogits is
     * not NULL, writes d(mean loss * g)/dlogits into it (N, C), g = grad_scale times the loss
     * scale read from `st` in backend memory (st NULL: g = grad_scale). A label outside [0, C)
     * is an error (MP_EINTERNAL): where the backend sees it without waiting (the CPU) the op
     * fails at once and writes nothing; otherwise (CUDA) the row's dlogits are zeroed,
     * st->found_inf is set (when st is given) so that the step is skipped, and the op fails at
     * its next call with a result. */
    mp_status (*softmax_xent)(const mp_tensor *logits, const int32_t *labels, double smoothing,
                              double grad_scale, mp_amp_state *st, mp_xent_result *out,
                              mp_tensor *dlogits);

    /* One optimizer step in a single pass over flat tensors of equal numel: param (updated in
     * its precision's arithmetic: FP32 for FP32 and half, FP64 for FP64) from grad (any dtype,
     * times args->grad_scale); when copy is not NULL it receives the new param rounded to its
     * dtype (the half model copy of FP32 master weights). slot1 (SGD momentum, Adam's first
     * moment) and slot2 (Adam's second moment) have param's numel, FP32 (FP64 with FP64
     * params); those the optimizer does not use may be NULL (SGD with momentum 0, slot2 for SGD).
     * With an mp_amp_state `st` (NULL: none) the step reads it instead of taking the host's
     * word: it does nothing when st->found_inf is set, multiplies gradients by
     * args->grad_scale / scale, times the clipping coefficient from st->sumsq when
     * args->max_norm > 0, and counts the step as st->steps + 1 (args->step is ignored). */
    mp_status (*optim_step)(const mp_optim_args *args, const mp_amp_state *st, mp_tensor *param,
                            mp_tensor *copy, const mp_tensor *grad, mp_tensor *slot1,
                            mp_tensor *slot2);

    /* The fused unscale-and-check over one flat gradient buffer: with g * (mult / scale)
     * computed per element in FP32 (FP64 for FP64), adds its sum of squares (accumulated in
     * FP64, in an order the backend chooses) to st->sumsq and sets st->found_inf when any
     * element is inf or NaN. With limit > 0 (the largest finite value of the half type the
     * gradient was stored or sent in), raises st->fill to max|g| / limit of the stored values
     * (the scaler's margin rule, engine/scaler.h); limit 0 leaves fill alone. The gradient
     * itself is not written. */
    mp_status (*amp_check)(const mp_tensor *grad, double mult, double limit, mp_amp_state *st);

    /* When st->found_inf is set (the step is skipped), copies saved into live (equal numel and
     * dtype); otherwise nothing. Reads the flag in backend memory: no host wait. */
    mp_status (*amp_revert)(const mp_amp_state *st, const mp_tensor *saved, mp_tensor *live);

    /* Ends a step: mp_amp_state_update (engine/amp_state.h). Returns MP_OK; whether the run
     * diverged is read from the state (consecutive_skips). */
    mp_status (*amp_update)(const mp_scaler_config *c, mp_amp_state *st);

    /* Adds the sum of squares of (grad * scale), computed per element in FP32 (FP64 for FP64)
     * and accumulated in FP64, to *sumsq, and sets *nonfinite when any scaled element is inf or
     * NaN. One pass; used for the overflow check and the global gradient norm. */
    mp_status (*grad_stats)(const mp_tensor *grad, double scale, double *sumsq, bool *nonfinite);

    /* x *= alpha, elementwise. */
    mp_status (*scale)(mp_tensor *x, double alpha);

    /* Every element of x = value (rounded to x's dtype). */
    mp_status (*fill)(mp_tensor *x, double value);

    /* dst = src rounded to dst's dtype; equal numel. */
    mp_status (*convert)(const mp_tensor *src, mp_tensor *dst);

    /* y = a + b elementwise (residual connections); equal numel, any dtypes. */
    mp_status (*add)(const mp_tensor *a, const mp_tensor *b, mp_tensor *y);

    /* Convolution (mp_conv_desc): y = conv(x, w); dx = conv_transpose(dy, w);
     * dw = correlation of x with dy. Outputs are overwritten. The one exception to rounding
     * once: cuDNN computes in one dtype, so where the inputs are half and the output FP32 (O1's
     * weight gradient) the CUDA backend rounds to half first, as PyTorch's autocast does. */
    mp_status (*conv2d_forward)(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                                mp_tensor *y);
    mp_status (*conv2d_backward_data)(const mp_conv_desc *d, const mp_tensor *dy,
                                      const mp_tensor *w, mp_tensor *dx);
    mp_status (*conv2d_backward_filter)(const mp_conv_desc *d, const mp_tensor *x,
                                        const mp_tensor *dy, mp_tensor *dw);

    /* Batch normalisation (mp_bn_args). x, y (N, H, W, C) in any dtype; running_mean,
     * running_var, save_mean, save_invstd (C) in FP32 (FP64 in tests); gamma, beta and their
     * gradients in FP32, or half at O3 without keep_batchnorm_fp32.
     * Training fills save_mean/save_invstd for backward and updates the running statistics;
     * evaluation (train == false) reads the running statistics and leaves save_* alone. */
    mp_status (*batchnorm_forward)(const mp_bn_args *a, bool train, const mp_tensor *x,
                                   const mp_tensor *gamma, const mp_tensor *beta,
                                   mp_tensor *running_mean, mp_tensor *running_var,
                                   mp_tensor *save_mean, mp_tensor *save_invstd, mp_tensor *y);
    /* Gradients of training-mode batch normalisation: dx (NULL for none), dgamma, dbeta
     * (overwritten), from the save_mean/save_invstd of the training forward. `a` is the one
     * that forward was given: its eps (> 0) goes to the library, which asks for the forward's
     * value (cuDNN); the result depends only on the saved statistics, and momentum is unused. */
    mp_status (*batchnorm_backward)(const mp_bn_args *a, const mp_tensor *x, const mp_tensor *dy,
                                    const mp_tensor *gamma, const mp_tensor *save_mean,
                                    const mp_tensor *save_invstd, mp_tensor *dx,
                                    mp_tensor *dgamma, mp_tensor *dbeta);

    /* Pooling (mp_pool_desc): forward, and dx from x, y and dy (max pooling routes each dy to
     * the first maximum of its window; average pooling spreads it evenly). */
    mp_status (*pool_forward)(const mp_pool_desc *d, const mp_tensor *x, mp_tensor *y);
    mp_status (*pool_backward)(const mp_pool_desc *d, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx);

    /* Inverted dropout with probability p: element i of the tensor is kept when a counter-based
     * hash of (seed, offset + i) says so, and scaled by 1 / (1 - p); the same (seed, offset)
     * gives the same mask on every backend, so backward recomputes it instead of storing it. */
    mp_status (*dropout_forward)(double p, uint64_t seed, uint64_t offset, const mp_tensor *x,
                                 mp_tensor *y);
    mp_status (*dropout_backward)(double p, uint64_t seed, uint64_t offset, const mp_tensor *dy,
                                  mp_tensor *dx);
} mp_ops;

/* The CPU reference backend (plain C11 + OpenBLAS, deterministic). Its memory is host memory
 * from mp_alloc; copies are memcpy; nothing is queued. */
const mp_ops *mp_backend_cpu(void);

/* The CPU backend with host_memory false, for tests: every host access to tensors then takes the
 * copy path a GPU needs (engine/host_swap.h, the batch and bucket uploads), and its results must
 * be those of the plain CPU backend. mp_backend_open("cpu") gives it when the environment has
 * MPDIST_CPU_STAGED=1. */
const mp_ops *mp_backend_cpu_staged(void);

/* Sets the number of BLAS threads the CPU backend uses in this process (n >= 1). */
void mp_backend_cpu_threads(int n);

#endif
