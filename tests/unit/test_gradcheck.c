/* Finite-difference gradient checks in FP64 for every backward of the foundation (linear,
 * ReLU, softmax cross-entropy, and a linear-ReLU-linear-loss chain), on tiny shapes with the CPU
 * backend's FP64 path. L = sum(r * y) for a fixed random r makes dy = r. */
#include "tests/util/test_util.h"
#include "tests/util/test_fd.h"

#include <math.h>
#include <string.h>

#include "engine/layer.h"
#include "engine/rng.h"

#define EPS 1e-6
#define LS 0.1 /* label smoothing in the cross-entropy check */
#define RTOL 1e-6
#define ATOL 1e-9

static const mp_ops *ops;

static mp_tensor t64(int ndim, const int64_t *shape, mp_rng *r, double lo, double hi)
{
    mp_tensor t = mp_tensor_alloc(MP_F64, ndim, shape, MP_MEM_WORKSPACE);
    double *d = t.data;
    for (int64_t i = 0; i < mp_tensor_numel(&t); i++)
        d[i] = r ? lo + (hi - lo) * mp_rng_uniform(r) : 0.0;
    return t;
}

static void bind_params(mp_layer *l, mp_rng *r)
{
    for (int j = 0; j < l->nparams; j++) {
        l->w[j] = t64(l->param_ndim[j], l->param_shape[j], r, -1, 1);
        l->dw[j] = t64(l->param_ndim[j], l->param_shape[j], NULL, 0, 0);
    }
}

static void free_params(mp_layer *l)
{
    for (int j = 0; j < l->nparams; j++) {
        mp_tensor_free(&l->w[j]);
        mp_tensor_free(&l->dw[j]);
    }
}

static void check_layer(mp_layer *l, int64_t n, double xlo, double xhi, uint64_t seed)
{
    mp_rng rng;
    mp_rng_seed(&rng, seed, 0);
    bind_params(l, &rng);
    int64_t xs[4] = {n, l->in_shape[0], l->in_shape[1], l->in_shape[2]};
    int64_t ys[4] = {n, l->out_shape[0], l->out_shape[1], l->out_shape[2]};
    mp_tensor x = t64(4, xs, &rng, xlo, xhi), y = t64(4, ys, NULL, 0, 0);
    mp_tensor r = t64(4, ys, &rng, -1, 1), dx = t64(4, xs, NULL, 0, 0);
    mp_test_layer_loss(l, &x, &y, &r);
    assert_int_equal(l->cls->backward(l, &x, &y, &r, &dx), MP_OK);
    mp_test_layer_fd_check(l, &x, &y, &r, &x, &dx, EPS, ATOL, RTOL);
    for (int j = 0; j < l->nparams; j++)
        mp_test_layer_fd_check(l, &x, &y, &r, &l->w[j], &l->dw[j], EPS, ATOL, RTOL);
    mp_tensor *all[] = {&x, &y, &r, &dx};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
    free_params(l);
}

static void test_linear_backward(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {1, 1, 5};
    assert_int_equal(mp_layer_linear_init(&l, ops, "fc", in, 3, false), MP_OK);
    check_layer(&l, 4, -1, 1, 1);
    int64_t img[3] = {2, 2, 1}; /* an image input is flattened */
    assert_int_equal(mp_layer_linear_init(&l, ops, "fc", img, 2, false), MP_OK);
    check_layer(&l, 3, -1, 1, 2);
}

static void test_relu_backward(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {1, 2, 3};
    assert_int_equal(mp_layer_relu_init(&l, ops, "act", in), MP_OK);
    /* Inputs at least 0.1 away from the kink so the central difference is exact. */
    mp_rng rng;
    mp_rng_seed(&rng, 3, 0);
    int64_t s[4] = {2, 1, 2, 3};
    mp_tensor x = t64(4, s, &rng, 0.1, 1), y = t64(4, s, NULL, 0, 0);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i += 2)
        ((double *)x.data)[i] *= -1;
    mp_tensor r = t64(4, s, &rng, -1, 1), dx = t64(4, s, NULL, 0, 0);
    mp_test_layer_loss(&l, &x, &y, &r);
    assert_int_equal(l.cls->backward(&l, &x, &y, &r, &dx), MP_OK);
    mp_test_layer_fd_check(&l, &x, &y, &r, &x, &dx, EPS, ATOL, RTOL);
    mp_tensor *all[] = {&x, &y, &r, &dx};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

static void test_softmax_xent_backward(void **state)
{
    (void)state;
    mp_rng rng;
    mp_rng_seed(&rng, 4, 0);
    int64_t s[2] = {3, 5};
    mp_tensor z = t64(2, s, &rng, -3, 3), dz = t64(2, s, NULL, 0, 0);
    int32_t labels[3] = {0, 4, 2};
    mp_xent_result res;
    double scale = 8.0;
    assert_int_equal(ops->softmax_xent(&z, labels, LS, scale, NULL, &res, &dz), MP_OK);
    double num[15], ana[15];
    for (int i = 0; i < 15; i++) {
        double *p = &((double *)z.data)[i], keep = *p;
        mp_xent_result a, b;
        *p = keep + EPS;
        ops->softmax_xent(&z, labels, LS, 1.0, NULL, &a, NULL);
        *p = keep - EPS;
        ops->softmax_xent(&z, labels, LS, 1.0, NULL, &b, NULL);
        *p = keep;
        num[i] = scale * (a.loss - b.loss) / (2 * EPS);
        ana[i] = ((double *)dz.data)[i];
    }
    assert_close(ana, num, 15, ATOL, RTOL);
    /* The loss itself: mean over rows of -sum_j target_j log softmax_j with the smoothed
     * target (1 - LS) onehot + LS / C, computed here independently. */
    double want = 0;
    for (int r = 0; r < 3; r++) {
        double *row = (double *)z.data + r * 5, sum = 0;
        for (int j = 0; j < 5; j++)
            sum += exp(row[j]);
        for (int j = 0; j < 5; j++)
            want -= ((j == labels[r] ? 1 - LS : 0) + LS / 5) * (row[j] - log(sum)) / 3;
    }
    assert_close(&res.loss, &want, 1, 1e-12, 1e-12);
    mp_tensor_free(&z);
    mp_tensor_free(&dz);
}

/* linear(4->6) -> relu -> linear(6->3) -> mean cross-entropy, as the model chains them. */
static double chain_loss(mp_layer *l, mp_tensor *x, mp_tensor *h, mp_tensor *a, mp_tensor *z,
                         const int32_t *labels)
{
    mp_xent_result res;
    assert_int_equal(l[0].cls->forward(&l[0], x, h, true), MP_OK);
    assert_int_equal(l[1].cls->forward(&l[1], h, a, true), MP_OK);
    assert_int_equal(l[2].cls->forward(&l[2], a, z, true), MP_OK);
    assert_int_equal(ops->softmax_xent(z, labels, 0.0, 1.0, NULL, &res, NULL), MP_OK);
    return res.loss;
}

typedef struct chain_case {
    mp_layer *l;
    mp_tensor *x, *h, *a, *z;
    const int32_t *labels;
} chain_case;

static double chain_case_loss(void *arg)
{
    chain_case *c = arg;
    return chain_loss(c->l, c->x, c->h, c->a, c->z, c->labels);
}

static void test_chain_backward(void **state)
{
    (void)state;
    mp_rng rng;
    mp_rng_seed(&rng, 5, 0);
    mp_layer l[3];
    int64_t in[3] = {1, 1, 4}, hid[3] = {1, 1, 6};
    mp_layer_linear_init(&l[0], ops, "fc1", in, 6, false);
    mp_layer_relu_init(&l[1], ops, "relu1", hid);
    mp_layer_linear_init(&l[2], ops, "fc2", hid, 3, false);
    bind_params(&l[0], &rng);
    bind_params(&l[2], &rng);
    int64_t xs[2] = {2, 4}, hs[2] = {2, 6}, zs[2] = {2, 3};
    mp_tensor x = t64(2, xs, &rng, -1, 1), h = t64(2, hs, NULL, 0, 0), a = t64(2, hs, NULL, 0, 0);
    mp_tensor z = t64(2, zs, NULL, 0, 0), dz = t64(2, zs, NULL, 0, 0);
    mp_tensor da = t64(2, hs, NULL, 0, 0), dh = t64(2, hs, NULL, 0, 0);
    int32_t labels[2] = {1, 2};
    chain_loss(l, &x, &h, &a, &z, labels);
    mp_xent_result res;
    ops->softmax_xent(&z, labels, 0.0, 1.0, NULL, &res, &dz);
    assert_int_equal(l[2].cls->backward(&l[2], &a, &z, &dz, &da), MP_OK);
    assert_int_equal(l[1].cls->backward(&l[1], &h, &a, &da, &dh), MP_OK);
    assert_int_equal(l[0].cls->backward(&l[0], &x, &h, &dh, NULL), MP_OK);
    chain_case cc = {l, &x, &h, &a, &z, labels};
    for (int li = 0; li < 3; li += 2)
        for (int j = 0; j < 2; j++) {
            mp_tensor *v = &l[li].w[j];
            int64_t n = mp_tensor_numel(v);
            double num[32];
            assert_true(n <= 32);
            mp_test_fd(v->data, n, EPS, chain_case_loss, &cc, num);
            assert_close(l[li].dw[j].data, num, (size_t)n, ATOL, RTOL);
        }
    mp_tensor *all[] = {&x, &h, &a, &z, &dz, &da, &dh};
    for (int i = 0; i < 7; i++)
        mp_tensor_free(all[i]);
    free_params(&l[0]);
    free_params(&l[2]);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_backward),
        cmocka_unit_test(test_relu_backward),
        cmocka_unit_test(test_softmax_xent_backward),
        cmocka_unit_test(test_chain_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
