/* The planned arena against the ops that use it (engine/plan.h, engine/seq_plan.c): a training
 * step whose dead tensors are poisoned (every byte 0xFF, a NaN in every float dtype) at the
 * points the plan can name (before forward, after it, after each top-level layer's backward)
 * must give bitwise the logits and gradients of the same model with every tensor in bytes of
 * its own (mp_model_opts.unplanned), for every preset
 * at O0, O1 fp16 and O2 bf16, with and without recomputation. An op that reads a tensor after the
 * plan let its bytes go, or a lifetime the walk got wrong, reads poison or another tensor's
 * values. Recomputation keeps fewer bytes than the plan without it; mp_model_plan_bytes (the
 * memory check before a build) gives the arena's bytes exactly. The plan shares bytes in
 * every preset, and keeps resnet20's and WRN-16-4's activation and scratch bytes
 * at most 0.5x of what the same tensors take each with storage of its own (issue 48's goal). */
#include "tests/util/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"
#include "tests/util/test_model.h"

/* Whether the bytes of plan buffers i and j (roots) overlap. */
static bool overlaps(const mp_plan *p, int i, int j)
{
    const mp_plan_buf *a = &p->buf[i], *b = &p->buf[j];
    return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* Whether m has composite layers (blocks). */
static bool blocks(const mp_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].block)
            return true;
    return false;
}

/* Poisons every root that is not live after op `tick`, unless a live root shares its bytes. */
static void poison(mp_model *m, int64_t tick)
{
    const mp_plan *p = &m->plan;
    for (int i = 0; i < p->n; i++) {
        if (p->buf[i].root != i || mp_plan_live(p, i, tick))
            continue;
        bool keep = false;
        for (int j = 0; j < p->n && !keep; j++)
            keep = j != i && p->buf[j].root == j && mp_plan_live(p, j, tick) && overlaps(p, i, j);
        if (!keep)
            memset((char *)m->arena + p->buf[i].offset, 0xFF, p->buf[i].bytes);
    }
}

typedef struct hook_state {
    mp_model *m;
    int next; /* the top-level layer whose backward ends next */
} hook_state;

static mp_status after_layer(void *arg, int first_param)
{
    (void)first_param;
    hook_state *h = arg;
    poison(h->m, h->m->backward_end[h->next--]);
    return MP_OK;
}

static void build(mp_model *m, const mp_layer_spec *specs, int n, const int64_t in[3],
                  int64_t classes, int64_t batch, const mp_amp_policy *amp, bool recompute,
                  bool unplanned)
{
    mp_model_opts o = {.recompute = recompute, .unplanned = unplanned};
    if (mp_model_build_opts(m, mp_backend_cpu(), specs, n, in, classes, batch, amp, &o) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_model_init(m, 5), MP_OK);
}

/* One step of model m on x and the loss gradient dl, poisoned or not; copies the logits and the
 * gradients into out (grown as needed). */
static void step(mp_model *m, const mp_tensor *x, const mp_tensor *dl, bool poisoned,
                 unsigned char *out, size_t *len)
{
    hook_state h = {m, m->nlayers - 1};
    if (poisoned) {
        memset(m->arena, 0xFF, m->plan.size);
        m->grads_ready = after_layer;
        m->grads_ready_arg = &h;
    }
    const mp_tensor *logits;
    assert_int_equal(mp_model_forward(m, x, true, &logits), MP_OK);
    if (poisoned) /* before the logits are read, as the loss reads them */
        poison(m, m->forward_end);
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
    m->grads_ready = NULL;
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
        size_t planned = 0; /* without recomputation */
        mp_amp_policy amp = mp_amp_resolve(levels[li], halves[li], true, true, 0.0, false);
        for (int recompute = 0; recompute < 2; recompute++) {
            mp_model a, b;
            build(&a, specs, n, in, classes, batch, &amp, recompute, true);
            build(&b, specs, n, in, classes, batch, &amp, recompute, false);
            mp_rng r;
            mp_rng_seed(&r, 21, (uint64_t)li);
            mp_tensor x = mp_test_model_input(&a, batch, in, classes,
                                              strcmp(preset, "gpt") == 0, &r);
            int64_t ds[2] = {batch * a.positions, classes};
            mp_tensor dl = mp_tensor_alloc(a.acts[a.nlayers - 1].dtype, 2, ds, MP_MEM_WORKSPACE);
            for (int64_t i = 0; i < mp_tensor_numel(&dl); i++)
                mp_store(dl.data, dl.dtype, (size_t)i, 0.01 * (2.0 * mp_rng_uniform(&r) - 1.0));
            size_t cap = (size_t)mp_tensor_bytes(&dl);
            for (int k = 0; k < MP_NGROUPS; k++)
                cap += (size_t)mp_tensor_bytes(&a.params.groups[k].grad);
            unsigned char *want = malloc(cap), *got = malloc(cap);
            assert_true(want && got);
            for (int s = 0; s < 2; s++) { /* two steps: the second over the first's bytes */
                size_t lw, lg;
                a.step = b.step = s;
                step(&a, &x, &dl, false, want, &lw);
                step(&b, &x, &dl, true, got, &lg);
                assert_int_equal(lw, lg);
                if (memcmp(want, got, lw) != 0)
                    fail_msg("%s at %s%s, step %d: the poisoned step differs", preset,
                             mp_opt_level_name(levels[li]), recompute ? " recomputing" : "", s);
            }
            assert_int_equal(a.plan.size, mp_plan_unshared(&a.plan));
            int64_t ahead = 0; /* the memory check's figure, planned without memory */
            mp_model_opts ro = {.recompute = recompute};
            assert_int_equal(mp_model_plan_bytes(specs, n, in, classes, batch, &amp, &ro, &ahead),
                             MP_OK);
            assert_int_equal(ahead, (int64_t)b.plan.size);
            double ratio = (double)b.plan.size / (double)a.plan.size;
            printf("%s at %s%s: planned %zu of %zu bytes (%.2f)\n", preset,
                   mp_opt_level_name(levels[li]), recompute ? " recomputing" : "", b.plan.size,
                   a.plan.size, ratio);
            if (recompute && b.plan.size >= planned && blocks(&b))
                fail_msg("%s at %s: recomputing keeps %zu bytes, without %zu", preset,
                         mp_opt_level_name(levels[li]), b.plan.size, planned);
            planned = b.plan.size;
            if (ratio >= 1.0)
                fail_msg("%s at %s: the plan shares no bytes", preset,
                         mp_opt_level_name(levels[li]));
            free(want);
            free(got);
            mp_tensor_free(&dl);
            mp_tensor_free(&x);
            mp_model_free(&a);
            mp_model_free(&b);
        }
    }
}

static void test_cnns(void **state)
{
    (void)state;
    mp_test_each_preset(check, true, false);
}

/* Issue 48's goal at the benchmark's shapes (32x32x3, O2 fp16; the ratio does not depend on the
 * batch but for rounding): resnet20's and WRN-16-4's activation and scratch bytes at most 0.5x
 * of what they were before the plan: the tensors of the unfused model (BatchNorm and ReLU apart,
 * mp_model_opts.unfused) each with storage of its own. */
static void test_goal(void **state)
{
    (void)state;
    const int64_t cifar[3] = {32, 32, 3};
    mp_preset_args resnet = {.depth = 20}, wrn = {.depth = 16, .widen = 4};
    const char *names[2] = {"resnet20", "wrn"};
    const mp_preset_args *args[2] = {&resnet, &wrn};
    mp_amp_policy amp = mp_amp_resolve(MP_O2, MP_F16, true, true, 0.0, false);
    for (int k = 0; k < 2; k++) {
        mp_layer_spec specs[MP_MAX_LAYERS];
        int n = mp_preset_specs(names[k], args[k], 10, specs);
        mp_model m, before;
        build(&m, specs, n, cifar, 10, 8, &amp, false, false);
        mp_model_opts o = {.unfused = true, .unplanned = true};
        assert_int_equal(mp_model_build_opts(&before, mp_backend_cpu(), specs, n, cifar, 10, 8,
                                             &amp, &o),
                         MP_OK);
        double ratio = (double)m.plan.size / (double)before.plan.size;
        printf("%s at O2 fp16, batch 8: planned %zu of %zu bytes (%.3f)\n", names[k],
               m.plan.size, before.plan.size, ratio);
        if (ratio > 0.5)
            fail_msg("%s: the plan keeps %.3f of the bytes before it (goal 0.5)", names[k],
                     ratio);
        mp_model_free(&m);
        mp_model_free(&before);
    }
}

static void test_transformers(void **state)
{
    (void)state;
    mp_test_each_preset(check, false, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnns),
        cmocka_unit_test(test_goal),
        cmocka_unit_test(test_transformers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
