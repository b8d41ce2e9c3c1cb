/* Integer literals beyond 32 bits in config files: libconfig 1.5 wraps them silently, so they
 * must be errors naming file, line and key unless written with an L suffix. */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <string.h>

#include "src/config.h"

static mp_status load_text(const char *text, mp_config *c, char *path, size_t cap)
{
    snprintf(path, cap, "%s/ints.cfg", mp_test_dir("config_ints"));
    mp_test_write_file(path, text, strlen(text), 0);
    return mp_config_load(c, path, NULL, 0);
}

static void expect_error(const char *text, const char *want)
{
    mp_config c;
    char path[1024], full[1200];
    assert_int_equal(load_text(text, &c, path, sizeof path), MP_EUSAGE);
    snprintf(full, sizeof full, "%s:%s", path, want);
    if (strstr(mp_error_message(), full) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", mp_error_message(), full);
    mp_config_free(&c);
}

static void test_wrapping_literals_are_errors(void **state)
{
    (void)state;
    expect_error("data: { batch_size = 4294967360; };\n",
                 "1: data.batch_size: integer 4294967360 does not fit in 32 bits");
    expect_error("# comment 99999999999\ntrain: {\n  max_steps = 4294967396;\n};\n",
                 "3: train.max_steps: integer 4294967396 does not fit");
    expect_error("train = { seed = 0x1FFFFFFFF; };\n", "1: train.seed: integer 0x1FFFFFFFF");
    expect_error("train: { epochs = -2147483649; };\n", "1: train.epochs: integer -2147483649");
    expect_error("model: { layers = ( { type = \"linear\"; out = 64; },\n"
                 "  { type = \"linear\"; out = 5000000000; } ); };\n",
                 "2: model.layers.[1].out: integer 5000000000");
    expect_error("model: { hidden = [16, 8589934592]; };\n", "1: model.hidden.[1]: integer");
}

static void test_literals_that_fit_or_are_not_ints(void **state)
{
    (void)state;
    mp_config c;
    char path[1024];
    const char *ok = "/* 99999999999 */ data: { path = \"/x/4294967396\"; mean = 1e300; std = 2.5e-3; };\n"
                     "train: { seed = 3000000000L; max_steps = 2147483647; };\n"
                     "optim: { lr = .5; weight_decay = 5E-4; };\n";
    if (load_text(ok, &c, path, sizeof path) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(c.train.seed, 3000000000ULL);
    assert_int_equal(c.train.max_steps, 2147483647);
    mp_config_free(&c);
    /* With the suffix the value is read whole, and then range-checked. */
    assert_int_equal(load_text("data: { batch_size = 4294967360L; };\n", &c, path, sizeof path),
                     MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "data.batch_size: must be in [1, 65536]"));
    mp_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrapping_literals_are_errors),
        cmocka_unit_test(test_literals_that_fit_or_are_not_ints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
