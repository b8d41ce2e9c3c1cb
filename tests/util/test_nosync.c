/* mp_nosync_check: see test_nosync.h. */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <string.h>

#include "src/train.h"
#include "tests/util/test_nosync.h"

enum { EVERY = 5, STEPS = 23 };

const char *const mp_nosync_o2_fp16_sgd[] = {"amp.opt_level=\"O2\"", "amp.half=\"fp16\"", NULL};
const char *const mp_nosync_o3_bf16_adam[] = {"amp.opt_level=\"O3\"", "amp.half=\"bf16\"",
                                              "optim.name=\"adam\"", "optim.lr=0.001", NULL};

typedef struct watch {
    mp_ops_counters last;
    int64_t reads[STEPS], syncs[STEPS], copies_in[STEPS], pageable_in[STEPS];
    int ended;
} watch;

static void step_end(mp_trainer *t, int64_t step, void *arg)
{
    watch *w = arg;
    mp_ops_counters now;
    t->ops->counters(&now);
    if (step >= 0 && step < STEPS) {
        w->reads[step] = now.reads - w->last.reads;
        w->syncs[step] = now.syncs - w->last.syncs;
        w->copies_in[step] = now.copies_in - w->last.copies_in;
        w->pageable_in[step] = now.pageable_in - w->last.pageable_in;
        w->ended++;
    }
    w->last = now;
}

void mp_nosync_check(mp_comm *comm, const char *device, const char *const *sets)
{
    char path[512], text[1024];
    snprintf(path, sizeof path, "%s/nosync.cfg", mp_test_dir("nosync"));
    /* 512 samples per rank of batch 16: 32 steps an epoch, so no epoch ends within STEPS. */
    snprintf(text, sizeof text,
             "data: { format = \"synthetic\"; synthetic_shape = [16, 16, 1];\n"
             "        synthetic_train = %d; synthetic_test = 64; batch_size = 16; };\n"
             "model: { preset = \"cnn_bn\"; };\n"
             "amp: { device = \"%s\"; };\n"
             "optim: { lr = 0.02; momentum = 0.9; clip_grad_norm = 1.0; };\n"
             "train: { epochs = 5; max_steps = %d; eval_every = 0; seed = 5; };\n"
             "log: { progress = \"none\"; every = %d; };\n",
             512 * comm->size, device, STEPS, EVERY);
    mp_test_write_file(path, text, strlen(text), 0);
    int nsets = 0;
    while (sets[nsets])
        nsets++;
    mp_config cfg;
    mp_trainer t;
    memset(&t, 0, sizeof t);
    if (mp_config_load(&cfg, path, sets, nsets) != MP_OK)
        fail_msg("%s", mp_error_message());
    if (mp_train_setup(&t, &cfg, comm) != MP_OK)
        fail_msg("%s", mp_error_message());
    if (mp_train_connect(&t) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_train_sync(&t), MP_OK);
    assert_int_equal(mp_train_open_outputs(&t), MP_OK);
    watch w = {0};
    t.step_end = step_end;
    t.hook_arg = &w;
    t.ops->counters(&w.last);
    mp_train_result r;
    if (mp_train_run(&t, &r) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(w.ended, STEPS);
    assert_int_equal(r.steps, STEPS);
    for (int s = 0; s < STEPS; s++) {
        bool host = (s + 1) % EVERY == 0 || s + 1 == STEPS;
        if (!host && (w.reads[s] != 0 || w.syncs[s] != 0))
            fail_msg("%s: step %d is not a host point but read %lld times from the device and "
                     "synchronised %lld times", t.ops->name, s, (long long)w.reads[s],
                     (long long)w.syncs[s]);
        if (w.pageable_in[s] != 0)
            fail_msg("%s: step %d copied %lld times from pageable host memory (a GPU may wait "
                     "for the device there)", t.ops->name, s, (long long)w.pageable_in[s]);
        if (!host && w.copies_in[s] != 2 + (s == 0)) /* step 0: and the run's starting state */
            fail_msg("%s: step %d copied %lld times into the backend; a step copies its batch "
                     "and its labels, nothing else", t.ops->name, s, (long long)w.copies_in[s]);
        if (host && w.reads[s] == 0)
            fail_msg("%s: host point step %d read nothing: the accounting does not count",
                     t.ops->name, s);
    }
    printf("%s, %d rank(s): %d steps, host reads only at the %d host points, 2 uploads a step, "
           "none pageable\n", t.ops->name, comm->size, STEPS, STEPS / EVERY + 1);
    mp_train_free(&t);
    mp_config_free(&cfg);
}
