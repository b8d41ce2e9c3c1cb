/* The forward-only plan (mp_model_opts.forward_only, engine/plan.h's drop_unwalked: what
 * mpdist eval and mpdist sample build): for every preset at O0, O1 fp16 and O2 bf16, an
 * evaluation forward of the model planned for the forward pass alone, its arena poisoned first
 * (every byte 0xFF, a NaN in every float dtype), must give bitwise the logits of the same model
 * planned for a training step, twice (the second over the first's bytes). An op that reads a
 * tensor the forward-only walk let go, or one the walk never reached (backward scratch, which
 * gets no storage), reads poison, another tensor's values or NULL. The forward-only arena is
 * smaller than the training one, mp_model_plan_bytes gives it exactly, the activation
 * gradients and the parameters' gradients have no storage, nor has a separate FP32 master (O2
 * initialises the half copy from the masters, the forward-only model without them: the same
 * bits), and backward is refused. */
#include "tests/util/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"
#include "tests/util/test_model.h"

static void build(mp_model *m, const mp_layer_spec *specs, int n, const int64_t in[3],
                  int64_t classes, int64_t batch, const mp_amp_policy *amp, bool forward_only)
{
    mp_model_opts o = {.forward_only = forward_only};
    if (mp_model_build_opts(m, mp_backend_cpu(), specs, n, in, classes, batch, amp, &o) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_model_init(m, 5), MP_OK);
}

/* An evaluation forward of m on x; a copy of the logits into out, their bytes in *len. */
static void forward(mp_model *m, const mp_tensor *x, unsigned char *out, size_t *len)
{
    const mp_tensor *logits;
    assert_int_equal(mp_model_forward(m, x, false, &logits), MP_OK);
    *len = (size_t)mp_tensor_bytes(logits);
    memcpy(out, logits->data, *len);
}

static void check(const char *preset, const mp_preset_args *pa, const int64_t in[3],
                  int64_t classes)
{
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n = mp_preset_specs(preset, pa, classes, specs);
    assert_true(n > 0);
    const mp_opt_level levels[] = {MP_O0, MP_O1, MP_O2};
    const mp_dtype halves[] = {MP_F16, MP_F16, MP_BF16};
    const int64_t batch = 3;
    for (int li = 0; li < 3; li++) {
        mp_amp_policy amp = mp_amp_resolve(levels[li], halves[li], true, true, 0.0, false);
        mp_model a, b;
        build(&a, specs, n, in, classes, batch, &amp, false);
        build(&b, specs, n, in, classes, batch, &amp, true);
        mp_rng r;
        mp_rng_seed(&r, 23, (uint64_t)li);
        mp_tensor x = mp_test_model_input(&a, batch, in, classes, strcmp(preset, "gpt") == 0,
                                          &r);
        size_t cap = (size_t)(batch * a.positions * classes) * sizeof(double);
        unsigned char *want = malloc(cap), *got = malloc(cap);
        assert_true(want && got);
        for (int s = 0; s < 2; s++) {
            size_t lw, lg;
            memset(b.arena, 0xFF, b.plan.size);
            forward(&a, &x, want, &lw);
            forward(&b, &x, got, &lg);
            assert_int_equal(lw, lg);
            if (memcmp(want, got, lw) != 0)
                fail_msg("%s at %s, forward %d: the forward-only model's logits differ", preset,
                         mp_opt_level_name(levels[li]), s);
        }
        int64_t ahead = 0;
        mp_model_opts fo = {.forward_only = true};
        assert_int_equal(mp_model_plan_bytes(specs, n, in, classes, batch, &amp, &fo, &ahead),
                         MP_OK);
        assert_int_equal(ahead, (int64_t)b.plan.size);
        printf("%s at %s: forward-only arena %zu bytes, training arena %zu (%.2f)\n", preset,
               mp_opt_level_name(levels[li]), b.plan.size, a.plan.size,
               (double)b.plan.size / (double)a.plan.size);
        if (b.plan.size >= a.plan.size)
            fail_msg("%s at %s: the forward-only arena (%zu bytes) is not smaller than the "
                     "training one (%zu)", preset, mp_opt_level_name(levels[li]), b.plan.size,
                     a.plan.size);
        assert_null(b.dbuf[0].data);
        assert_null(b.dbuf[1].data);
        for (int k = 0; k < MP_NGROUPS; k++) { /* no gradient buffer; the training one has */
            const mp_param_group *ga = &a.params.groups[k], *gb = &b.params.groups[k];
            assert_null(gb->grad.data);
            assert_true(ga->total == 0 || ga->grad.data);
            /* no separate FP32 master for a half copy either (the training model's at O2) */
            assert_true(gb->master.data == NULL || gb->master.data == gb->model.data);
            if (ga->total > 0 && levels[li] == MP_O2 && k != MP_GROUP_NORM)
                assert_true(ga->master.data && ga->master.data != ga->model.data);
        }
        int64_t ds[2] = {batch * b.positions, classes};
        mp_tensor dl = mp_tensor_alloc(b.acts[b.nlayers - 1].dtype, 2, ds, MP_MEM_WORKSPACE);
        assert_int_equal(mp_model_backward(&b, &x, &dl), MP_EINTERNAL);
        free(want);
        free(got);
        mp_tensor_free(&dl);
        mp_tensor_free(&x);
        mp_model_free(&a);
        mp_model_free(&b);
    }
}

static void test_presets(void **state)
{
    (void)state;
    mp_test_each_preset(check, true, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
