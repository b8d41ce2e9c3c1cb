/* The loss scaler's state machine against trajectories computed by hand: growth after
 * growth_interval good steps, backoff on overflow, DeepSpeed-style hysteresis, the floor and the
 * ceiling, static scales, the consecutive-skip limit, and the margin kept above the largest
 * half gradient. */
#include "tests/util/test_util.h"

#include "engine/scaler.h"

static mp_scaler_config dynamic_config(void)
{
    mp_scaler_config c = {.dynamic = true, .init_scale = 65536, .growth_factor = 2,
                          .backoff_factor = 0.5, .growth_interval = 3, .hysteresis = 1,
                          .min_scale = 1, .max_scale = 16777216, .max_consecutive_skips = 0,
                          .margin = 4};
    return c;
}

/* Feeds a string of steps ('.' finite, 'x' overflow), with the fill of each (NULL: none), and
 * checks the scale after each one. */
static void run_fill(const mp_scaler_config *c, mp_scaler_state *s, const char *steps,
                     const double *fill, const double *want)
{
    for (int i = 0; steps[i]; i++) {
        mp_scaler_update(s, c, steps[i] == 'x', fill ? fill[i] : 0.0);
        if (s->scale != want[i])
            fail_msg("after step %d ('%c') of \"%s\": scale %g, want %g", i + 1, steps[i], steps,
                     s->scale, want[i]);
    }
}

static void run(const mp_scaler_config *c, mp_scaler_state *s, const char *steps,
                const double *want)
{
    run_fill(c, s, steps, NULL, want);
}

static void test_growth_and_backoff(void **state)
{
    (void)state;
    mp_scaler_config c = dynamic_config();
    mp_scaler_state s = mp_scaler_init(&c);
    assert_true(s.scale == 65536);
    /* grow at the 3rd good step; back off; the tracker restarts after each overflow */
    run(&c, &s, "...x.x...", (double[]){65536, 65536, 131072, 65536, 65536, 32768, 32768,
                                        32768, 65536});
    assert_int_equal(s.skipped_steps, 2);
    assert_int_equal(s.growth_tracker, 0);
}

static void test_hysteresis(void **state)
{
    (void)state;
    mp_scaler_config c = dynamic_config();
    c.hysteresis = 2;
    mp_scaler_state s = mp_scaler_init(&c);
    /* 1st overflow tolerated, 2nd backs off, 3rd backs off again (still at one left), three good
     * steps grow and restore the hysteresis, so the next overflow is tolerated again. */
    run(&c, &s, "xxx...x", (double[]){65536, 32768, 16384, 16384, 16384, 32768, 32768});
    assert_int_equal(s.hysteresis_left, 1);
    run(&c, &s, "x", (double[]){16384});
}

static void test_floor_and_ceiling(void **state)
{
    (void)state;
    mp_scaler_config c = dynamic_config();
    c.init_scale = 2;
    mp_scaler_state s = mp_scaler_init(&c);
    run(&c, &s, "xxx", (double[]){1, 1, 1});
    c.init_scale = 8388608; /* 2^23 */
    s = mp_scaler_init(&c);
    run(&c, &s, "......", (double[]){8388608, 8388608, 16777216, 16777216, 16777216, 16777216});
}

static void test_static_scale(void **state)
{
    (void)state;
    mp_scaler_config c = dynamic_config();
    c.dynamic = false;
    c.init_scale = 128;
    mp_scaler_state s = mp_scaler_init(&c);
    run(&c, &s, "x...x..", (double[]){128, 128, 128, 128, 128, 128, 128});
    assert_int_equal(s.skipped_steps, 2);
}

static void test_consecutive_skip_limit(void **state)
{
    (void)state;
    mp_scaler_config c = dynamic_config();
    c.max_consecutive_skips = 3;
    mp_scaler_state s = mp_scaler_init(&c);
    assert_false(mp_scaler_update(&s, &c, true, 0.0));
    assert_false(mp_scaler_update(&s, &c, true, 0.0));
    assert_false(mp_scaler_update(&s, &c, false, 0.0)); /* a good step resets the run */
    assert_false(mp_scaler_update(&s, &c, true, 0.0));
    assert_false(mp_scaler_update(&s, &c, true, 0.0));
    assert_true(mp_scaler_update(&s, &c, true, 0.0));
    assert_int_equal(s.consecutive_skips, 3);
    assert_int_equal(s.skipped_steps, 5);
}

/* margin 4: after a good step the largest half gradient, at the next scale, fills at most 1/16
 * of the range. Fills are measured at the scale the step used. */
static void test_margin(void **state)
{
    (void)state;
    mp_scaler_config c = dynamic_config();
    mp_scaler_state s = mp_scaler_init(&c);
    /* 0.25 at 65536: 16384 leaves 1/16; 1/16 exactly is kept; a tiny fill changes nothing; the
     * growth at the 3rd good step is undone when the doubled fill would pass 1/16; an overflow
     * backs off as always, whatever its (meaningless) fill */
    run_fill(&c, &s, ".....x", (double[]){0.25, 0.0625, 0.04, 1e-6, 0.2, 1e9},
             (double[]){16384, 16384, 16384, 16384, 4096, 2048});
    /* growth that the fill allows */
    run_fill(&c, &s, "...", (double[]){0.01, 0.01, 0.01}, (double[]){2048, 2048, 4096});
    /* not below the floor, and never up: a fill of 0 means no half gradient */
    c.min_scale = 1024;
    run_fill(&c, &s, "..", (double[]){1.0, 0.0}, (double[]){1024, 1024});
    /* off, and static scales ignore it */
    c.margin = -1;
    run_fill(&c, &s, ".", (double[]){1.0}, (double[]){2048}); /* grown, not halved */
    c.margin = 4;
    c.dynamic = false;
    c.init_scale = 128;
    s = mp_scaler_init(&c);
    run_fill(&c, &s, ".", (double[]){1.0}, (double[]){128});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth_and_backoff),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_floor_and_ceiling),
        cmocka_unit_test(test_static_scale),
        cmocka_unit_test(test_consecutive_skip_limit),
        cmocka_unit_test(test_margin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
