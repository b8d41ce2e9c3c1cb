// np: 2
/* The step records' spread of the all-reduce over the ranks: rank 1 sleeps 60 ms before every
 * backward, so rank 0 starts its first bucket about 60 ms earlier and waits for it. Rank 0's own
 * comm_ms holds that wait; comm_last_ms (the least over the ranks) does not, and comm_skew_ms
 * (the most less the least) is about the sleep. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/train.h"

#define SLEEP_MS 60

static mp_comm comm;

static void before_backward(mp_trainer *t, int64_t step, mp_tensor *dl, void *arg)
{
    (void)step, (void)dl, (void)arg;
    struct timespec left = {0, SLEEP_MS * 1000000L};
    while (t->comm->rank == 1 && nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("step record without a number %s", key);
    return v->valuedouble;
}

static void test_last_arrival_and_skew(void **state)
{
    (void)state;
    char path[512], metrics[600], text[2048];
    snprintf(path, sizeof path, "%s/spread.cfg", mp_test_dir("comm_spread"));
    snprintf(metrics, sizeof metrics, "%.500s.jsonl", path);
    snprintf(text, sizeof text,
             "data: { train_limit = 1024; test_limit = 64; batch_size = 16; };\n"
             "model: { hidden = [64]; };\n"
             "optim: { lr = 0.05; };\n"
             "train: { epochs = 10; max_steps = 12; seed = 3; eval_every = 0; };\n"
             "log: { progress = \"none\"; every = 4; metrics = \"%s\"; };\n",
             metrics);
    mp_config cfg;
    mp_trainer t;
    mp_test_trainer(&comm, path, text, &cfg, &t);
    mp_test_trainer_start(&t);
    t.before_backward = before_backward;
    mp_train_result r;
    assert_int_equal(mp_train_run(&t, &r), MP_OK);
    mp_train_free(&t);
    mp_config_free(&cfg);
    if (comm.rank != 0)
        return;
    FILE *f = fopen(metrics, "r");
    assert_non_null(f);
    char line[4096];
    int steps = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
        if (cJSON_IsString(type) && strcmp(type->valuestring, "step") == 0) {
            double mine = num(o, "comm_ms"), last = num(o, "comm_last_ms");
            double skew = num(o, "comm_skew_ms");
            printf("step %g: comm_ms %.2f, comm_last_ms %.2f, comm_skew_ms %.2f\n",
                   num(o, "step"), mine, last, skew);
            assert_true(mine >= 0.5 * SLEEP_MS);     /* rank 0 waited for rank 1 */
            assert_true(skew >= 0.5 * SLEEP_MS);
            assert_true(last > 0 && last <= mine - 0.5 * SLEEP_MS);
            assert_true(skew <= mine + 1e-9); /* rank 0's is the most, and the least >= 0 */
            steps++;
        }
        cJSON_Delete(o);
    }
    fclose(f);
    assert_int_equal(steps, 3);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_arrival_and_skew),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
