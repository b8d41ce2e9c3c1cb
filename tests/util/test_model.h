/* Helpers for whole-model tests on the CPU backend: an all-FP64 policy, and the finite
 * difference check of every parameter gradient of a model (test_residual, test_transformer).
 * Include after tests/util/test_util.h. */
#ifndef MP_TEST_MODEL_H
#define MP_TEST_MODEL_H

#include "engine/model.h"
#include "engine/presets.h"
#include "engine/rng.h"

/* O0 with every dtype FP64 (weights, norm parameters, compute, input): gradient checks. */
mp_amp_policy mp_test_f64_policy(void);

/* Checks every parameter gradient of m (built with mp_test_f64_policy and initialised) for the
 * loss sum_i r_i logits_i, r the values of dz (n positions, num_classes, FP64), of training
 * forwards over x (m->step fixes the dropout masks): mp_model_backward against central
 * differences with step 1e-6, to atol 1e-7 and rtol 1e-5. */
void mp_test_model_gradcheck(mp_model *m, const mp_tensor *x, const mp_tensor *dz);

/* A whole-model check of one preset: its name, arguments, per-sample input shape (H, W, C) and
 * classes. */
typedef void (*mp_test_preset_check)(const char *preset, const mp_preset_args *pa,
                                     const int64_t in[3], int64_t classes);

/* Runs check on every preset at the small shapes of the plan tests: with cnns, mlp (hidden 32,
 * 16), cnn and cnn_bn on 28x28x1, resnet20, wrn (depth 10, widen 2, dropout 0.3) and resnext
 * (depth 11, cardinality 2, width 4) on 16x16x3; with transformers, vit (conv stem, depth 2,
 * width 16, 2 heads, dropout 0.1) on 28x28x1 and gpt (the same, 9 positions, 37 classes), each
 * with tiled and with matrix attention. 10 classes but gpt's. */
void mp_test_each_preset(mp_test_preset_check check, bool cnns, bool transformers);

/* A batch (batch, in) in m's input dtype (free with mp_tensor_free) drawn from r: token ids
 * below classes for gpt (ids), else U(-1, 1). */
mp_tensor mp_test_model_input(const mp_model *m, int64_t batch, const int64_t in[3],
                              int64_t classes, bool ids, mp_rng *r);

#endif
