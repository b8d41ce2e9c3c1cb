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

void mp_test_each_preset(mp_test_preset_check check, bool cnns, bool transformers)
{
    const int64_t mnist[3] = {28, 28, 1}, cifar[3] = {16, 16, 3}, text[3] = {1, 9, 1};
    if (cnns) {
        const int64_t hidden[] = {32, 16};
        mp_preset_args mlp = {.hidden = hidden, .nhidden = 2}, none = {0};
        check("mlp", &mlp, mnist, 10);
        check("cnn", &none, mnist, 10);
        check("cnn_bn", &none, mnist, 10);
        mp_preset_args resnet = {.depth = 20}, wrn = {.depth = 10, .widen = 2, .dropout = 0.3};
        check("resnet20", &resnet, cifar, 10);
        check("wrn", &wrn, cifar, 10);
        mp_preset_args resnext = {.depth = 11, .cardinality = 2, .width = 4};
        check("resnext", &resnext, cifar, 10);
    }
    for (int matrix = 0; transformers && matrix < 2; matrix++) {
        mp_preset_args vit = {.depth = 2, .dim = 16, .heads = 2, .dropout = 0.1,
                              .conv_stem = true, .matrix_attention = matrix};
        check("vit", &vit, mnist, 10);
        mp_preset_args gpt = {.depth = 2, .dim = 16, .heads = 2, .dropout = 0.1,
                              .matrix_attention = matrix};
        check("gpt", &gpt, text, 37);
    }
}

mp_tensor mp_test_model_input(const mp_model *m, int64_t batch, const int64_t in[3],
                              int64_t classes, bool ids, mp_rng *r)
{
    int64_t xs[4] = {batch, in[0], in[1], in[2]};
    mp_tensor x = mp_tensor_alloc(mp_model_input_dtype(m), 4, xs, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        mp_store(x.data, x.dtype, (size_t)i,
                 ids ? (double)(int)(mp_rng_uniform(r) * (double)classes)
                     : 2.0 * mp_rng_uniform(r) - 1.0);
    return x;
}
