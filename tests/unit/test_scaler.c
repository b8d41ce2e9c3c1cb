/* The loss scaler's state machine against trajectories computed by hand: growth after
 * growth_interval good steps, backoff on overflow, DeepSpeed-style hysteresis, the floor and the
 * ceiling, static scales, and the consecutive-skip limit. */
#include "tests/util/test_util.h"

#include "engine/scaler.h"

static mp_scaler_config dynamic_config(void)
{
    mp_scaler_config c = {.dynamic = true, .init_scale = 65536, .growth_factor = 2,
                          .backoff_factor = 0.5, .growth_interval = 3, .hysteresis = 1,
                          .min_scale = 1, .max_scale = 16777216, .max_consecutive_skips = 0};
    return c;
}

/* Feeds a string of steps ('.' finite, 'x' overflow) and checks the scale after each one. */
static void run(const mp_scaler_config *c, mp_scaler_state *s, const char *steps,
                const double *want)
{
    for (int i = 0; steps[i]; i++) {
        mp_scaler_update(s, c, steps[i] == 'x');
        if (s->scale != want[i])
            fail_msg("after step %d ('%c') of \"%s\": scale %g, want %g", i + 1, steps[i], steps,
                     s->scale, want[i]);
    }
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
    assert_false(mp_scaler_update(&s, &c, true));
    assert_false(mp_scaler_update(&s, &c, true));
    assert_false(mp_scaler_update(&s, &c, false)); /* a good step resets the run */
    assert_false(mp_scaler_update(&s, &c, true));
    assert_false(mp_scaler_update(&s, &c, true));
    assert_true(mp_scaler_update(&s, &c, true));
    assert_int_equal(s.consecutive_skips, 3);
    assert_int_equal(s.skipped_steps, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth_and_backoff),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_floor_and_ceiling),
        cmocka_unit_test(test_static_scale),
        cmocka_unit_test(test_consecutive_skip_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
