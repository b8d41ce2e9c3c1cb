// np: 1 2
/* Loss scaling in real training runs (Fashion-MNIST subset, MLP, O2 fp16) on 1 and 2 ranks:
 * an inf injected into one gradient skips the step with every weight, master weight and
 * optimizer slot bitwise unchanged, the scale backs off and grows again exactly after
 * growth_interval good steps; at every opt level a skipped step changes no state (BatchNorm
 * statistics included) and the half copies are always the rounded masters; every opt level
 * and half type trains and two runs of each are bitwise identical. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/train.h"

static mp_comm comm;

/* Loads the base config plus overrides ("key=value" strings, NULL-terminated) and sets up. */
static void setup(mp_trainer *t, mp_config *cfg, const char *const *sets)
{
    char path[512], text[2048];
    int nsets = 0;
    while (sets[nsets])
        nsets++;
    snprintf(path, sizeof path, "%s/amp.cfg", mp_test_dir("amp_train"));
    snprintf(text, sizeof text,
             "data: { train_limit = 2048; test_limit = 256; batch_size = 16; };\n"
             "model: { hidden = [32]; };\n"
             "optim: { lr = 0.05; momentum = 0.9; };\n"
             "train: { epochs = 100; seed = 3; };\n"
             "log: { progress = \"none\"; };\n");
    mp_test_write_file(path, text, strlen(text), 0);
    if (mp_config_load(cfg, path, sets, nsets) != MP_OK)
        fail_msg("%s", mp_error_message());
    if (mp_train_setup(t, cfg, &comm) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_train_sync(t), MP_OK);
    assert_int_equal(mp_train_open_outputs(t), MP_OK);
}

/* Everything a skipped step must leave alone, copied. */
typedef struct snapshot {
    void *buf[MP_NGROUPS][4];
    size_t bytes[MP_NGROUPS][4];
} snapshot;

static void tensors_of(mp_trainer *t, int k, mp_tensor *out[4])
{
    mp_param_group *g = &t->model.params.groups[k];
    out[0] = &g->model;
    out[1] = &g->master;
    out[2] = &t->opt.slot1[k];
    out[3] = &t->opt.slot2[k];
}

static void take(mp_trainer *t, snapshot *s)
{
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_tensor *ts[4];
        tensors_of(t, k, ts);
        for (int j = 0; j < 4; j++) {
            s->bytes[k][j] = ts[j]->data ? (size_t)mp_tensor_bytes(ts[j]) : 0;
            s->buf[k][j] = malloc(s->bytes[k][j] + 1);
            if (s->bytes[k][j])
                memcpy(s->buf[k][j], ts[j]->data, s->bytes[k][j]);
        }
    }
}

static int differs(mp_trainer *t, const snapshot *s)
{
    int n = 0;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_tensor *ts[4];
        tensors_of(t, k, ts);
        for (int j = 0; j < 4; j++)
            n += s->bytes[k][j] && memcmp(s->buf[k][j], ts[j]->data, s->bytes[k][j]) != 0;
    }
    return n;
}

static void drop(snapshot *s)
{
    for (int k = 0; k < MP_NGROUPS; k++)
        for (int j = 0; j < 4; j++)
            free(s->buf[k][j]);
}

typedef struct inject_state {
    int64_t at;          /* the step (0-based) whose gradient gets an inf */
    int64_t interval;
    double init;
    snapshot before;
    int checked, unchanged_after_skip, moved_after_good;
    double scale_after_skip, scale_regrown, scale_before_regrow;
} inject_state;

static void inject(mp_trainer *t, int64_t step, void *arg)
{
    inject_state *s = arg;
    if (step == s->at) {
        take(t, &s->before);
        if (comm.rank == comm.size - 1) { /* one rank only: the decision must still be global */
            mp_tensor g = mp_params_grad(&t->model.params, 0);
            mp_store(g.data, g.dtype, 3, INFINITY);
        }
    } else if (step == s->at + 1) {
        s->unchanged_after_skip = differs(t, &s->before) == 0;
        s->scale_after_skip = t->scaler.scale;
        drop(&s->before);
        take(t, &s->before);
    } else if (step == s->at + 2) {
        s->moved_after_good = differs(t, &s->before) > 0;
        drop(&s->before);
    } else if (step == s->at + s->interval) {
        s->scale_before_regrow = t->scaler.scale;
    } else if (step == s->at + s->interval + 1) {
        s->scale_regrown = t->scaler.scale;
        s->checked = 1;
    }
}

static void test_injected_inf_skips_bitwise(void **state)
{
    (void)state;
    mp_trainer t;
    mp_config cfg;
    setup(&t, &cfg,
          (const char *[]){"amp.opt_level=O2", "amp.growth_interval=5", "amp.init_scale=1024.0",
                           "amp.scale_margin=-1", "train.max_steps=20", NULL});
    inject_state s = {.at = 7, .interval = 5, .init = 1024.0};
    t.after_reduce = inject;
    t.hook_arg = &s;
    mp_train_result r;
    assert_int_equal(mp_train_run(&t, &r), MP_OK);
    assert_true(s.checked);
    assert_true(s.unchanged_after_skip); /* weights, masters, momentum: bitwise */
    assert_true(s.moved_after_good);     /* and the next step did move them */
    /* steps 0..4 good: grow to 2048 after step 4; step 5, 6 good; step 7 skipped: back to 1024 */
    assert_true(s.scale_after_skip == 1024.0);
    /* 5 good steps (8..12) after the skip: grown again only after step 12 */
    assert_true(s.scale_before_regrow == 1024.0);
    assert_true(s.scale_regrown == 2048.0);
    assert_int_equal(r.skipped_steps, 1);
    mp_train_free(&t);
    mp_config_free(&cfg);
}

/* Persistent overflow: every step's gradient holds an inf, so the run stops (exit code 5) after
 * max_consecutive_skips skips and names the parameter. */
static void always_inf(mp_trainer *t, int64_t step, void *arg)
{
    (void)step;
    (void)arg;
    mp_tensor g = mp_params_grad(&t->model.params, 2);
    mp_store(g.data, g.dtype, 0, NAN);
}

static void test_persistent_overflow_diverges(void **state)
{
    (void)state;
    mp_trainer t;
    mp_config cfg;
    setup(&t, &cfg, (const char *[]){"amp.opt_level=O2", "amp.max_consecutive_skips=4", NULL});
    t.after_reduce = always_inf;
    mp_train_result r;
    assert_int_equal(mp_train_run(&t, &r), MP_EDIVERGED);
    const char *m = mp_error_message();
    if (!strstr(m, "4 steps in a row") || !strstr(m, "fc2.weight"))
        fail_msg("message: %s", m);
    mp_train_free(&t);
    mp_config_free(&cfg);
}

/* Inputs scaled down to ~1e-7 make fc1's weight gradients (dy * x) below 3e-8: zero in fp16 at
 * loss scale 1, so fc1 never moves; dynamic scaling lifts them into fp16's range and fc1 trains. */
typedef struct underflow_state {
    int64_t nonzero, total;
} underflow_state;

static void count_fc1_grads(mp_trainer *t, int64_t step, void *arg)
{
    (void)step;
    underflow_state *u = arg;
    mp_tensor g = mp_params_grad(&t->model.params, mp_params_find(&t->model.params, "fc1.weight"));
    for (int64_t i = 0; i < mp_tensor_numel(&g); i++)
        u->nonzero += mp_load(g.data, g.dtype, (size_t)i) != 0.0;
    u->total += mp_tensor_numel(&g);
}

static void test_underflow_recovered_by_scaling(void **state)
{
    (void)state;
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        mp_trainer t;
        mp_config cfg;
        setup(&t, &cfg,
              (const char *[]){"amp.opt_level=O2", dynamic ? "amp.loss_scale=\"dynamic\""
                                                           : "amp.loss_scale=1.0",
                               "data.mean=0.0", "data.std=10000000.0", "train.max_steps=10",
                               "optim.lr=10.0", NULL});
        int w = mp_params_find(&t.model.params, "fc1.weight");
        mp_tensor m = mp_params_master(&t.model.params, w); /* FP32: sees updates below a half ulp */
        size_t bytes = (size_t)mp_tensor_bytes(&m);
        void *init = malloc(bytes);
        memcpy(init, m.data, bytes);
        underflow_state u = {0, 0};
        t.after_reduce = count_fc1_grads;
        t.hook_arg = &u;
        mp_train_result r;
        assert_int_equal(mp_train_run(&t, &r), MP_OK);
        bool moved = memcmp(init, m.data, bytes) != 0;
        if (!dynamic && (u.nonzero != 0 || moved))
            fail_msg("scale 1: %lld of %lld fc1 gradients nonzero, weights moved %d",
                     (long long)u.nonzero, (long long)u.total, moved);
        /* About half the pixels are background (x = 0, so dW = 0 at any scale). */
        if (dynamic && (u.nonzero < u.total / 20 || !moved))
            fail_msg("dynamic: only %lld of %lld fc1 gradients nonzero, weights moved %d",
                     (long long)u.nonzero, (long long)u.total, moved);
        free(init);
        mp_train_free(&t);
        mp_config_free(&cfg);
    }
}

/* Gradient clipping by global norm: with SGD (no momentum, no decay) the first step moves the
 * weights by exactly lr * clip in norm when the gradients' norm exceeds clip, and by more
 * without clipping. */
typedef struct clip_state {
    float *before;
    double moved;
} clip_state;

static void watch_first_step(mp_trainer *t, int64_t step, void *arg)
{
    clip_state *c = arg;
    mp_tensor *w = &t->model.params.groups[MP_GROUP_WEIGHTS].model;
    int64_t n = mp_tensor_numel(w);
    if (step == 0) {
        c->before = malloc((size_t)n * sizeof(float));
        memcpy(c->before, w->data, (size_t)n * sizeof(float));
    } else if (step == 1) {
        double s = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = (double)((float *)w->data)[i] - (double)c->before[i];
            s += d * d;
        }
        c->moved = sqrt(s);
        free(c->before);
    }
}

static void test_gradient_clipping(void **state)
{
    (void)state;
    double moved[2];
    for (int clip = 0; clip < 2; clip++) {
        mp_trainer t;
        mp_config cfg;
        setup(&t, &cfg,
              (const char *[]){"optim.momentum=0.0", "optim.lr=0.05", "train.max_steps=2",
                               clip ? "optim.clip_grad_norm=0.05" : "optim.clip_grad_norm=0.0",
                               NULL});
        clip_state c = {NULL, 0};
        t.after_reduce = watch_first_step;
        t.hook_arg = &c;
        mp_train_result r;
        assert_int_equal(mp_train_run(&t, &r), MP_OK);
        moved[clip] = c.moved;
        mp_train_free(&t);
        mp_config_free(&cfg);
    }
    double want = 0.05 * 0.05;
    assert_close(&moved[1], &want, 1, 0, 1e-3);
    if (!(moved[0] > 2 * want))
        fail_msg("unclipped step moved %g: the test's gradients are too small to clip", moved[0]);
}

/* A skipped step at every level leaves everything a step may change bitwise as it was: the
 * weights, FP32 masters, half copies, optimizer slots and the BatchNorm running statistics the
 * forward had already updated (cnn_bn: conv, BatchNorm, pooling, dropout); the next good step
 * moves them. At every step the half copy the forward used is the masters rounded once. */
typedef struct level_skip_state {
    int64_t at;
    snapshot before;
    void *stats;
    size_t stats_bytes;
    int checked_copies, stale_copies, unchanged, stats_unchanged, moved, stats_moved;
} level_skip_state;

static void take_all(mp_trainer *t, level_skip_state *s)
{
    take(t, &s->before);
    s->stats_bytes = (size_t)mp_tensor_bytes(&t->model.stats);
    s->stats = malloc(s->stats_bytes + 1);
    memcpy(s->stats, t->model.stats.data, s->stats_bytes);
}

static void drop_all(level_skip_state *s)
{
    drop(&s->before);
    free(s->stats);
}

/* The model copy of each group with FP32 masters equals the masters rounded to its dtype. */
static void check_copies(mp_trainer *t, level_skip_state *s)
{
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &t->model.params.groups[k];
        if (!g->master.data || g->master.data == g->model.data)
            continue;
        size_t bytes = (size_t)mp_tensor_bytes(&g->model);
        void *want = malloc(bytes + 1);
        mp_convert(want, g->model.dtype, g->master.data, g->master.dtype,
                   (size_t)mp_tensor_numel(&g->model));
        s->stale_copies += memcmp(want, g->model.data, bytes) != 0;
        s->checked_copies++;
        free(want);
    }
}

/* after_reduce: checks the half copies, and puts an inf into one gradient of step `at`. */
static void inject_level_skip(mp_trainer *t, int64_t step, void *arg)
{
    level_skip_state *s = arg;
    check_copies(t, s);
    if (step == s->at && comm.rank == comm.size - 1) {
        mp_tensor g = mp_params_grad(&t->model.params, 0);
        mp_store(g.data, g.dtype, 1, INFINITY);
    }
}

/* step_end: the state as step `at` finds it, after it (skipped) and after the next (good). */
static void watch_level_skip(mp_trainer *t, int64_t step, void *arg)
{
    level_skip_state *s = arg;
    if (step == s->at - 1) {
        take_all(t, s);
    } else if (step == s->at) {
        s->unchanged = differs(t, &s->before) == 0;
        s->stats_unchanged = memcmp(s->stats, t->model.stats.data, s->stats_bytes) == 0;
        drop_all(s);
        take_all(t, s);
    } else if (step == s->at + 1) {
        s->moved = differs(t, &s->before) > 0;
        s->stats_moved = memcmp(s->stats, t->model.stats.data, s->stats_bytes) != 0;
        drop_all(s);
    }
}

static void test_skip_leaves_state_at_every_level(void **state)
{
    (void)state;
    const char *levels[] = {"O0", "O1", "O2", "O3", "O2", "O3"};
    for (int l = 0; l < 6; l++) {
        char level[32];
        snprintf(level, sizeof level, "amp.opt_level=%s", levels[l]);
        mp_trainer t;
        mp_config cfg;
        setup(&t, &cfg,
              (const char *[]){level, l < 4 ? "amp.half=fp16" : "amp.half=bf16",
                               "model.preset=cnn_bn", "train.max_steps=6", NULL});
        level_skip_state s = {.at = 3};
        t.after_reduce = inject_level_skip;
        t.step_end = watch_level_skip;
        t.hook_arg = &s;
        mp_train_result r;
        assert_int_equal(mp_train_run(&t, &r), MP_OK);
        if (!s.unchanged || !s.stats_unchanged || !s.moved || !s.stats_moved ||
            s.stale_copies || r.skipped_steps != 1)
            fail_msg("%s %s: after the skip: state unchanged %d, statistics unchanged %d; after "
                     "the next step: moved %d, statistics moved %d; half copies not the rounded "
                     "masters at %d of %d checks; %lld skipped",
                     levels[l], l < 4 ? "fp16" : "bf16", s.unchanged, s.stats_unchanged, s.moved,
                     s.stats_moved, s.stale_copies, s.checked_copies, (long long)r.skipped_steps);
        assert_true(s.checked_copies > 0 || l == 0 || levels[l][1] == '3');
        mp_train_free(&t);
        mp_config_free(&cfg);
    }
}

/* Every level and half type trains (test accuracy far above chance on this subset) and two
 * runs with the same seed end with bitwise identical weights. */
static void test_every_level_trains_deterministically(void **state)
{
    (void)state;
    const char *levels[] = {"O0", "O1", "O2", "O3"}, *halves[] = {"fp16", "bf16"};
    for (int cnn = 0; cnn < 2; cnn++)
    for (int l = 0; l < 4; l++)
        for (int h = 0; h < 2; h++) {
            char level[32], half[32];
            snprintf(level, sizeof level, "amp.opt_level=%s", levels[l]);
            snprintf(half, sizeof half, "amp.half=%s", halves[h]);
            /* cnn_bn (conv, BatchNorm, pooling, dropout) briefly: it must run and repeat
             * bitwise at every level; the MLP long enough to learn. */
            const char *extra[] = {level, half, cnn ? "train.max_steps=6" : "train.max_steps=100",
                                   cnn ? "model.preset=cnn_bn" : "model.preset=mlp", NULL};
            mp_trainer a, b;
            mp_config ca, cb;
            mp_train_result ra, rb;
            setup(&a, &ca, extra);
            assert_int_equal(mp_train_run(&a, &ra), MP_OK);
            setup(&b, &cb, extra);
            assert_int_equal(mp_train_run(&b, &rb), MP_OK);
            if (!isfinite(ra.final_loss) || (!cnn && ra.accuracy < 0.4)) /* chance is 0.1 */
                fail_msg("%s %s %s: loss %g accuracy %.3f", cnn ? "cnn_bn" : "mlp", levels[l],
                         halves[h], ra.final_loss, ra.accuracy);
            mp_param_group *ga = &a.model.params.groups[0], *gb = &b.model.params.groups[0];
            assert_int_equal(ga->model.dtype, l == 0 ? MP_F32 : h ? MP_BF16 : MP_F16);
            assert_memory_equal(ga->model.data, gb->model.data, (size_t)mp_tensor_bytes(&ga->model));
            assert_true(ra.final_loss == rb.final_loss && ra.accuracy == rb.accuracy);
            mp_train_free(&a);
            mp_train_free(&b);
            mp_config_free(&ca);
            mp_config_free(&cb);
        }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_injected_inf_skips_bitwise),
        cmocka_unit_test(test_skip_leaves_state_at_every_level),
        cmocka_unit_test(test_persistent_overflow_diverges),
        cmocka_unit_test(test_underflow_recovered_by_scaling),
        cmocka_unit_test(test_gradient_clipping),
        cmocka_unit_test(test_every_level_trains_deterministically),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
