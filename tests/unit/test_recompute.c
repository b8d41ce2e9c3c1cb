/* Activation recomputation (model.recompute): a model whose composite blocks run their forward
 * again before their backward gives bitwise the gradients, the input gradient's effect (every
 * parameter's gradient) and the BatchNorm running statistics of the same model without it, for
 * residual blocks with BatchNorm (resnet20's) and transformer blocks with dropout (vit's, whose
 * stem holds BatchNorm too), at O0 and O2 fp16, over two training steps with different dropout
 * masks; and it allocates fewer activation bytes (the allocator's counters): for resnet20 at
 * most 0.55x of the planned arena without it (engine/plan.h; 0.51x at O0 and O2 when the plan
 * came, 2026-11-30: the plan without recomputation already shares the blocks' scratch and its
 * ReLUs' inputs, so the ratio is no longer against every tensor in bytes of its own, where
 * recomputation had kept under half). */
#include "tests/util/test_util.h"

#include <string.h>

#include "engine/model.h"
#include "engine/presets.h"
#include "engine/rng.h"

typedef struct built {
    mp_model m;
    int64_t act_bytes; /* MP_MEM_ACTIVATIONS the build took */
} built;

static void build(built *b, const mp_layer_spec *specs, int n, const int64_t in[3],
                  int64_t classes, int64_t batch, const mp_amp_policy *amp, bool recompute)
{
    int64_t before = mp_mem_current(MP_MEM_ACTIVATIONS);
    mp_model_opts o = {.recompute = recompute};
    if (mp_model_build_opts(&b->m, mp_backend_cpu(), specs, n, in, classes, batch, amp, &o) !=
        MP_OK)
        fail_msg("%s", mp_error_message());
    b->act_bytes = mp_mem_current(MP_MEM_ACTIVATIONS) - before;
    assert_int_equal(mp_model_init(&b->m, 7), MP_OK);
}

/* Two training steps (forward, backward) on the same random batch and loss gradient; the
 * gradients and statistics of both models must be the same bytes after each. */
static void same_steps(built *a, built *b, const int64_t in[3], int64_t classes, int64_t batch)
{
    mp_rng r;
    mp_rng_seed(&r, 1, 2);
    int64_t xs[4] = {batch, in[0], in[1], in[2]};
    mp_tensor x = mp_tensor_alloc(mp_model_input_dtype(&a->m), 4, xs, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        mp_store(x.data, x.dtype, (size_t)i, 2.0 * mp_rng_uniform(&r) - 1.0);
    for (int step = 0; step < 2; step++) {
        const mp_tensor *la, *lb;
        a->m.step = b->m.step = step;
        assert_int_equal(mp_model_forward(&a->m, &x, true, &la), MP_OK);
        assert_int_equal(mp_model_forward(&b->m, &x, true, &lb), MP_OK);
        assert_memory_equal(la->data, lb->data, (size_t)mp_tensor_bytes(la));
        int64_t ds[2] = {batch * a->m.positions, classes};
        mp_tensor dl = mp_tensor_alloc(la->dtype, 2, ds, MP_MEM_WORKSPACE);
        for (int64_t i = 0; i < mp_tensor_numel(&dl); i++)
            mp_store(dl.data, dl.dtype, (size_t)i, 0.01 * (2.0 * mp_rng_uniform(&r) - 1.0));
        assert_int_equal(mp_model_backward(&a->m, &x, &dl), MP_OK);
        assert_int_equal(mp_model_backward(&b->m, &x, &dl), MP_OK);
        for (int k = 0; k < MP_NGROUPS; k++) {
            const mp_tensor *ga = &a->m.params.groups[k].grad, *gb = &b->m.params.groups[k].grad;
            if (ga->data)
                assert_memory_equal(ga->data, gb->data, (size_t)mp_tensor_bytes(ga));
        }
        if (a->m.stats.data)
            assert_memory_equal(a->m.stats.data, b->m.stats.data,
                                (size_t)mp_tensor_bytes(&a->m.stats));
        mp_tensor_free(&dl);
    }
    mp_tensor_free(&x);
}

/* Builds `preset` with and without recomputation at opt level `level`, checks the steps and
 * returns the activation bytes with / without. */
static double compare(const char *preset, const mp_preset_args *pa, const int64_t in[3],
                      int64_t classes, mp_opt_level level)
{
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n = mp_preset_specs(preset, pa, classes, specs);
    assert_true(n > 0);
    mp_amp_policy amp = mp_amp_resolve(level, MP_F16, true, true, 0.0, false);
    const int64_t batch = 4;
    built plain, again;
    build(&plain, specs, n, in, classes, batch, &amp, false);
    build(&again, specs, n, in, classes, batch, &amp, true);
    same_steps(&plain, &again, in, classes, batch);
    int64_t pa_elems = 0, plain_acts = 0, again_acts = 0;
    assert_int_equal(mp_model_plan_recompute(specs, n, in, classes, batch, false, &pa_elems,
                                             &plain_acts), MP_OK);
    assert_int_equal(mp_model_plan_recompute(specs, n, in, classes, batch, true, &pa_elems,
                                             &again_acts), MP_OK);
    assert_true(again_acts < plain_acts);
    double ratio = (double)again.act_bytes / (double)plain.act_bytes;
    printf("%s at %s: activations %lld -> %lld bytes (%.2f) with recomputation\n", preset,
           mp_opt_level_name(level), (long long)plain.act_bytes, (long long)again.act_bytes,
           ratio);
    mp_model_free(&plain.m);
    mp_model_free(&again.m);
    return ratio;
}

static void test_resnet20(void **state)
{
    (void)state;
    mp_preset_args pa = {.depth = 20};
    const int64_t in[3] = {16, 16, 3};
    assert_true(compare("resnet20", &pa, in, 10, MP_O0) <= 0.55);
    assert_true(compare("resnet20", &pa, in, 10, MP_O2) <= 0.55);
}

static void test_vit_with_dropout(void **state)
{
    (void)state;
    mp_preset_args pa = {.depth = 3, .dim = 32, .heads = 2, .dropout = 0.2, .conv_stem = true};
    const int64_t in[3] = {28, 28, 1};
    assert_true(compare("vit", &pa, in, 10, MP_O0) < 1.0);
    assert_true(compare("vit", &pa, in, 10, MP_O2) < 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet20),
        cmocka_unit_test(test_vit_with_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
