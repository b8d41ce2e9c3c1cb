/* The per-op profile (engine/profile.h): an op's time excludes the ops nested in it, the first
 * step is dropped as warm-up, a kind longer than the stored name still finds its entry, nesting
 * deeper than the profile tracks keeps the depth right, nothing is counted while it is off, and
 * the summary record writes "profile_ms". */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    mp_profile_start(NULL);
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
    mp_profile_start(NULL);
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
    mp_profile_start(NULL);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusive_and_warmup),
        cmocka_unit_test(test_long_kinds_and_deep_nesting),
        cmocka_unit_test(test_off_counts_nothing),
        cmocka_unit_test(test_summary_writes_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
