/* The fused ops (engine/op_list.h: batchnorm with mp_bn_args.relu, add_relu; issue 48) on the
 * CPU, bitwise against the unfused pairs they replace, and the models built with them
 * (mp_layers_fuse) bitwise against the same models built without (mp_model_opts.unfused):
 *   - BatchNorm + ReLU forward (training and evaluation) gives batchnorm_forward then
 *     relu_forward(y, y), and its backward (dx apart, dx over dy, no dx) relu_backward(y, dy, g)
 *     then batchnorm_backward on g, in every dtype, with values that round to -0 and with NaN
 *     and infinity in some channels;
 *   - every preset with BatchNorm or residual blocks at O0, O1 fp16 and O2 bf16 has fused layers
 *     and, over two training steps, the logits and gradients of the unfused model, bit for bit,
 *     in no more activation bytes.
 * add_relu against add and relu_forward is in test_elem_rule. */
#include "tests/util/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/presets.h"
#include "engine/rng.h"

static const mp_ops *ops;

static void same_bits(const mp_tensor *got, const mp_tensor *want, const char *what,
                      mp_dtype dt, int64_t M, int64_t C)
{
    assert_int_equal(mp_tensor_bytes(got), mp_tensor_bytes(want));
    if (memcmp(got->data, want->data, (size_t)mp_tensor_bytes(got)) != 0)
        fail_msg("%s differs from the unfused pair's (%s, M %lld, C %lld)", what,
                 mp_dtype_name(dt), (long long)M, (long long)C);
}

static mp_tensor copy_of(const mp_tensor *t)
{
    mp_tensor c = mp_test_rand(t->dtype, t->ndim, t->shape, NULL, 0, 0);
    memcpy(c.data, t->data, (size_t)mp_tensor_bytes(t));
    return c;
}

/* Inputs of M rows of C channels: x about a channel offset so that ReLU cuts about half of
 * the values, some exactly at the mean (they normalise to tiny values of either sign, which
 * round to -0 in half), and with `specials`, NaN and infinity in two channels. */
static void bn_inputs(mp_tensor *x, int64_t M, int64_t C, bool specials)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t c = 0; c < C; c++) {
            double v = mp_load(x->data, x->dtype, (size_t)(m * C + c)) + 0.1 * (double)(c % 3);
            if (m % 7 == 3)
                v = 0.1 * (double)(c % 3) + 1e-7 * (m % 2 ? 1 : -1);
            if (specials && C > 3 && c == 3 && m % 5 == 1)
                v = NAN;
            if (specials && C > 4 && c == 4 && m == M / 2)
                v = INFINITY;
            mp_store(x->data, x->dtype, (size_t)(m * C + c), v);
        }
}

static void bn_case(mp_dtype dt, int64_t M, int64_t C, bool specials, uint64_t seed)
{
    mp_rng r;
    mp_rng_seed(&r, 48, seed);
    const mp_dtype pt = dt == MP_F64 ? MP_F64 : MP_F32;
    int64_t s[2] = {M, C}, cs[1] = {C};
    mp_tensor x = mp_test_rand(dt, 2, s, &r, -1, 1), dy = mp_test_rand(dt, 2, s, &r, -1, 1);
    bn_inputs(&x, M, C, specials);
    mp_tensor g = mp_test_rand(pt, 1, cs, &r, 0.5, 1.5);
    mp_tensor b = mp_test_rand(pt, 1, cs, &r, -0.2, 0.2);
    mp_tensor rm = mp_test_rand(pt, 1, cs, &r, -0.1, 0.1);
    mp_tensor rv = mp_test_rand(pt, 1, cs, &r, 0.9, 1.1);
    mp_tensor rm2 = copy_of(&rm), rv2 = copy_of(&rv);
    mp_tensor sm = mp_test_rand(pt, 1, cs, NULL, 0, 0), si = copy_of(&sm);
    mp_tensor sm2 = copy_of(&sm), si2 = copy_of(&sm);
    mp_bn_args plain = {.eps = 1e-5, .momentum = 0.1}, fused = plain;
    fused.relu = true;
    for (int train = 1; train >= 0; train--) {
        mp_tensor want = mp_test_rand(dt, 2, s, NULL, 0, 0), got = copy_of(&want);
        assert_int_equal(ops->batchnorm_forward(&plain, train, &x, &g, &b, &rm, &rv, &sm, &si,
                                                &want),
                         MP_OK);
        assert_int_equal(ops->relu_forward(&want, &want), MP_OK);
        assert_int_equal(ops->batchnorm_forward(&fused, train, &x, &g, &b, &rm2, &rv2, &sm2,
                                                &si2, &got),
                         MP_OK);
        same_bits(&got, &want, train ? "BatchNorm + ReLU training forward's y"
                                     : "BatchNorm + ReLU evaluation forward's y", dt, M, C);
        same_bits(&rm2, &rm, "the running mean", dt, M, C);
        same_bits(&rv2, &rv, "the running variance", dt, M, C);
        if (!train) {
            mp_tensor_free(&want);
            mp_tensor_free(&got);
            continue;
        }
        same_bits(&sm2, &sm, "save_mean", dt, M, C);
        same_bits(&si2, &si, "save_invstd", dt, M, C);
        /* backward: dx apart, dx over dy, no dx */
        for (int mode = 0; mode < 3; mode++) {
            mp_tensor gm = copy_of(&dy), dxw = copy_of(&dy), dxg = copy_of(&dy);
            mp_tensor dgw = copy_of(&g), dbw = copy_of(&g), dgg = copy_of(&g), dbg = copy_of(&g);
            assert_int_equal(ops->relu_backward(&want, &dy, &gm), MP_OK);
            assert_int_equal(ops->batchnorm_backward(&plain, &x, NULL, &gm, &g, &sm, &si,
                                                     mode == 2 ? NULL : &dxw, &dgw, &dbw),
                             MP_OK);
            mp_tensor *dx = mode == 0 ? &dxg : mode == 1 ? &gm : NULL;
            if (mode == 1)
                memcpy(gm.data, dy.data, (size_t)mp_tensor_bytes(&dy));
            assert_int_equal(ops->batchnorm_backward(&fused, &x, &got, mode == 1 ? &gm : &dy, &g,
                                                     &sm, &si, dx, &dgg, &dbg),
                             MP_OK);
            if (dx)
                same_bits(dx, &dxw, mode ? "dx over dy" : "dx", dt, M, C);
            same_bits(&dgg, &dgw, "dgamma", dt, M, C);
            same_bits(&dbg, &dbw, "dbeta", dt, M, C);
            mp_tensor *all[] = {&gm, &dxw, &dxg, &dgw, &dbw, &dgg, &dbg};
            for (int i = 0; i < 7; i++)
                mp_tensor_free(all[i]);
        }
        mp_tensor_free(&want);
        mp_tensor_free(&got);
    }
    mp_tensor *all[] = {&x, &dy, &g, &b, &rm, &rv, &rm2, &rv2, &sm, &si, &sm2, &si2};
    for (int i = 0; i < 12; i++)
        mp_tensor_free(all[i]);
}

/* Shapes across the CPU's vectors (8 channels) and engine/bn_rule.h's chunks, on two threads. */
static void test_batchnorm_relu(void **state)
{
    (void)state;
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const int64_t shapes[][2] = {{2, 1}, {7, 3}, {64, 8}, {65, 17}, {1000, 16}, {3000, 67}};
    uint64_t seed = 0;
    mp_backend_cpu_threads(2);
    for (int d = 0; d < 4; d++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (int specials = 0; specials < 2; specials++)
                bn_case(dts[d], shapes[k][0], shapes[k][1], specials, seed++);
    mp_backend_cpu_threads(1);
}

/* A fused op refuses a y of the wrong shape. */
static void test_backward_needs_y(void **state)
{
    (void)state;
    int64_t s[2] = {4, 3}, bad[2] = {4, 2}, cs[1] = {3};
    mp_tensor x = mp_test_rand(MP_F32, 2, s, NULL, 1, 1);
    mp_tensor y = mp_test_rand(MP_F32, 2, bad, NULL, 0, 0);
    mp_tensor g = mp_test_rand(MP_F32, 1, cs, NULL, 1, 1);
    mp_tensor st = mp_test_rand(MP_F32, 1, cs, NULL, 1, 1);
    mp_tensor dg = mp_test_rand(MP_F32, 1, cs, NULL, 0, 0);
    mp_tensor db = mp_test_rand(MP_F32, 1, cs, NULL, 0, 0);
    mp_bn_args a = {.eps = 1e-5, .momentum = 0.1, .relu = true};
    assert_int_equal(ops->batchnorm_backward(&a, &x, NULL, &x, &g, &st, &st, NULL, &dg, &db),
                     MP_EINTERNAL);
    assert_int_equal(ops->batchnorm_backward(&a, &x, &y, &x, &g, &st, &st, NULL, &dg, &db),
                     MP_EINTERNAL);
    mp_tensor *all[] = {&x, &y, &g, &st, &dg, &db};
    for (int i = 0; i < 6; i++)
        mp_tensor_free(all[i]);
}

/* The layers of type `type` among m's, their blocks' children included. */
static int count_type(const mp_layer *l, int n, const char *type)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        k += strcmp(l[i].cls->type, type) == 0;
        for (int c = 0; l[i].block && c < l[i].block->nchild; c++)
            k += count_type(l[i].block->layers[c], l[i].block->n[c], type);
    }
    return k;
}

static void build(mp_model *m, const mp_layer_spec *specs, int n, const int64_t in[3],
                  int64_t classes, int64_t batch, const mp_amp_policy *amp, bool unfused)
{
    mp_model_opts o = {.unfused = unfused};
    if (mp_model_build_opts(m, ops, specs, n, in, classes, batch, amp, &o) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_model_init(m, 5), MP_OK);
}

/* One training step's logits and gradients, appended to out at *len. */
static void step(mp_model *m, const mp_tensor *x, const mp_tensor *dl, unsigned char *out,
                 size_t *len)
{
    const mp_tensor *logits;
    assert_int_equal(mp_model_forward(m, x, true, &logits), MP_OK);
    memcpy(out, logits->data, (size_t)mp_tensor_bytes(logits));
    *len = (size_t)mp_tensor_bytes(logits);
    assert_int_equal(mp_model_backward(m, x, dl), MP_OK);
    for (int k = 0; k < MP_NGROUPS; k++) {
        const mp_tensor *g = &m->params.groups[k].grad;
        if (g->data) {
            memcpy(out + *len, g->data, (size_t)mp_tensor_bytes(g));
            *len += (size_t)mp_tensor_bytes(g);
        }
    }
}

static void check(const char *preset, const mp_preset_args *pa, const int64_t in[3])
{
    mp_layer_spec specs[MP_MAX_LAYERS];
    const int64_t classes = 10, batch = 3;
    int n = mp_preset_specs(preset, pa, classes, specs);
    assert_true(n > 0);
    const mp_opt_level levels[] = {MP_O0, MP_O1, MP_O2};
    const mp_dtype halves[] = {MP_F16, MP_F16, MP_BF16};
    for (int li = 0; li < 3; li++) {
        mp_amp_policy amp = mp_amp_resolve(levels[li], halves[li], true, true, 0.0, false);
        mp_model a, b;
        build(&a, specs, n, in, classes, batch, &amp, true);
        build(&b, specs, n, in, classes, batch, &amp, false);
        assert_int_equal(count_type(a.layers, a.nlayers, "batchnorm_relu"), 0);
        int fused = count_type(b.layers, b.nlayers, "batchnorm_relu");
        int relus = count_type(b.layers, b.nlayers, "relu");
        if (fused == 0 || relus >= count_type(a.layers, a.nlayers, "relu"))
            fail_msg("%s: nothing fused (%d batchnorm_relu layers)", preset, fused);
        if (b.plan.size > a.plan.size)
            fail_msg("%s: fused activations take %zu bytes, unfused %zu", preset, b.plan.size,
                     a.plan.size);
        mp_rng r;
        mp_rng_seed(&r, 22, (uint64_t)li);
        int64_t xs[4] = {batch, in[0], in[1], in[2]};
        mp_tensor x = mp_test_rand(mp_model_input_dtype(&a), 4, xs, &r, -1, 1);
        int64_t ds[2] = {batch * a.positions, classes};
        mp_tensor dl = mp_test_rand(a.acts[a.nlayers - 1].dtype, 2, ds, &r, -0.01, 0.01);
        size_t cap = (size_t)mp_tensor_bytes(&dl);
        for (int k = 0; k < MP_NGROUPS; k++)
            cap += (size_t)mp_tensor_bytes(&a.params.groups[k].grad);
        unsigned char *want = malloc(cap), *got = malloc(cap);
        assert_true(want && got);
        for (int s = 0; s < 2; s++) {
            size_t lw, lg;
            a.step = b.step = s;
            step(&a, &x, &dl, want, &lw);
            step(&b, &x, &dl, got, &lg);
            assert_int_equal(lw, lg);
            if (memcmp(want, got, lw) != 0)
                fail_msg("%s at %s, step %d: the fused model's logits or gradients differ",
                         preset, mp_opt_level_name(levels[li]), s);
        }
        printf("%s at %s: %d BatchNorm + ReLU layers, activations %zu -> %zu bytes\n", preset,
               mp_opt_level_name(levels[li]), fused, a.plan.size, b.plan.size);
        free(want);
        free(got);
        mp_tensor_free(&dl);
        mp_tensor_free(&x);
        mp_model_free(&a);
        mp_model_free(&b);
    }
}

static void test_models(void **state)
{
    (void)state;
    const int64_t mnist[3] = {28, 28, 1}, cifar[3] = {16, 16, 3};
    mp_preset_args none = {0}, resnet = {.depth = 20};
    mp_preset_args wrn = {.depth = 10, .widen = 2, .dropout = 0.3};
    mp_preset_args resnext = {.depth = 11, .cardinality = 2, .width = 4};
    check("cnn_bn", &none, mnist);
    check("resnet20", &resnet, cifar);
    check("wrn", &wrn, cifar);
    check("resnext", &resnext, cifar);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batchnorm_relu),
        cmocka_unit_test(test_backward_needs_y),
        cmocka_unit_test(test_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
