// np: 1 2
/* Gradient accumulation (train.accum_steps) is one large batch: 4 micro-batches of 16 per rank
 * follow the loss curve and end with the weights of one batch of 64 per rank, on 1 and 2 ranks,
 * at O0 within FP32 tolerance (not bitwise: a GEMM over 64 rows rounds its sums otherwise than
 * four over 16 added in FP32). The loss scaler sees one decision per optimizer step: at
 * O2 fp16 with the scale growing every 2 good steps, the scale after 20 steps is the plain
 * run's, and an overflow in the second micro-batch of one step skips that one step (the window's
 * other micro-batches with it), once. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/train.h"

#define STEPS 20
#define BATCH 64

static mp_comm comm;

typedef struct run_result {
    double loss[STEPS];
    double *weights, *init; /* the weights' FP32 values the optimizer updates */
    int64_t n, skipped;
    double scale;
    int calls; /* before_backward calls */
} run_result;

/* before_backward: counts micro-batches; in the second micro-batch of step 5, an inf. */
static void overflow_hook(mp_trainer *t, int64_t step, mp_tensor *dl, void *arg)
{
    run_result *r = arg;
    int micro = r->calls++ % (int)t->accum;
    if (step == 5 && micro == (t->accum > 1 ? 1 : 0))
        mp_store(dl->data, dl->dtype, 0, INFINITY);
}

static void count_hook(mp_trainer *t, int64_t step, mp_tensor *dl, void *arg)
{
    (void)t;
    (void)step;
    (void)dl;
    ((run_result *)arg)->calls++;
}

static void run(const char *level, int accum, bool overflow, run_result *out)
{
    char dir[512], path[600], metrics[600], text[2048];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("accum"));
    snprintf(path, sizeof path, "%s/run.cfg", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
    snprintf(text, sizeof text,
             "data: { train_limit = 2560; test_limit = 128; batch_size = %d; };\n"
             "model: { hidden = [64, 32]; };\n"
             "amp: { opt_level = \"%s\"; growth_interval = 2; init_scale = 1.0;\n"
             "       scale_margin = -1; };\n"
             "optim: { lr = 0.1; momentum = 0.0; };\n"
             "train: { epochs = 100; max_steps = %d; seed = 3; accum_steps = %d; };\n"
             "comm: { bucket_mb = 0.002; first_bucket_mb = 0.0005; };\n"
             "log: { progress = \"none\"; every = 1; metrics = \"%s\"; };\n",
             BATCH / accum, level, STEPS, accum, metrics);
    mp_config cfg;
    mp_trainer t;
    mp_test_trainer(&comm, path, text, &cfg, &t);
    mp_test_trainer_start(&t);
    out->calls = 0;
    t.before_backward = overflow ? overflow_hook : count_hook;
    t.hook_arg = out;
    mp_tensor w = mp_params_updated(&t.model.params, MP_GROUP_WEIGHTS);
    out->n = mp_tensor_numel(&w);
    out->weights = malloc((size_t)out->n * sizeof(double));
    out->init = malloc((size_t)out->n * sizeof(double));
    for (int64_t i = 0; i < out->n; i++)
        out->init[i] = mp_load(w.data, MP_F32, (size_t)i);
    mp_train_result r;
    assert_int_equal(mp_train_run(&t, &r), MP_OK);
    assert_int_equal(r.steps, STEPS);
    assert_int_equal(out->calls, STEPS * accum);
    for (int64_t i = 0; i < out->n; i++)
        out->weights[i] = mp_load(w.data, MP_F32, (size_t)i);
    out->skipped = r.skipped_steps;
    out->scale = r.loss_scale;
    mp_train_free(&t);
    mp_config_free(&cfg);
    if (comm.rank == 0)
        mp_test_read_losses(metrics, out->loss, STEPS);
}

static void free_run(run_result *r)
{
    free(r->weights);
    free(r->init);
}

/* O0: 4 micro-batches of 16 against one batch of 64; loss and weights within FP32 tolerance
 * (the weights relative to the largest change training made, as test_equivalence). */
static void test_o0_four_micro_batches(void **state)
{
    (void)state;
    run_result one, four;
    run("O0", 1, false, &one);
    run("O0", 4, false, &four);
    double eps = 2 * mp_test_eps(MP_F32);
    double moved = mp_test_max_abs_diff(one.weights, one.init, one.n);
    if (comm.rank == 0) {
        printf("accumulation on %d ranks: loss %.4f -> %.4f, weights max diff %.3g of the largest "
               "update %.3g\n", comm.size, one.loss[0], one.loss[STEPS - 1],
               mp_test_max_abs_diff(one.weights, four.weights, one.n), moved);
        assert_true(one.loss[STEPS - 1] < 0.8 * one.loss[0]); /* it trained */
        assert_close(four.loss, one.loss, STEPS, 0, 64 * eps);
    }
    assert_int_equal(four.n, one.n);
    assert_close(four.weights, one.weights, (size_t)one.n, 64 * eps * moved, 0);
    free_run(&one);
    free_run(&four);
}

/* O2 fp16: the scaler advances once per optimizer step (growth every 2 good steps: the same
 * scale after 20 steps with 1 or 4 micro-batches), and an overflow in one micro-batch skips its
 * step once. */
static void test_o2_one_decision_per_step(void **state)
{
    (void)state;
    run_result one, four, one_inf, four_inf;
    run("O2", 1, false, &one);
    run("O2", 4, false, &four);
    assert_int_equal(one.skipped, 0);
    assert_int_equal(four.skipped, 0);
    assert_true(four.scale == one.scale);
    assert_true(one.scale == 1024.0); /* 2^10: 20 good steps, growth every 2 */
    run("O2", 1, true, &one_inf);
    run("O2", 4, true, &four_inf);
    assert_int_equal(one_inf.skipped, 1);
    assert_int_equal(four_inf.skipped, 1);
    assert_true(four_inf.scale == one_inf.scale);
    assert_true(one_inf.scale < one.scale);
    free_run(&one);
    free_run(&four);
    free_run(&one_inf);
    free_run(&four_inf);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_o0_four_micro_batches),
        cmocka_unit_test(test_o2_one_decision_per_step),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
