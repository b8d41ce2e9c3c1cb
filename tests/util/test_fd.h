/* The FP64 finite-difference gradient checks of the unit tests (one harness for every backward
 * of the engine): central differences of a scalar loss by each element of an FP64 tensor, and
 * a layer's loss L = sum(r * layer(x)), whose gradient with respect to the layer's output is r. */
#ifndef MP_TEST_FD_H
#define MP_TEST_FD_H

#include <stdint.h>

#include "engine/layer.h"
#include "engine/tensor.h"

/* num[i] = (loss(arg) with v[i] + h - loss(arg) with v[i] - h) / 2h for i in [0, n), each
 * v[i] restored afterwards; loss evaluates with v as it stands. */
void mp_test_fd(double *v, int64_t n, double h, double (*loss)(void *arg), void *arg,
                double *num);

/* sum a[i] b[i] over two FP64 tensors of one size. */
double mp_test_dot64(const mp_tensor *a, const mp_tensor *b);

/* L = sum(r * y) after the layer's training forward of x into y (asserting it succeeds). */
double mp_test_layer_loss(mp_layer *l, const mp_tensor *x, mp_tensor *y, const mp_tensor *r);

/* The analytic gradient `grad` of mp_test_layer_loss with respect to v (x or one of the layer's
 * FP64 parameters) against central differences of step h, within atol + rtol (assert_close). */
void mp_test_layer_fd_check(mp_layer *l, const mp_tensor *x, mp_tensor *y, const mp_tensor *r,
                            mp_tensor *v, const mp_tensor *grad, double h, double atol,
                            double rtol);

#endif
