// np: 2
/* An fp16 overflow inside attention, in real training on 2 ranks at O1 and O2: one rank's
 * batch at one step is scaled so that its attention logits (Q K^T / sqrt(dh)) overflow fp16
 * while the q and k feeding them stay finite. The loss scaler skips that step on every rank (the
 * found-inf flag is agreed by MAX), the scale backs off once, training goes on without another
 * skip to a loss close to the clean run's, and both ranks end with bitwise equal parameters.
 * The same run without the injection skips nothing, so the skip is the overflow's. The model
 * (model.layers) is a patch embedding with one attention layer and no LayerNorm before it, so
 * the input's scale reaches the logits. That layer runs the (T, T) path (attention =
 * "matrix"), which rounds the logits to fp16; the tiled path (the default) keeps them in FP32,
 * and the same injection leaves its saved row statistics finite (test_o1_fp16_tiled). */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/train.h"

static mp_comm comm;

enum { INJECT_AT = 8, STEPS = 40 };

static void setup(mp_trainer *t, mp_config *cfg, const char *level, const char *attention)
{
    char path[512], text[2048], lv[64];
    snprintf(path, sizeof path, "%s/attn.cfg", mp_test_dir("attn_overflow"));
    snprintf(text, sizeof text,
             "data: { train_limit = 1024; test_limit = 128; batch_size = 16; };\n"
             "model: { layers = (\n"
             "  { type = \"conv2d\"; name = \"patch\"; out = 48; kernel = 7; stride = 7; },\n"
             "  { type = \"posembed\"; name = \"pos\"; },\n"
             "  { type = \"linear\"; name = \"qkv\"; out = 144; per_token = true; },\n"
             "  { type = \"attention\"; name = \"attn\"; heads = 4; attention = \"%s\"; },\n"
             "  { type = \"linear\"; name = \"proj\"; out = 48; per_token = true; },\n"
             "  { type = \"gavgpool\"; name = \"pool\"; },\n"
             "  { type = \"linear\"; name = \"head\"; out = 10; }); };\n"
             "optim: { name = \"adam\"; lr = 1e-3; };\n"
             "amp: { half = \"fp16\"; growth_interval = 1000; };\n"
             "train: { epochs = 100; seed = 5; max_steps = %d; eval_every = 0; };\n"
             "log: { progress = \"none\"; every = 1; };\n",
             attention, STEPS);
    mp_test_write_file(path, text, strlen(text), 0);
    snprintf(lv, sizeof lv, "amp.opt_level=%s", level);
    const char *sets[1] = {lv};
    if (mp_config_load(cfg, path, sets, 1) != MP_OK)
        fail_msg("%s", mp_error_message());
    if (mp_train_setup(t, cfg, &comm) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_train_sync(t), MP_OK);
    assert_int_equal(mp_train_open_outputs(t), MP_OK);
}

typedef struct probe {
    bool inject;
    const char *attention; /* the layer's path: "matrix" or "flash" */
    int qkv_finite, probs_nonfinite; /* at the injected step, on the injecting rank */
    double scale_before, scale_after;
    double final_loss;
} probe;

static bool any_nonfinite(const mp_tensor *t, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(mp_load(t->data, t->dtype, (size_t)i)))
            return true;
    return false;
}

static void scale_batch(mp_trainer *t, int64_t step, mp_tensor *x, void *arg)
{
    probe *p = arg;
    (void)t;
    if (!p->inject || step != INJECT_AT || comm.rank != comm.size - 1)
        return;
    for (int64_t i = 0; i < mp_tensor_numel(x); i++)
        mp_store(x->data, x->dtype, (size_t)i, 1000.0 * mp_load(x->data, x->dtype, (size_t)i));
}

static void look(mp_trainer *t, int64_t step, void *arg)
{
    probe *p = arg;
    if (step == INJECT_AT - 1)
        p->scale_before = t->scaler.scale;
    if (step == INJECT_AT + 1)
        p->scale_after = t->scaler.scale;
    if (step != INJECT_AT || !p->inject || comm.rank != comm.size - 1)
        return;
    /* After backward the activation plan (engine/plan.h) has let qkv and the saved statistics
     * go; in this model nothing but the gradient ping-pong is written after the attention's
     * backward, so their bytes still hold the step's values. */
    const mp_layer *attn = &t->model.layers[3];
    int64_t n = t->cfg->data.batch_size;
    const mp_tensor *qkv = &t->model.acts[2];
    p->qkv_finite = !any_nonfinite(qkv, n * mp_tensor_row(qkv));
    p->probs_nonfinite = any_nonfinite(&attn->save, n * mp_tensor_row(&attn->save));
}

/* Runs one level; returns the skipped steps, checks the ranks' parameters are bitwise equal. */
static int64_t run(const char *level, probe *p)
{
    mp_trainer t;
    mp_config cfg;
    setup(&t, &cfg, level, p->attention);
    t.before_forward = scale_batch;
    t.after_reduce = look;
    t.hook_arg = p;
    mp_train_result r;
    assert_int_equal(mp_train_run(&t, &r), MP_OK);
    mp_param_group *g = &t.model.params.groups[MP_GROUP_WEIGHTS];
    mp_tensor w = g->master.data ? g->master : g->model;
    double h = 0;
    for (int64_t i = 0; i < mp_tensor_numel(&w); i++)
        h = h * 1.000001 + mp_load(w.data, w.dtype, (size_t)i) * (double)(i % 97 + 1);
    double mm[2] = {h, -h};
    assert_int_equal(mp_comm_allreduce(&comm, mm, 2, MP_F64, MP_REDOP_MAX, "test"), MP_OK);
    if (mm[0] != h || -mm[1] != h)
        fail_msg("%s: the ranks' parameters differ after the run", level);
    int64_t skipped = r.skipped_steps;
    p->final_loss = r.final_loss;
    mp_train_free(&t);
    mp_config_free(&cfg);
    return skipped;
}

static void check_level(const char *level)
{
    probe clean = {.inject = false, .attention = "matrix"};
    assert_int_equal(run(level, &clean), 0);
    probe p = {.inject = true, .attention = "matrix"};
    int64_t skipped = run(level, &p);
    if (skipped != 1)
        fail_msg("%s: %lld steps skipped on rank %d, want exactly the injected one", level,
                 (long long)skipped, comm.rank);
    assert_true(p.scale_after == p.scale_before / 2); /* backed off once, on every rank */
    if (comm.rank == comm.size - 1) {
        assert_true(p.qkv_finite);      /* q and k were finite... */
        assert_true(p.probs_nonfinite); /* ...their scaled product was not (fp16's range) */
    }
    /* recovered: learning (below chance, ln 10) and close to the run without the overflow */
    if (!(isfinite(p.final_loss) && p.final_loss < 0.9 * log(10.0) &&
          fabs(p.final_loss - clean.final_loss) < 0.25 * clean.final_loss))
        fail_msg("%s: training did not recover: final loss %g (without the overflow %g)", level,
                 p.final_loss, clean.final_loss);
}

static void test_o1_fp16(void **state)
{
    (void)state;
    check_level("O1");
}

static void test_o2_fp16(void **state)
{
    (void)state;
    check_level("O2");
}

/* The tiled path under the same injection: q and k as finite as before, and the saved row
 * statistics (FP32 maximum and sum) finite too, where the (T, T) path's fp16 logits were not. */
static void test_o1_fp16_tiled(void **state)
{
    (void)state;
    probe p = {.inject = true, .attention = "flash"};
    run("O1", &p);
    if (comm.rank == comm.size - 1) {
        assert_true(p.qkv_finite);
        assert_false(p.probs_nonfinite);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_o1_fp16),
                                       cmocka_unit_test(test_o2_fp16),
                                       cmocka_unit_test(test_o1_fp16_tiled)};
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
