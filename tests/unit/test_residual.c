/* Residual blocks: FP64 finite-difference gradient checks of every parameter of two stacked
 * blocks (the second block's input gradient feeds the first block's parameter gradients, and
 * both shortcut kinds, projection and identity, are crossed) for basic, grouped bottleneck
 * (ResNeXt) and wide blocks; and the presets' parameter counts against hand-computed totals. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/model.h"
#include "engine/presets.h"
#include "engine/rng.h"
#include "tests/util/test_model.h"

/* outputs: the elements of a sample's output, (H, W) positions of specs[1].out classes. */
static void check_blocks(const mp_layer_spec specs[2], const int64_t in[3], int64_t outputs)
{
    mp_amp_policy a = mp_test_f64_policy();
    mp_model m;
    const int64_t n = 3;
    if (mp_model_build(&m, mp_backend_cpu(), specs, 2, in, specs[1].out, n, &a) != MP_OK)
        fail_msg("%s", mp_error_message());
    mp_model_init(&m, 11);
    mp_rng rng;
    mp_rng_seed(&rng, 5, 0);
    mp_param_group *gn = &m.params.groups[MP_GROUP_NORM];
    for (int64_t i = 0; i < gn->total; i++) /* BN weights away from 1, biases away from 0 */
        ((double *)gn->model.data)[i] += 0.3 * (2 * mp_rng_uniform(&rng) - 1);
    int64_t xs[4] = {n, in[0], in[1], in[2]}, zs[2] = {n, outputs};
    mp_tensor x = mp_tensor_alloc(MP_F64, 4, xs, MP_MEM_WORKSPACE);
    mp_tensor dz = mp_tensor_alloc(MP_F64, 2, zs, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        ((double *)x.data)[i] = 2 * mp_rng_uniform(&rng) - 1;
    for (int64_t i = 0; i < n * outputs; i++)
        ((double *)dz.data)[i] = 2 * mp_rng_uniform(&rng) - 1;
    mp_test_model_gradcheck(&m, &x, &dz);
    mp_tensor_free(&x);
    mp_tensor_free(&dz);
    mp_model_free(&m);
}

static mp_layer_spec block(const char *type, const char *name, int64_t out, int64_t stride,
                           int64_t width, int64_t groups)
{
    mp_layer_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.type, sizeof s.type, "%s", type);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.out = out;
    s.stride = stride;
    s.width = width;
    s.groups = groups;
    return s;
}

static void test_basic_blocks(void **state)
{
    (void)state;
    const int64_t in[3] = {4, 4, 2};
    mp_layer_spec s[2] = {block("basic", "b1", 4, 2, 0, 1), block("basic", "b2", 4, 1, 0, 1)};
    check_blocks(s, in, 2 * 2 * 4);
}

static void test_bottleneck_blocks(void **state)
{
    (void)state;
    const int64_t in[3] = {4, 4, 4};
    mp_layer_spec s[2] = {block("bottleneck", "b1", 8, 2, 4, 2),
                          block("bottleneck", "b2", 8, 1, 4, 2)};
    check_blocks(s, in, 2 * 2 * 8);
}

static void test_wide_blocks(void **state)
{
    (void)state;
    const int64_t in[3] = {3, 3, 2};
    mp_layer_spec s[2] = {block("wide", "b1", 4, 1, 0, 1), block("wide", "b2", 4, 1, 0, 1)};
    check_blocks(s, in, 3 * 3 * 4);
}

static int64_t preset_params(const char *name, const mp_preset_args *a, const int64_t in[3])
{
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n = mp_preset_specs(name, a, 10, specs);
    if (n < 0)
        fail_msg("%s", mp_error_message());
    int64_t params = 0, acts = 0;
    assert_int_equal(mp_model_plan(specs, n, in, 10, 1, &params, &acts), MP_OK);
    return params;
}

/* conv(k x k, cin -> cout) without bias, and batchnorm (weight and bias). */
static int64_t cv(int64_t k, int64_t cin, int64_t cout, int64_t groups)
{
    return k * k * cin / groups * cout;
}

static int64_t bn(int64_t c) { return 2 * c; }

static void test_preset_parameter_counts(void **state)
{
    (void)state;
    const int64_t cifar[3] = {32, 32, 3};
    mp_preset_args a = {.widen = 4, .cardinality = 8, .width = 64};
    /* ResNet-20 with projection shortcuts at the two stage changes. */
    int64_t want = cv(3, 3, 16, 1) + bn(16);
    const int64_t ch[3] = {16, 32, 64};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) {
            int64_t cin = (b == 0 && s > 0) ? ch[s - 1] : ch[s];
            want += cv(3, cin, ch[s], 1) + bn(ch[s]) + cv(3, ch[s], ch[s], 1) + bn(ch[s]);
            if (cin != ch[s])
                want += cv(1, cin, ch[s], 1) + bn(ch[s]);
        }
    want += 64 * 10 + 10;
    assert_int_equal(preset_params("resnet20", &a, cifar), want);
    /* WRN-16-4: the stem, 2 wide blocks a stage (each stage's first with a projection). */
    want = cv(3, 3, 16, 1);
    int64_t cin = 16;
    for (int s = 0; s < 3; s++) {
        int64_t c = ch[s] * 4;
        for (int b = 0; b < 2; b++) {
            want += bn(cin) + cv(3, cin, c, 1) + bn(c) + cv(3, c, c, 1);
            if (cin != c)
                want += cv(1, cin, c, 1) + bn(c);
            cin = c;
        }
    }
    want += bn(256) + 256 * 10 + 10;
    assert_int_equal(preset_params("wrn", &a, cifar), want);
    /* ResNeXt-29 8x64d: 3 bottleneck blocks a stage. */
    want = cv(3, 3, 64, 1) + bn(64);
    cin = 64;
    const int64_t out[3] = {256, 512, 1024};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) {
            int64_t d = 8 * 64 << s;
            want += cv(1, cin, d, 1) + bn(d) + cv(3, d, d, 8) + bn(d) + cv(1, d, out[s], 1) +
                    bn(out[s]);
            if (cin != out[s])
                want += cv(1, cin, out[s], 1) + bn(out[s]);
            cin = out[s];
        }
    want += 1024 * 10 + 10;
    assert_int_equal(preset_params("resnext", &a, cifar), want);
    a.depth = 21;
    mp_layer_spec specs[MP_MAX_LAYERS];
    assert_int_equal(mp_preset_specs("resnet20", &a, 10, specs), -1);
    assert_non_null(strstr(mp_error_message(), "model.depth: resnet20 needs depth = 6n + 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_blocks),
        cmocka_unit_test(test_bottleneck_blocks),
        cmocka_unit_test(test_wide_blocks),
        cmocka_unit_test(test_preset_parameter_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
