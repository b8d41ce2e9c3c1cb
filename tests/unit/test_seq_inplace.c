/* Activation gradients written in place: mp_seq_backward lets a layer whose class allows it
 * (ReLU, BatchNorm) write dx over dy where dy is in one of its scratch buffers. A model's
 * backward must give the bytes of the same layers' backwards each writing a buffer of its own,
 * and leave the caller's loss gradient as it was: cnn_bn (BatchNorm then ReLU, twice) and
 * resnet20 (residual blocks, whose backward sends one gradient down both paths) at O0, O1 fp16
 * (BatchNorm and ReLU between dtypes) and O2 bf16, and small models whose last layer is a
 * ReLU, whose dy is the caller's. */
#include "tests/util/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/presets.h"
#include "engine/rng.h"

/* The top-level layers' backwards in turn, layer i's dx into a tensor of its own (the order and
 * inputs of mp_seq_backward). */
static void backward_apart(mp_model *m, const mp_tensor *x, const mp_tensor *dl)
{
    int64_t n = x->shape[0];
    mp_tensor g = *dl, own[MP_MAX_LAYERS] = {{0}};
    for (int i = m->nlayers - 1; i >= 0; i--) {
        mp_layer *l = &m->layers[i];
        mp_tensor xin = i == 0 ? *x : mp_tensor_batch(&m->acts[i - 1], n);
        if (m->xcast[i].data)
            xin = mp_tensor_batch(&m->xcast[i], n);
        mp_tensor y = mp_tensor_batch(&m->acts[i], n);
        if (i > 0) {
            mp_tensor shape = mp_tensor_batch(&m->acts[i - 1], n);
            own[i] = mp_tensor_alloc(shape.dtype, shape.ndim, shape.shape, MP_MEM_WORKSPACE);
        }
        assert_int_equal(l->cls->backward(l, &xin, &y, &g, i > 0 ? &own[i] : NULL), MP_OK);
        if (i > 0)
            g = own[i];
    }
    for (int i = 1; i < m->nlayers; i++)
        mp_tensor_free(&own[i]);
}

/* Model `name` of specs on inputs of shape in, 10 classes, at `level` with `half`. */
static void check_specs(const char *preset, const mp_layer_spec *specs, int nspecs,
                        const int64_t in[3], mp_opt_level level, mp_dtype half)
{
    const int64_t classes = 10, batch = 4;
    mp_amp_policy amp = mp_amp_resolve(level, half, true, true, 0.0, false);
    mp_model m;
    if (mp_model_build(&m, mp_backend_cpu(), specs, nspecs, in, classes, batch, &amp) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_model_init(&m, 7), MP_OK);
    mp_rng r;
    mp_rng_seed(&r, 3, 4);
    int64_t xs[4] = {batch, in[0], in[1], in[2]};
    mp_tensor x = mp_tensor_alloc(mp_model_input_dtype(&m), 4, xs, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        mp_store(x.data, x.dtype, (size_t)i, 2.0 * mp_rng_uniform(&r) - 1.0);
    const mp_tensor *logits;
    assert_int_equal(mp_model_forward(&m, &x, true, &logits), MP_OK);
    int64_t ds[2] = {batch * m.positions, classes};
    mp_tensor dl = mp_tensor_alloc(logits->dtype, 2, ds, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&dl); i++)
        mp_store(dl.data, dl.dtype, (size_t)i, 0.01 * (2.0 * mp_rng_uniform(&r) - 1.0));
    size_t dl_bytes = (size_t)mp_tensor_bytes(&dl);
    void *dl_was = malloc(dl_bytes), *grads[MP_NGROUPS] = {0};
    assert_non_null(dl_was);
    memcpy(dl_was, dl.data, dl_bytes);

    backward_apart(&m, &x, &dl);
    for (int k = 0; k < MP_NGROUPS; k++) {
        const mp_tensor *gr = &m.params.groups[k].grad;
        if (!gr->data)
            continue;
        grads[k] = malloc((size_t)mp_tensor_bytes(gr));
        assert_non_null(grads[k]);
        memcpy(grads[k], gr->data, (size_t)mp_tensor_bytes(gr));
    }
    /* forward again: the planned arena (engine/plan.h) reuses what a backward has read */
    assert_int_equal(mp_model_forward(&m, &x, true, &logits), MP_OK);
    assert_int_equal(mp_model_backward(&m, &x, &dl), MP_OK);
    for (int k = 0; k < MP_NGROUPS; k++) {
        const mp_tensor *gr = &m.params.groups[k].grad;
        if (grads[k] && memcmp(grads[k], gr->data, (size_t)mp_tensor_bytes(gr)) != 0)
            fail_msg("%s at %s: gradients of group %d differ from the backward into buffers of "
                     "its own", preset, mp_opt_level_name(level), k);
        free(grads[k]);
    }
    if (memcmp(dl_was, dl.data, dl_bytes) != 0)
        fail_msg("%s at %s: the backward wrote over the caller's loss gradient", preset,
                 mp_opt_level_name(level));
    free(dl_was);
    mp_tensor_free(&dl);
    mp_tensor_free(&x);
    mp_model_free(&m);
}

static void check(const char *preset, const mp_preset_args *pa, const int64_t in[3],
                  mp_opt_level level, mp_dtype half)
{
    mp_layer_spec specs[MP_MAX_LAYERS];
    int nspecs = mp_preset_specs(preset, pa, 10, specs);
    assert_true(nspecs > 0);
    check_specs(preset, specs, nspecs, in, level, half);
}

/* The last layer a ReLU: its dy is the caller's loss gradient, which it must not write over. */
static void test_relu_last(void **state)
{
    (void)state;
    const int64_t in[3] = {1, 1, 12};
    mp_layer_spec last[3] = {{.type = "linear", .out = 10}, {.type = "batchnorm"},
                             {.type = "relu"}};
    check_specs("linear-batchnorm-relu", last, 3, in, MP_O0, MP_F16);
    check_specs("linear-batchnorm-relu", last, 3, in, MP_O2, MP_F16);
}

static void test_cnn_bn(void **state)
{
    (void)state;
    const mp_preset_args pa = {0};
    const int64_t in[3] = {12, 12, 1};
    check("cnn_bn", &pa, in, MP_O0, MP_F16);
    check("cnn_bn", &pa, in, MP_O1, MP_F16);
    check("cnn_bn", &pa, in, MP_O2, MP_BF16);
}

static void test_resnet20(void **state)
{
    (void)state;
    const mp_preset_args pa = {.depth = 20};
    const int64_t in[3] = {8, 8, 3};
    check("resnet20", &pa, in, MP_O0, MP_F16);
    check("resnet20", &pa, in, MP_O1, MP_F16);
    check("resnet20", &pa, in, MP_O2, MP_BF16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu_last),
        cmocka_unit_test(test_cnn_bn),
        cmocka_unit_test(test_resnet20),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
