/* The backend op table (DESIGN §5): the primitives layers are written against. Every op takes
 * tensors of any dtype the backend supports; inputs stored in half are widened to FP32 and
 * arithmetic accumulates in FP32 (FP64 for FP64 tensors, used by gradient checks), and each
 * output element is rounded once to its tensor's dtype. 2-D ops read a tensor as
 * (shape[0], numel / shape[0]). Ops return MP_OK, or MP_EINTERNAL for shapes that do not match. */
#ifndef MP_OPS_H
#define MP_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/status.h"
#include "engine/tensor.h"

/* Output of softmax_xent: the mean loss over the batch and the count of rows whose arg-max is
 * the label. */
typedef struct mp_xent_result {
    double loss;
    int64_t correct;
} mp_xent_result;

/* Hyper-parameters of one SGD step (PyTorch's torch.optim.SGD semantics). */
typedef struct mp_sgd_args {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool first_step; /* momentum buffer is initialised to the gradient on the first step */
} mp_sgd_args;

typedef struct mp_ops {
    const char *name;

    /* c (m, n) = alpha * op(a) * op(b) + beta * c, op(a) (m, k), op(b) (k, n); op transposes
     * when ta / tb. a, b and c may mix FP32, fp16 and bf16; FP64 only with FP64. */
    mp_status (*gemm)(bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                      double beta, mp_tensor *c);

    /* y (N, C) += b (C) broadcast over rows. */
    mp_status (*bias_add)(mp_tensor *y, const mp_tensor *b);

    /* db (C) = sum over rows of dy (N, C). */
    mp_status (*bias_grad)(const mp_tensor *dy, mp_tensor *db);

    /* y = max(x, 0), elementwise (NaN propagates); x and y same numel (may alias). */
    mp_status (*relu_forward)(const mp_tensor *x, mp_tensor *y);

    /* dx = dy where y > 0, else 0 (y is the forward output); may alias dy. */
    mp_status (*relu_backward)(const mp_tensor *y, const mp_tensor *dy, mp_tensor *dx);

    /* Softmax cross-entropy of logits (N, C) against labels (N) in [0, C), computed in FP32
     * (FP64 for FP64 logits). Fills *out with the mean loss and the correct count. When dlogits
     * is not NULL, writes d(mean loss * grad_scale)/dlogits into it (N, C). */
    mp_status (*softmax_xent)(const mp_tensor *logits, const int32_t *labels, double grad_scale,
                              mp_xent_result *out, mp_tensor *dlogits);

    /* One SGD step over flat tensors of equal numel: param, grad and momentum (FP32 or FP64).
     * momentum must be given when args->momentum != 0 and is ignored otherwise. */
    mp_status (*sgd_step)(const mp_sgd_args *args, mp_tensor *param, const mp_tensor *grad,
                          mp_tensor *momentum);

    /* x *= alpha, elementwise. */
    mp_status (*scale)(mp_tensor *x, double alpha);

    /* Every element of x = value (rounded to x's dtype). */
    mp_status (*fill)(mp_tensor *x, double value);

    /* dst = src rounded to dst's dtype; equal numel. */
    mp_status (*convert)(const mp_tensor *src, mp_tensor *dst);
} mp_ops;

/* The CPU reference backend (plain C11 + OpenBLAS, deterministic). */
const mp_ops *mp_backend_cpu(void);

/* Sets the number of BLAS threads the CPU backend uses in this process (n >= 1). */
void mp_backend_cpu_threads(int n);

#endif
