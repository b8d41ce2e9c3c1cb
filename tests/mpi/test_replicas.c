// np: 2 4
/* Data parallelism over real MPI ranks on real Fashion-MNIST (a subset): after 100 steps every
 * rank holds bitwise identical parameters, and a few distributed steps with per-rank batch B
 * match one process with batch B * world on the same samples (gradient averaging is right). */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/train.h"

static mp_comm comm;

static void write_config(char *path, size_t cap, int64_t batch, int64_t steps)
{
    snprintf(path, cap, "%s/replicas.%lld.cfg", mp_test_dir("replicas"), (long long)batch);
    char text[1024];
    snprintf(text, sizeof text,
             "data: { train_limit = 3000; test_limit = 500; batch_size = %lld; };\n"
             "model: { hidden = [32, 16]; };\n"
             "optim: { lr = 0.05; momentum = 0.9; nesterov = true; weight_decay = 1e-4; };\n"
             "train: { epochs = 100; max_steps = %lld; seed = 5; };\n"
             "log: { progress = \"none\"; };\n",
             (long long)batch, (long long)steps);
    mp_test_write_file(path, text, strlen(text), 0);
}

static void train_on(mp_comm *c, int64_t batch, int64_t steps, mp_trainer *t,
                     mp_config *cfg)
{
    char path[512];
    write_config(path, sizeof path, batch, steps);
    assert_int_equal(mp_config_load(cfg, path, NULL, 0), MP_OK);
    mp_status st = mp_train_setup(t, cfg, c);
    if (st != MP_OK)
        fail_msg("setup: %s", mp_error_message());
    assert_int_equal(mp_train_sync(t), MP_OK);
    assert_int_equal(mp_train_open_outputs(t), MP_OK);
    mp_train_result r;
    assert_int_equal(mp_train_run(t, &r), MP_OK);
    assert_int_equal(r.steps, steps);
}

static void test_parameters_identical_after_100_steps(void **state)
{
    (void)state;
    mp_trainer t;
    mp_config cfg;
    train_on(&comm, 16, 100, &t, &cfg);
    mp_tensor *w = &t.model.params.groups[0].model;
    int64_t n = mp_tensor_numel(w);
    mp_test_same_everywhere(&comm, w->data, (size_t)n * sizeof(float),
                            "the parameters after 100 steps");
    if (comm.rank == 0) { /* and training moved them: a run that did nothing would also match */
        mp_trainer fresh;
        mp_config cfg0;
        mp_comm self;
        assert_int_equal(mp_comm_init_on(&self, MPI_COMM_SELF), MP_OK);
        train_on(&self, 16, 1, &fresh, &cfg0);
        assert_true(memcmp(w->data, fresh.model.params.groups[0].model.data,
                           (size_t)n * sizeof(float)) != 0);
        mp_train_free(&fresh);
        mp_config_free(&cfg0);
        mp_comm_free(&self);
    }
    mp_train_free(&t);
    mp_config_free(&cfg);
}

static void test_average_matches_single_process_big_batch(void **state)
{
    (void)state;
    const int64_t b = 8, steps = 3;
    mp_trainer t;
    mp_config cfg;
    train_on(&comm, b, steps, &t, &cfg);
    if (comm.rank == 0) {
        mp_comm self;
        assert_int_equal(mp_comm_init_on(&self, MPI_COMM_SELF), MP_OK);
        mp_trainer one;
        mp_config cfg1;
        train_on(&self, b * comm.size, steps, &one, &cfg1);
        int64_t n = mp_tensor_numel(&t.model.params.groups[0].model);
        double *got = malloc((size_t)n * sizeof(double)), *want = malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            got[i] = ((float *)t.model.params.groups[0].model.data)[i];
            want[i] = ((float *)one.model.params.groups[0].model.data)[i];
        }
        /* Same samples, same initial weights: only FP32 summation order differs. */
        assert_close(got, want, (size_t)n, 2e-6, 1e-4);
        free(got);
        free(want);
        mp_train_free(&one);
        mp_config_free(&cfg1);
        mp_comm_free(&self);
    }
    mp_train_free(&t);
    mp_config_free(&cfg);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameters_identical_after_100_steps),
        cmocka_unit_test(test_average_matches_single_process_big_batch),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
