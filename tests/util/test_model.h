/* Helpers for whole-model tests on the CPU backend: an all-FP64 policy, and the finite
 * difference check of every parameter gradient of a model (test_residual, test_transformer).
 * Include after tests/util/test_util.h. */
#ifndef MP_TEST_MODEL_H
#define MP_TEST_MODEL_H

#include "engine/model.h"

/* O0 with every dtype FP64 (weights, norm parameters, compute, input): gradient checks. */
mp_amp_policy mp_test_f64_policy(void);

/* Checks every parameter gradient of m (built with mp_test_f64_policy and initialised) for the
 * loss sum_i r_i logits_i, r the values of dz (n positions, num_classes, FP64), of training
 * forwards over x (m->step fixes the dropout masks): mp_model_backward against central
 * differences with step 1e-6, to atol 1e-7 and rtol 1e-5. */
void mp_test_model_gradcheck(mp_model *m, const mp_tensor *x, const mp_tensor *dz);

#endif
