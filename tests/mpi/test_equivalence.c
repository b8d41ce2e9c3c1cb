// np: 2 4
/* Data parallelism is one large batch: 2 and 4 ranks with per-rank batches 32 and 16 follow
 * the same loss curve and end with the same weights after 50 steps as one rank with batch 64
 * on the same samples, at O0 within FP32 tolerance and at O2 (fp16) within half tolerance,
 * with the gradients in several buckets overlapped with backward. Plain SGD: with momentum the
 * early dynamics amplify rounding differences (measured with lr 0.01 and momentum 0.9 at O2:
 * weights 1.7% of the largest update apart after 50 steps, against 0.4% here), which would
 * test the optimizer's sensitivity, not the sum. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/train.h"

#define STEPS 50
#define GLOBAL_BATCH 64

static mp_comm comm;

typedef struct run_result {
    double loss[STEPS];
    double *weights; /* FP32 values the optimizer updates (masters at O2), at the end */
    double *init;    /* and before the first step */
    int64_t n;
} run_result;

static void run(mp_comm *c, const char *level, run_result *out)
{
    char dir[512], path[600], metrics[600], text[2048];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("equivalence"));
    snprintf(path, sizeof path, "%s/run.cfg", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
    snprintf(text, sizeof text,
             "data: { train_limit = 2560; test_limit = 256; batch_size = %d; };\n"
             "model: { hidden = [64, 32]; };\n"
             "amp: { opt_level = \"%s\"; };\n"
             "optim: { lr = 0.02; momentum = 0.0; weight_decay = 1e-4; };\n"
             "train: { epochs = 100; max_steps = %d; seed = 11; };\n"
             "comm: { bucket_mb = 0.002; first_bucket_mb = 0.0005; };\n"
             "log: { progress = \"none\"; every = 1; metrics = \"%s\"; };\n",
             GLOBAL_BATCH / c->size, level, STEPS, metrics);
    mp_config cfg;
    mp_trainer t;
    mp_test_trainer(c, path, text, &cfg, &t);
    mp_test_trainer_start(&t);
    if (c->size > 1)
        assert_true(t.sync.nbuckets >= 3); /* the test is about several buckets */
    mp_tensor wt = mp_params_updated(&t.model.params, MP_GROUP_WEIGHTS), *w = &wt;
    out->n = mp_tensor_numel(w);
    out->weights = malloc((size_t)out->n * sizeof(double));
    out->init = malloc((size_t)out->n * sizeof(double));
    for (int64_t i = 0; i < out->n; i++)
        out->init[i] = mp_load(w->data, MP_F32, (size_t)i);
    mp_train_result r;
    assert_int_equal(mp_train_run(&t, &r), MP_OK);
    assert_int_equal(r.steps, STEPS);
    for (int64_t i = 0; i < out->n; i++)
        out->weights[i] = mp_load(w->data, MP_F32, (size_t)i);
    mp_train_free(&t);
    mp_config_free(&cfg);
    if (c->rank == 0)
        mp_test_read_losses(metrics, out->loss, STEPS);
}

/* Runs `level` on all ranks and, on rank 0, alone with the global batch. The loss curves must
 * agree within loss_rtol, and every weight within w_tol times the largest change training made
 * to any weight (differences in the updates are what data parallelism can introduce). */
static void compare(const char *level, double loss_rtol, double w_tol)
{
    run_result many, one;
    run(&comm, level, &many);
    if (comm.rank == 0) {
        mp_comm self;
        assert_int_equal(mp_comm_init_on(&self, MPI_COMM_SELF), MP_OK);
        run(&self, level, &one);
        mp_comm_free(&self);
        double moved = mp_test_max_abs_diff(one.weights, one.init, one.n);
        double wdiff = mp_test_max_abs_diff(many.weights, one.weights, one.n);
        double ldiff = 0;
        for (int k = 0; k < STEPS; k++)
            ldiff = fmax(ldiff, fabs(many.loss[k] - one.loss[k]) / one.loss[k]);
        printf("%s on %d ranks: loss max rel diff %.3g, weights max diff %.3g of the largest "
               "update %.3g (ratio %.3g); loss %.4f -> %.4f\n",
               level, comm.size, ldiff, wdiff, moved, wdiff / moved, one.loss[0],
               one.loss[STEPS - 1]);
        assert_true(one.loss[STEPS - 1] < 0.8 * one.loss[0]); /* it trained */
        assert_int_equal(many.n, one.n);
        assert_close(many.loss, one.loss, STEPS, 0, loss_rtol);
        assert_close(many.weights, one.weights, (size_t)many.n, w_tol * moved, 0);
        free(one.weights);
        free(one.init);
    }
    free(many.weights);
    free(many.init);
}

/* FP32: only the order of the batch sums differs (sums over 64 rows against sums over 16 or 32
 * rows added across ranks), a few FP32 ulps per step, compounded over 50 steps. */
static void test_o0_matches_one_rank(void **state)
{
    (void)state;
    const double eps = 2 * mp_test_eps(MP_F32); /* an FP32 ulp at 1 */
    compare("O0", 64 * eps, 64 * eps);
}

/* O2 fp16: each rank's gradient is rounded to fp16 before the sum and the sum rounded again,
 * against one rounding on one rank: half-ulp differences in every gradient, compounded over 50
 * steps of momentum. */
static void test_o2_matches_one_rank(void **state)
{
    (void)state;
    const double eps = 2 * mp_test_eps(MP_F16); /* an fp16 ulp at 1 */
    compare("O2", 4 * eps, 16 * eps);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_o0_matches_one_rank),
        cmocka_unit_test(test_o2_matches_one_rank),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
