/* The backend op table (docs/ARCHITECTURE.md §5): the primitives layers are written against. Every
 * op takes tensors of any dtype the backend supports; inputs stored in half are widened to FP32 and
 * arithmetic accumulates in FP32 (FP64 for FP64 tensors, used by gradient checks), and each output
 * element is rounded once to its tensor's dtype (where the CPU runs bf16 GEMMs and convolutions on
 * bf16 instructions, subnormals there count as zero: docs/reproducibility.md). 2-D ops read a
 * tensor as (shape[0], numel / shape[0]). Ops return MP_OK, or MP_EINTERNAL for shapes that do not
 * match. Tensors, labels and mp_amp_state live in the backend's memory (host memory for the CPU,
 * device memory for CUDA: mem_alloc and the copies of engine/op_list.h, where every op is
 * declared). A backend may queue work: an op's results are in place once a later copy_out or sync
 * returns. Ops that hand back host values (softmax_xent, grad_stats) wait for their own results. */
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
    bool lr_from_state;         /* with an mp_amp_state: the rate is its lr, not lr above (the
                                   training loop's, so that a captured step reads each step's) */
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
 * with `momentum`; evaluation uses the running statistics. relu fuses a ReLU after it (as
 * cuDNN's and oneDNN's BatchNorm + ReLU do; engine/op_list.h). */
typedef struct mp_bn_args {
    double eps, momentum;
    bool relu;
} mp_bn_args;

/* Multi-head self-attention (attention_forward): `heads` heads over the token width, an
 * optional causal mask, and dropout on the probabilities in training (p = 0: none) with the
 * mask of dropout_forward for (seed, offset, step). */
typedef struct mp_attn_desc {
    int heads;
    bool causal;
    double dropout_p;
    uint64_t seed, offset;
    const int64_t *step; /* NULL, or the step index in the backend's memory (mp_mask_offset) */
} mp_attn_desc;

/* A backend: its name, whether the host can address its memory, and one function per op of
 * engine/op_list.h. */
typedef struct mp_ops {
    const char *name;
    bool host_memory; /* the host may read and write this backend's memory directly */
#define MP_OP(ret, op, params) ret(*op) params;
#include "engine/op_list.h"
} mp_ops;

/* The CPU reference backend (C11 over OpenBLAS and oneDNN, deterministic for a thread count). Its
 * memory is host memory from mp_alloc; copies are memcpy; nothing is queued. */
const mp_ops *mp_backend_cpu(void);

/* The CPU backend with host_memory false, for tests: every host access to tensors then takes the
 * copy path a GPU needs (engine/host_swap.h, the batch and bucket uploads), and its results must
 * be those of the plain CPU backend. It has graphs: it records and replays what CUDA captures
 * (engine/backend_cpu/graph.c). mp_backend_open("cpu") gives it when the environment has
 * MPDIST_CPU_STAGED=1. */
const mp_ops *mp_backend_cpu_staged(void);

/* Sets the number of threads the CPU backend uses in this process (n >= 1): the BLAS threads
 * (OpenBLAS) and, for the calling thread's ops, the OpenMP threads of oneDNN and of the
 * backend's own parallel loops (an OpenMP setting is per thread: another thread that runs ops
 * calls this itself). */
void mp_backend_cpu_threads(int n);

#endif
