// np: 4
/* Agreement under fire: over 300 steps at O2 fp16 with dynamic loss scaling, an inf is put into
 * the local gradient of one random rank at random steps, half the time before backward (the
 * all-reduce carries it to everyone) and half the time into that rank's summed gradient after
 * the all-reduce (only the found_inf agreement can carry it). Every rank must skip exactly the
 * injected steps, hold the same loss-scale trajectory, and end with bitwise identical weights,
 * master weights and optimizer state. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"
#include "src/train.h"

#define STEPS 300

static mp_comm comm;

typedef struct fire {
    int rank[STEPS];     /* the rank that injects at each step, -1 for none */
    bool after[STEPS];   /* after the all-reduce (else before backward) */
    double scale[STEPS]; /* this rank's loss scale at each step's start */
    int64_t skipped[STEPS + 1]; /* skipped steps before each step, and at the end */
    int injected;
} fire;

static void before_backward(mp_trainer *t, int64_t step, mp_tensor *dl, void *arg)
{
    fire *f = arg;
    f->scale[step] = t->scaler.scale;
    f->skipped[step] = t->scaler.skipped_steps;
    if (f->rank[step] == t->comm->rank && !f->after[step])
        mp_store(dl->data, dl->dtype, 3, INFINITY);
}

static void after_reduce(mp_trainer *t, int64_t step, void *arg)
{
    fire *f = arg;
    if (f->rank[step] == t->comm->rank && f->after[step]) {
        mp_tensor g = mp_params_grad(&t->model.params, (int)(step % t->model.params.count));
        mp_store(g.data, g.dtype, 0, step % 2 ? NAN : -INFINITY);
    }
}

static void test_every_rank_takes_the_same_decisions(void **state)
{
    (void)state;
    char path[512], text[1024];
    snprintf(path, sizeof path, "%s/fire.cfg", mp_test_dir("agreement"));
    snprintf(text, sizeof text,
             "data: { train_limit = 2048; test_limit = 256; batch_size = 8; };\n"
             "model: { hidden = [32]; };\n"
             "amp: { opt_level = \"O2\"; init_scale = 1024.0; growth_interval = 10; };\n"
             "optim: { lr = 0.05; momentum = 0.9; };\n"
             "train: { epochs = 100; max_steps = %d; seed = 9; eval_every = 0; };\n"
             "comm: { bucket_mb = 0.004; first_bucket_mb = 0.0005; };\n"
             "log: { progress = \"none\"; };\n",
             STEPS);
    mp_config cfg;
    mp_trainer t;
    mp_test_trainer(&comm, path, text, &cfg, &t);
    mp_test_trainer_start(&t);
    assert_true(t.sync.nbuckets >= 2);

    static fire f;
    memset(&f, 0, sizeof f);
    mp_rng rng;
    mp_rng_seed(&rng, 2024, 0); /* the same plan on every rank, for the checks below */
    for (int s = 0; s < STEPS; s++) {
        f.rank[s] = mp_rng_uniform(&rng) < 0.08 ? (int)mp_rng_below(&rng, (uint64_t)comm.size)
                                                : -1;
        f.after[s] = mp_rng_next(&rng) % 2 == 0;
        f.injected += f.rank[s] >= 0;
    }
    t.before_backward = before_backward;
    t.after_reduce = after_reduce;
    t.hook_arg = &f;
    mp_train_result r;
    assert_int_equal(mp_train_run(&t, &r), MP_OK);
    f.skipped[STEPS] = t.scaler.skipped_steps;

    /* Every injected step skipped, and no other (the scale starts low enough that the run
     * itself does not overflow, which the growth every 10 good steps would show). */
    int after = 0;
    for (int s = 0; s < STEPS; s++) {
        int64_t skipped = f.skipped[s + 1] - f.skipped[s];
        if (skipped != (f.rank[s] >= 0))
            fail_msg("rank %d: step %d skipped %lld times, injected on rank %d", comm.rank, s,
                     (long long)skipped, f.rank[s]);
        after += f.rank[s] >= 0 && f.after[s];
    }
    assert_true(f.injected >= 10 && after >= 4); /* the plan exercises both ways */
    assert_int_equal(r.skipped_steps, f.injected);
    double lo = f.scale[0], hi = f.scale[0];
    for (int s = 0; s < STEPS; s++)
        lo = fmin(lo, f.scale[s]), hi = fmax(hi, f.scale[s]);
    assert_true(lo < hi); /* the scale moved both ways */

    mp_test_same_everywhere(&comm, f.scale, sizeof f.scale, "the loss-scale trajectory");
    mp_test_same_everywhere(&comm, f.skipped, sizeof f.skipped, "the skipped steps");
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &t.model.params.groups[k];
        mp_tensor *ts[4] = {&g->model, &g->master, &t.opt.slot1[k], &t.opt.slot2[k]};
        for (int j = 0; j < 4; j++)
            if (ts[j]->data)
                mp_test_same_everywhere(&comm, ts[j]->data, (size_t)mp_tensor_bytes(ts[j]),
                                "weights, masters or optimizer state");
    }
    mp_train_free(&t);
    mp_config_free(&cfg);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_rank_takes_the_same_decisions),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
