/* --set overrides of the configuration: values of every type, layer lists, defaults without a
 * file, and their errors (each one line naming the --set argument and the key). */
#include "tests/util/test_util.h"
#include "tests/util/test_config_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config.h"

static char g_dir[1024];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s", mp_test_dir("test_config_set"));
    return 0;
}

static void write_cfg(char *path, size_t cap, const char *name, const char *text)
{
    mp_test_cfg_write(path, cap, g_dir, name, text);
}

static void test_set_values(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "base.cfg",
              "data = { batch_size = 32; };\n"
              "model = { preset = \"mlp\"; hidden = [64]; };\n"
              "optim = { lr = 0.2; };\n"
              "log = { metrics = \"m.jsonl\"; };\n");
    const char *sets[] = {
        "optim.lr=0.05",               /* float over a file value */
        "data.batch_size=128",         /* int */
        "schedule.step_epochs=10",     /* int where a float is expected, new group */
        "amp.opt_level=\"O2\";",       /* quoted string, the ';' a file would have */
        "amp.half=bf16",               /* bare word */
        "data.path=\"/srv/data/fm-2\" // a comment after it",
        "log.metrics=",                /* empty bare value */
        "optim.nesterov=true",         /* bool */
        "train.seed=3000000000",       /* beyond 32 bits without a suffix */
        " optim.momentum = 0.5 ",      /* spaces around key and value */
        "data.num_classes=20",
        "data.num_classes=12",         /* the last one wins */
        "model.hidden=[512, 256, 128] # an array, a comment after it",
        "data.format=idx",             /* bare word */
        "checkpoint.dir=/srv/ck-[1]",  /* bare path, a bracket inside */
    };
    mp_config c;
    mp_test_cfg_load_ok(&c, path, sets, (int)(sizeof sets / sizeof sets[0]));
    assert_true(c.optim.lr == 0.05);
    assert_int_equal(c.data.batch_size, 128);
    assert_true(c.schedule.step_epochs == 10.0);
    assert_string_equal(c.amp.opt_level, "O2");
    assert_string_equal(c.amp.half, "bf16");
    assert_string_equal(c.data.path, "/srv/data/fm-2");
    assert_string_equal(c.log.metrics, "");
    assert_true(c.optim.nesterov);
    assert_true(c.train.seed == 3000000000u);
    assert_true(c.optim.momentum == 0.5);
    assert_int_equal(c.data.num_classes, 12);
    assert_int_equal(c.model.nhidden, 3);
    assert_int_equal(c.model.hidden[2], 128);
    assert_string_equal(c.data.format, "idx");
    assert_string_equal(c.checkpoint.dir, "/srv/ck-[1]");
    assert_string_equal(c.model.preset, "mlp");
    mp_config_free(&c);

    /* A layer list replaces the file's preset keys; a whole group can be given. */
    const char *sets2[] = {
        "model.layers=({type=\"linear\"; out=50; name=\"h\";}, {type=\"relu\";}, "
        "{type=\"linear\"; out=12;})",
        "optim={ lr = 0.5; momentum = 0.0; }",
    };
    mp_test_cfg_load_ok(&c, path, sets2, 2);
    assert_string_equal(c.model.preset, "custom");
    assert_int_equal(c.model.nlayers, 3);
    assert_int_equal(c.model.layers[0].out, 50);
    assert_string_equal(c.model.layers[0].name, "h");
    assert_string_equal(c.model.layers[1].type, "relu");
    assert_int_equal(c.model.layers[2].out, 12);
    assert_true(c.optim.lr == 0.5);
    assert_true(c.optim.momentum == 0.0);
    mp_config_free(&c);

    /* And a preset key given later switches back from a file's layers. */
    char lpath[1200];
    write_cfg(lpath, sizeof lpath, "base_layers.cfg",
              "model = { layers = ( { type = \"linear\"; out = 10; } ); };\n");
    const char *sets3[] = {"model.hidden=[32]"};
    mp_test_cfg_load_ok(&c, lpath, sets3, 1);
    assert_string_equal(c.model.preset, "mlp");
    assert_int_equal(c.model.nlayers, 0);
    assert_int_equal(c.model.nhidden, 1);
    assert_int_equal(c.model.hidden[0], 32);
    mp_config_free(&c);

    /* Overrides alone, without a file, create every group they need. */
    const char *sets4[] = {"checkpoint={}", "comm.backend=mpi", "model.preset=mlp"};
    mp_test_cfg_load_ok(&c, NULL, sets4, 3);
    assert_string_equal(c.comm.backend, "mpi");
    assert_string_equal(c.model.preset, "mlp");
    mp_config_free(&c);
}

static void test_set_errors(void **state)
{
    (void)state;
    char path[1200], prefix[1400];
    write_cfg(path, sizeof path, "set_base.cfg", "optim = {\n  lr = 0.2;\n};\n");
    struct {
        const char *arg, *prefix, *fragment;
    } cases[] = {
        {"optim.lr=fast", "--set optim.lr: ", "wrong type: expected float, got string"},
        {"optim.lr=-2", "--set optim.lr: ", "must be in (0, 1000] (got -2)"},
        {"optim.lrr=0.1", "--set optim.lrr: ", "unknown key (did you mean optim.lr?)"},
        {"foo.bar=1", "--set foo.bar: ", "unknown group"},
        {"checkpoint.dri=ck", "--set checkpoint.dri: ", "unknown key (did you mean checkpoint.dir?)"},
        {"data.batch_size=0", "--set data.batch_size: ", "must be in [1, 65536] (got 0)"},
        {"data.batch_size=1.5", "--set data.batch_size: ", "expected int, got float"},
        {"amp.opt_level=O7", "--set amp.opt_level: ", "\"O0\", \"O1\", \"O2\", \"O3\""},
        {"model.hidden=[8, 0]", "--set model.hidden.[1]: ", "(got 0)"},
        {"model.layers=({type=\"linear\";}, {type=\"relu\"; out=3;})",
         "--set model.layers.[0].out: ", "missing: required for linear layers"},
        {"model.layers=({type=\"linear\"; out=3;}, {type=\"relu\"; out=3;})",
         "--set model.layers.[1].out: ", "not allowed for relu layers"},
        {"optim.lr", "--set optim.lr: ", "expected key.path=value"},
        {"=0.1", "--set =0.1: ", "expected key.path=value"},
        {"optim..lr=0.1", "--set optim..lr: ", "not a key path"},
        {"optim.lr.x=1", "--set optim.lr.x: ", "cannot set: optim.lr is a float, not a group"},
        {"optim.nesterov=yes", "--set optim.nesterov: ", "expected bool, got string"},
        {"amp.half=a\nb", "--set amp.half: ", "(got \"a?b\")"},
        /* opened as a string, array, list or group but not one value, single-quoted, or with
         * a double quote: not a bare string (libconfig's reason said) */
        {"log.metrics=\"a\"b\"", "--set log.metrics: ",
         "it opens a string but is not one libconfig value (syntax error; a string that starts"},
        {"log.metrics=\"m.jsonl", "--set log.metrics: ", "it opens a string"},
        {"model.hidden=[512, 256", "--set model.hidden: ", "it opens an array"},
        {"model.hidden=[512, 256.0]", "--set model.hidden: ", "(mismatched element type in array"},
        {"model.layers=({type=\"relu\";}", "--set model.layers: ", "it opens a list"},
        {"optim={ lr = 0.5; ", "--set optim: ", "it opens a group but is not one libconfig value"},
        {"log.metrics='m.jsonl'", "--set log.metrics: ", "libconfig strings are in double quotes"},
        {"log.metrics=x.jsonl\"", "--set log.metrics: ", "a double quote in a bare string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *sets[] = {"data.batch_size=16", cases[i].arg};
        mp_test_cfg_expect_fail(path, sets, 2, cases[i].prefix, cases[i].fragment);
    }

    /* Two overrides that only conflict together: the rule names the --set that broke it. */
    const char *nest[] = {"optim.nesterov=true", "optim.momentum=0"};
    mp_test_cfg_expect_fail(path, nest, 2, "--set optim.nesterov: ", "requires optim.momentum > 0");

    /* An error left in the file is still reported at its line despite overrides. */
    write_cfg(path, sizeof path, "set_base2.cfg", "optim = {\n  lr = 0.2;\n  bogus = 1;\n};\n");
    snprintf(prefix, sizeof prefix, "%s:3: optim.bogus: ", path);
    const char *ok_sets[] = {"optim.lr=0.3"};
    mp_test_cfg_expect_fail(path, ok_sets, 1, prefix, "unknown key");
}

/* Compares every schema field of a and b byte for byte. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_values),
        cmocka_unit_test(test_set_errors),
    };
    return cmocka_run_group_tests(tests, setup_dir, NULL);
}
