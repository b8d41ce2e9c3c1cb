/* The finite-difference harness of the unit tests (see test_fd.h). */
#include "tests/util/test_fd.h"

#include <stdlib.h>

#include "tests/util/test_util.h"

void mp_test_fd(double *v, int64_t n, double h, double (*loss)(void *arg), void *arg,
                double *num)
{
    for (int64_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + h;
        double lp = loss(arg);
        v[i] = keep - h;
        double lm = loss(arg);
        v[i] = keep;
        num[i] = (lp - lm) / (2 * h);
    }
}

double mp_test_dot64(const mp_tensor *a, const mp_tensor *b)
{
    double s = 0;
    for (int64_t i = 0; i < mp_tensor_numel(a); i++)
        s += ((const double *)a->data)[i] * ((const double *)b->data)[i];
    return s;
}

double mp_test_layer_loss(mp_layer *l, const mp_tensor *x, mp_tensor *y, const mp_tensor *r)
{
    assert_int_equal(l->cls->forward(l, x, y, true), MP_OK);
    return mp_test_dot64(y, r);
}

typedef struct layer_case {
    mp_layer *l;
    const mp_tensor *x, *r;
    mp_tensor *y;
} layer_case;

static double layer_case_loss(void *arg)
{
    layer_case *c = arg;
    return mp_test_layer_loss(c->l, c->x, c->y, c->r);
}

void mp_test_layer_fd_check(mp_layer *l, const mp_tensor *x, mp_tensor *y, const mp_tensor *r,
                            mp_tensor *v, const mp_tensor *grad, double h, double atol,
                            double rtol)
{
    int64_t n = mp_tensor_numel(v);
    double *num = malloc(((size_t)n + 1) * sizeof *num);
    assert_non_null(num);
    layer_case c = {l, x, r, y};
    mp_test_fd(v->data, n, h, layer_case_loss, &c, num);
    assert_close(grad->data, num, (size_t)n, atol, rtol);
    free(num);
}
