/* The per-op profile (engine/profile.h): an op's time excludes the ops nested in it, the first
 * step is dropped as warm-up, a kind longer than the stored name still finds its entry, nesting
 * deeper than the profile tracks keeps the depth right, nothing is counted while it is off, the
 * device clock times ops by the backend's clock marks without waiting for its queue (a fake
 * backend whose clock is not the host's), and the summary record writes "profile_ms". */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/ops.h"
#include "engine/profile.h"
#include "io/metrics.h"

static void nap(double seconds)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(seconds * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The number of entries; *steps the steps counted. */
static int entries(int64_t *steps)
{
    int n;
    double s;
    mp_profile_entries(&n, steps, &s);
    return n;
}

static const mp_prof_entry *find(const char *kind, mp_prof_phase phase)
{
    int n;
    int64_t steps;
    double s;
    const mp_prof_entry *e = mp_profile_entries(&n, &steps, &s);
    for (int i = 0; i < n; i++)
        if (e[i].phase == phase && strcmp(e[i].kind, kind) == 0)
            return &e[i];
    return NULL;
}

/* One step: "outer" naps 2 ms of its own around "inner", which naps 60 ms. */
static void one_step(void)
{
    double step = mp_profile_begin("test");
    double outer = mp_profile_begin("test");
    nap(0.001);
    double inner = mp_profile_begin("test");
    nap(0.06);
    mp_profile_end(inner, "inner", MP_PROF_BACKWARD);
    nap(0.001);
    mp_profile_end(outer, "outer", MP_PROF_FORWARD);
    mp_profile_step_end(step);
}

static void test_exclusive_and_warmup(void **state)
{
    (void)state;
    mp_profile_start(NULL, false);
    one_step(); /* warm-up: dropped */
    int n;
    int64_t steps;
    double step_s;
    mp_profile_entries(&n, &steps, &step_s);
    assert_int_equal(n, 0);
    assert_int_equal(steps, 0);
    one_step();
    one_step();
    mp_profile_entries(&n, &steps, &step_s);
    assert_int_equal(n, 2);
    assert_int_equal(steps, 2);
    const mp_prof_entry *in = find("inner", MP_PROF_BACKWARD), *out = find("outer", MP_PROF_FORWARD);
    assert_non_null(in);
    assert_non_null(out);
    assert_int_equal(in->calls, 2);
    assert_int_equal(out->calls, 2);
    assert_true(in->s >= 0.12);
    /* outer's own time leaves inner's 120 ms out: it would be over 0.12 s if it did not */
    assert_true(out->s >= 0.004 && out->s < 0.1);
    assert_true(in->s + out->s <= step_s);
    mp_profile_stop();
}

static void test_long_kinds_and_deep_nesting(void **state)
{
    (void)state;
    const char *longer = "a kind name well over twenty-three characters";
    mp_profile_start(NULL, false);
    for (int step = 0; step < 3; step++) {
        double m = mp_profile_begin("test");
        double marks[40];
        for (int d = 0; d < 40; d++)
            marks[d] = mp_profile_begin("test");
        for (int d = 39; d >= 0; d--)
            mp_profile_end(marks[d], d == 0 ? "top" : longer, MP_PROF_STEP);
        double after = mp_profile_begin("test");
        mp_profile_end(after, "after", MP_PROF_STEP);
        mp_profile_step_end(m);
    }
    int64_t steps;
    assert_int_equal(entries(&steps), 3); /* top, the long kind once, after */
    assert_int_equal(steps, 2);
    char stored[24] = {0};
    memcpy(stored, longer, sizeof stored - 1); /* the name as the entry keeps it */
    assert_int_equal(find(stored, MP_PROF_STEP)->calls, 2 * 39);
    assert_int_equal(find("top", MP_PROF_STEP)->calls, 2);
    assert_int_equal(find("after", MP_PROF_STEP)->calls, 2);
    mp_profile_stop();
}

static void test_off_counts_nothing(void **state)
{
    (void)state;
    mp_profile_start(NULL, false);
    mp_profile_stop();
    assert_false(mp_profile_on());
    double m = mp_profile_begin("test");
    assert_true(m == 0.0);
    mp_profile_end(m, "x", MP_PROF_FORWARD);
    mp_profile_step_end(m);
    int64_t steps;
    assert_int_equal(entries(&steps), 0);
    assert_int_equal(steps, 0);
}

static void test_summary_writes_profile(void **state)
{
    (void)state;
    char path[] = "/tmp/mpdist-test-profile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    mp_metrics *m = NULL;
    assert_int_equal(mp_metrics_open(&m, path), MP_OK);
    mp_summary_record su = {.world_size = 1, .n_prof = 2, .prof_step_ms = 10.5,
                            .prof_ms = {6.25, 1.5}};
    snprintf(su.prof_name[0], sizeof su.prof_name[0], "conv2d backward");
    snprintf(su.prof_name[1], sizeof su.prof_name[1], "relu forward");
    mp_metrics_summary(m, &su);
    mp_metrics_close(m);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096] = {0};
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
    assert_non_null(strstr(line, "\"profile_ms\":{\"step\":10.5,\"conv2d backward\":6.25,"
                                 "\"relu forward\":1.5}"));
}

/* A backend whose clock marks read a clock the test moves (fake_ms), not the host's; it counts
 * waits for its queue and the marks it frees; mark_elapsed fails once fail_reads is set. */
static double fake_ms;
static int fake_syncs, fake_live;
static bool fail_reads;

static mp_status fake_sync(void)
{
    fake_syncs++;
    return MP_OK;
}

static mp_status fake_record(void **mark)
{
    if (!*mark) {
        *mark = malloc(sizeof(double));
        assert_non_null(*mark);
        fake_live++;
    }
    *(double *)*mark = fake_ms;
    return MP_OK;
}

static mp_status fake_elapsed(void *from, void *to, double *ms)
{
    if (fail_reads)
        return mp_fail(MP_EINTERNAL, "fake: mark not readable");
    *ms = *(const double *)to - *(const double *)from;
    return MP_OK;
}

static void fake_free(void *mark)
{
    free(mark);
    fake_live--;
}

/* One step on the fake clock: "a" (forward) takes 5 ms around "b" (backward, 2 ms); "c" (step)
 * 1 ms at the top; 0.5 ms in no op. */
static void fake_step(void)
{
    double step = mp_profile_begin("step");
    double a = mp_profile_begin("a");
    fake_ms += 2.0;
    double b = mp_profile_begin("b");
    fake_ms += 2.0;
    mp_profile_end(b, "b", MP_PROF_BACKWARD);
    fake_ms += 3.0;
    mp_profile_end(a, "a", MP_PROF_FORWARD);
    fake_ms += 0.5;
    double c = mp_profile_begin("c");
    fake_ms += 1.0;
    mp_profile_end(c, "c", MP_PROF_STEP);
    mp_profile_step_end(step);
}

static void test_device_clock(void **state)
{
    (void)state;
    mp_ops ops = {.sync = fake_sync, .mark_record = fake_record, .mark_elapsed = fake_elapsed,
                  .mark_free = fake_free};
    fake_ms = 0.0, fake_syncs = 0, fake_live = 0, fail_reads = false;
    mp_profile_start(&ops, true);
    assert_true(mp_profile_device_clock());
    int n;
    int64_t steps;
    double step_s;
    fake_step(); /* warm-up */
    assert_int_equal(fake_live, 16); /* its 4 ops' marks, and the next set's made ahead */
    fake_step();
    mp_profile_entries(&n, &steps, &step_s);
    assert_int_equal(steps, 0); /* a step is read when the next one ends */
    fake_step();               /* reads the second */
    fail_reads = true;
    fake_step(); /* the third's marks cannot be read: dropped */
    fail_reads = false;
    fake_step(); /* reads the fourth */
    assert_int_equal(fake_live, 16); /* no counted step made a mark */
    assert_int_equal(fake_syncs, 0); /* nothing waited for the queue */
    mp_profile_entries(&n, &steps, &step_s);
    assert_int_equal(steps, 2);
    assert_true(fake_live > 0);
    mp_profile_stop(); /* reads the fifth and frees every mark */
    assert_int_equal(fake_live, 0);
    assert_true(mp_profile_device_clock()); /* the figures' clock, for the print */
    mp_profile_entries(&n, &steps, &step_s);
    assert_int_equal(n, 3);
    assert_int_equal(steps, 3);
    assert_float_equal(step_s, 3 * 8.5e-3, 1e-12); /* the fake clock's, not the host's */
    const mp_prof_entry *a = find("a", MP_PROF_FORWARD), *b = find("b", MP_PROF_BACKWARD);
    const mp_prof_entry *c = find("c", MP_PROF_STEP);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_float_equal(a->s, 3 * 5e-3, 1e-12); /* b's 2 ms left out */
    assert_float_equal(b->s, 3 * 2e-3, 1e-12);
    assert_float_equal(c->s, 3 * 1e-3, 1e-12);
    assert_int_equal(a->calls, 3);
    assert_int_equal(c->calls, 3);
    /* A step whose ops end out of order is left out, and the table says so. */
    mp_profile_start(&ops, true);
    fake_step();
    fake_step();
    double step = mp_profile_begin("step"), outer = mp_profile_begin("a");
    double inner = mp_profile_begin("b");
    mp_profile_end(outer, "a", MP_PROF_FORWARD);
    mp_profile_end(inner, "b", MP_PROF_BACKWARD);
    mp_profile_step_end(step);
    fake_step();
    mp_profile_stop();
    mp_profile_entries(&n, &steps, &step_s);
    assert_int_equal(steps, 2);
    char text[1024] = {0};
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    assert_non_null(f);
    mp_profile_print(f, "rank 0");
    fclose(f);
    assert_non_null(strstr(text, "profile (rank 0, device clock): 2 steps"));
    assert_non_null(strstr(text, "1 steps left out"));
    assert_int_equal(fake_live, 0);
    /* Without clock marks the device clock falls back to the host's. */
    mp_ops bare = {.sync = fake_sync};
    mp_profile_start(&bare, true);
    assert_false(mp_profile_device_clock());
    mp_profile_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusive_and_warmup),
        cmocka_unit_test(test_long_kinds_and_deep_nesting),
        cmocka_unit_test(test_off_counts_nothing),
        cmocka_unit_test(test_device_clock),
        cmocka_unit_test(test_summary_writes_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
