/* Whole-model test helpers; see test_model.h. */
#include "tests/util/test_util.h"

#include "tests/util/test_fd.h"
#include "tests/util/test_model.h"

#define MP_TEST_FD_STEP 1e-6

mp_amp_policy mp_test_f64_policy(void)
{
    mp_amp_policy a = mp_amp_resolve(MP_O0, MP_F16, true, false, 1.0, false);
    a.weights = a.norm = a.compute = a.input = MP_F64;
    return a;
}

/* sum r * logits of a training forward. */
static double loss_of(mp_model *m, const mp_tensor *x, const double *r)
{
    const mp_tensor *z;
    assert_int_equal(mp_model_forward(m, x, true, &z), MP_OK);
    double s = 0;
    for (int64_t i = 0; i < mp_tensor_numel(z); i++)
        s += r[i] * ((double *)z->data)[i];
    return s;
}

typedef struct model_case {
    mp_model *m;
    const mp_tensor *x;
    const double *r;
} model_case;

static double model_case_loss(void *arg)
{
    model_case *c = arg;
    return loss_of(c->m, c->x, c->r);
}

void mp_test_model_gradcheck(mp_model *m, const mp_tensor *x, const mp_tensor *dz)
{
    const double *r = dz->data;
    loss_of(m, x, r);
    assert_int_equal(mp_model_backward(m, x, dz), MP_OK);
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &m->params.groups[k];
        double *w = g->model.data, *dw = g->grad.data;
        int64_t total = g->total;
        double *num = test_malloc((size_t)(total + 1) * sizeof *num);
        model_case mc = {m, x, r};
        mp_test_fd(w, total, MP_TEST_FD_STEP, model_case_loss, &mc, num);
        assert_close(dw, num, (size_t)total, 1e-7, 1e-5);
        test_free(num);
    }
}
