/* Learning-rate schedules against values computed by hand: warm-up, constant, step, cosine and
 * linear decay, and a schedule offset from the run's steps. */
#include "tests/util/test_util.h"

#include <math.h>

#include "engine/schedule.h"

static void expect(const mp_schedule *s, int64_t step, double want)
{
    double got = mp_schedule_lr(s, step);
    assert_close(&got, &want, 1, 1e-15, 1e-12);
}

static void test_schedules(void **state)
{
    (void)state;
    mp_schedule s = {.type = MP_SCHED_CONSTANT, .base_lr = 0.4, .total_steps = 100};
    expect(&s, 0, 0.4);
    expect(&s, 99, 0.4);
    s.warmup_steps = 10; /* (step + 1) / 10 of base, then the schedule */
    expect(&s, 0, 0.04);
    expect(&s, 4, 0.2);
    expect(&s, 9, 0.4);
    expect(&s, 10, 0.4);
    s = (mp_schedule){.type = MP_SCHED_STEP, .base_lr = 1.0, .gamma = 0.1, .step_every = 30,
                      .total_steps = 100};
    expect(&s, 29, 1.0);
    expect(&s, 30, 0.1);
    expect(&s, 61, 0.1 * 0.1);
    s.offset = -12; /* a resume that puts step 12 where the schedule's step 0 is */
    expect(&s, 41, 1.0);
    expect(&s, 42, 0.1);
    s.offset = 5;
    expect(&s, 24, 1.0);
    expect(&s, 25, 0.1);
    s = (mp_schedule){.type = MP_SCHED_COSINE, .base_lr = 1.0, .min_lr = 0.2, .total_steps = 110,
                      .warmup_steps = 10};
    expect(&s, 10, 1.0);
    expect(&s, 60, 0.6); /* halfway through the 100 decay steps: (1 + cos(pi/2)) / 2 */
    expect(&s, 35, 0.2 + 0.8 * 0.5 * (1 + cos(3.14159265358979323846 / 4)));
    expect(&s, 110, 0.2);
    expect(&s, 500, 0.2);
    s = (mp_schedule){.type = MP_SCHED_LINEAR, .base_lr = 0.1, .min_lr = 0.0, .total_steps = 1010,
                      .warmup_steps = 10};
    expect(&s, 9, 0.1);
    expect(&s, 10, 0.1);
    expect(&s, 510, 0.05);
    expect(&s, 1010, 0.0);
    mp_sched_type t;
    assert_int_equal(mp_schedule_parse("linear", &t), 0);
    assert_int_equal(t, MP_SCHED_LINEAR);
    assert_int_equal(mp_schedule_parse("exponential", &t), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_schedules)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
