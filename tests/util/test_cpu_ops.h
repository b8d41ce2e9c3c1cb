/* One run of the CPU backend's element-wise, pooling, BatchNorm and optimizer ops on seeded
 * inputs, kept for a byte-for-byte comparison with another run: the same ops with another
 * thread count (test_cpu_threads), or another compilation of them (test_isa_bits). Include
 * after tests/util/test_util.h. */
#ifndef MP_TEST_CPU_OPS_H
#define MP_TEST_CPU_OPS_H

#include "engine/ops.h"

enum { MP_TEST_OPS_MAX = 96 };

/* The outputs of one run, in a fixed order: tensors and scalars (the gradient statistics). */
typedef struct mp_test_outputs {
    mp_tensor t[MP_TEST_OPS_MAX];
    double v[MP_TEST_OPS_MAX];
    int n, nv;
} mp_test_outputs;

/* Adds t to o's tensors (o owns it from then on) and returns o's copy. */
mp_tensor *mp_test_keep(mp_test_outputs *o, mp_tensor t);

/* Fills o (emptied first) with the outputs of ops' relu_forward and _backward, add (and add in
 * place), add_relu, scale, dropout_forward and _backward, bias_add, bias_grad (also at 200
 * features), LayerNorm forward and backward (200 features; dx apart, in place, absent), both
 * attention paths forward and backward (tiled and (T, T); causal with dropout, and neither), max
 * pooling (2x2 tiling, and 3x3 stride 2 padded) and average pooling forward and backward (NaN in
 * some windows), BatchNorm (mp_test_cpu_bn_run) at C and at 100 channels, optim_step (Adam with a
 * half copy, SGD with momentum, with Nesterov, plain) and grad_stats (finite and with NaN), on
 * inputs of dtype dt drawn from one seed: activations N H W C = 4 x 16 x 16 x C (BatchNorm's 1024
 * rows are 16 chunks of engine/bn_rule.h), the optimizer 100,003 elements. */
void mp_test_cpu_ops_run(const mp_ops *ops, mp_dtype dt, int64_t C, mp_test_outputs *o);

/* Adds to o ops' BatchNorm on x (M rows of C channels, dtype dt) with per-channel tensors of
 * dtype pt, inputs drawn from r: y, the running and saved statistics, dx, dgamma and dbeta of a
 * training forward and backward, dgamma and dbeta of a backward without dx, y of an evaluation
 * forward, and y, dx, dgamma and dbeta of a training forward and backward fused with a ReLU. */
void mp_test_cpu_bn_run(const mp_ops *ops, mp_dtype dt, mp_dtype pt, int64_t M, int64_t C,
                        mp_rng *r, mp_test_outputs *o);

/* mp_test_cpu_bn_run with special values among the inputs: channel 0 of dy subnormal (in fp16,
 * FP32 and bf16: so is dx there), channel 2 of x and dy +-60000 (fp16's range edge: dx
 * overflows there), and in the next vector of 8 channels, NaN (channel 9 of x, every fifth row)
 * and infinity (channel 10 of x, one row): both make their channel's outputs NaN. */
void mp_test_cpu_bn_run_specials(const mp_ops *ops, mp_dtype dt, mp_dtype pt, int64_t M,
                                 int64_t C, mp_rng *r, mp_test_outputs *o);

/* Fails the test, naming `what`, dt and the output's index, unless a and b hold the same
 * outputs byte for byte; frees both's tensors. */
void mp_test_outputs_same(mp_test_outputs *a, mp_test_outputs *b, const char *what, mp_dtype dt);

#endif
