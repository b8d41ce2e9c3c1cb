/* The configuration system: defaults, a complete file, every class of error (each must name
 * the file, the line and the key) and the round trip of the resolved text (--set overrides:
 * test_config_set.c; the schema table itself: test_config_schema.c). */
#include "tests/util/test_util.h"
#include "tests/util/test_config_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config.h"
#include "src/config_schema.h"

static char g_dir[1024];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s", mp_test_dir("test_config"));
    return 0;
}

/* Writes `text` to <dir>/<name> and returns the path in `path`. */
static void write_cfg(char *path, size_t cap, const char *name, const char *text)
{
    mp_test_cfg_write(path, cap, g_dir, name, text);
}

static void check_defaults(const mp_config *c)
{
    assert_string_equal(c->data.path, "/usr/share/datasets/fashion-mnist");
    assert_string_equal(c->data.format, "idx");
    assert_int_equal(c->data.batch_size, 64);
    assert_int_equal(c->data.num_classes, 10);
    assert_true(c->data.mean == 0.2860);
    assert_true(c->data.std == 0.3530);
    assert_true(c->data.shuffle);
    assert_false(c->data.drop_last);
    assert_int_equal(c->data.train_limit, 0);
    assert_int_equal(c->data.test_limit, 0);
    assert_string_equal(c->model.preset, "mlp");
    assert_int_equal(c->model.nhidden, 2);
    assert_int_equal(c->model.hidden[0], 256);
    assert_int_equal(c->model.hidden[1], 128);
    assert_int_equal(c->model.nlayers, 0);
    assert_int_equal(c->model.dim, 128);
    assert_int_equal(c->model.heads, 4);
    assert_string_equal(c->amp.opt_level, "O0");
    assert_true(c->amp.keep_norm_fp32);
    assert_true(c->amp.keep_batchnorm_fp32);
    assert_string_equal(c->amp.half, "fp16");
    assert_string_equal(c->amp.device, "cpu");
    assert_string_equal(c->optim.name, "sgd");
    assert_true(c->optim.lr == 0.1);
    assert_true(c->optim.momentum == 0.9);
    assert_true(c->optim.dampening == 0.0);
    assert_true(c->optim.weight_decay == 0.0);
    assert_false(c->optim.nesterov);
    assert_string_equal(c->schedule.type, "constant");
    assert_true(c->schedule.step_epochs == 30.0);
    assert_true(c->schedule.gamma == 0.1);
    assert_true(c->schedule.min_lr == 0.0);
    assert_int_equal(c->train.epochs, 10);
    assert_int_equal(c->train.max_steps, 0);
    assert_int_equal(c->train.seed, 42);
    assert_int_equal(c->train.eval_every, 1);
    assert_string_equal(c->comm.backend, "auto");
    assert_string_equal(c->log.metrics, "");
    assert_int_equal(c->log.every, 50);
    assert_string_equal(c->log.progress, "auto");
}

static void test_defaults(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "empty.cfg", "# nothing but a comment\n");
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    assert_string_equal(c.path, path);
    check_defaults(&c);
    mp_config_free(&c);
    assert_null(c.text);

    /* Empty groups, checkpoint included, are accepted. */
    write_cfg(path, sizeof path, "groups.cfg",
              "data = {};\nmodel = {};\namp = {};\noptim = {};\nschedule = {};\ntrain = {};\n"
              "comm = {};\ncheckpoint = {};\nlog = {};\n");
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    check_defaults(&c);
    mp_config_free(&c);

    /* No file at all: defaults and overrides only. */
    mp_test_cfg_load_ok(&c, NULL, NULL, 0);
    check_defaults(&c);
    assert_string_equal(c.path, "");
    mp_config_free(&c);
}

static const char k_full[] =
    "// every key, none at its default\n"
    "data = {\n"
    "  path = \"/data/fm\";\n"
    "  format = \"idx\";\n"
    "  batch_size = 128;\n"
    "  num_classes = 12;\n"
    "  mean = -0.5;\n"
    "  std = 2;            # an int where a float is expected\n"
    "  shuffle = false;\n"
    "  drop_last = true;\n"
    "  train_limit = 1000;\n"
    "  test_limit = 200;\n"
    "};\n"
    "model: { preset = \"mlp\"; hidden = [512, 256, 64]; };\n"
    "amp = { opt_level = \"O2\"; half = \"bf16\"; device = \"auto\"; };\n"
    "optim = {\n"
    "  name = \"sgd\"; lr = 0.05; momentum = 0.8; dampening = 0.0;\n"
    "  weight_decay = 5e-4; nesterov = true;\n"
    "};\n"
    "schedule = { type = \"cosine\"; step_epochs = 7.5; gamma = 0.5; min_lr = 1e-5; };\n"
    "train = { epochs = 12; max_steps = 900; seed = 3000000000L; eval_every = 0; };\n"
    "comm = { backend = \"mpi\"; };\n"
    "checkpoint = { };\n"
    "log = { metrics = \"runs/x/metrics.jsonl\"; every = 100; progress = \"plain\"; };\n";

static void check_full(const mp_config *c)
{
    assert_string_equal(c->data.path, "/data/fm");
    assert_int_equal(c->data.batch_size, 128);
    assert_int_equal(c->data.num_classes, 12);
    assert_true(c->data.mean == -0.5);
    assert_true(c->data.std == 2.0);
    assert_false(c->data.shuffle);
    assert_true(c->data.drop_last);
    assert_int_equal(c->data.train_limit, 1000);
    assert_int_equal(c->data.test_limit, 200);
    assert_string_equal(c->model.preset, "mlp");
    assert_int_equal(c->model.nhidden, 3);
    assert_int_equal(c->model.hidden[0], 512);
    assert_int_equal(c->model.hidden[1], 256);
    assert_int_equal(c->model.hidden[2], 64);
    assert_int_equal(c->model.nlayers, 0);
    assert_string_equal(c->amp.opt_level, "O2");
    assert_string_equal(c->amp.half, "bf16");
    assert_string_equal(c->amp.device, "auto");
    assert_true(c->optim.lr == 0.05);
    assert_true(c->optim.momentum == 0.8);
    assert_true(c->optim.weight_decay == 5e-4);
    assert_true(c->optim.nesterov);
    assert_string_equal(c->schedule.type, "cosine");
    assert_true(c->schedule.step_epochs == 7.5);
    assert_true(c->schedule.gamma == 0.5);
    assert_true(c->schedule.min_lr == 1e-5);
    assert_int_equal(c->train.epochs, 12);
    assert_int_equal(c->train.max_steps, 900);
    assert_true(c->train.seed == 3000000000u);
    assert_int_equal(c->train.eval_every, 0);
    assert_string_equal(c->comm.backend, "mpi");
    assert_string_equal(c->log.metrics, "runs/x/metrics.jsonl");
    assert_int_equal(c->log.every, 100);
    assert_string_equal(c->log.progress, "plain");
}

static void test_full_file(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "full.cfg", k_full);
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    check_full(&c);
    mp_config_free(&c);
}

static void test_custom_layers(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "layers.cfg",
              "model = {\n"
              "  layers = (\n"
              "    { type = \"linear\"; out = 300; name = \"enc.fc1\"; },\n"
              "    { type = \"relu\"; },\n"
              "    { type = \"linear\"; out = 10; }\n"
              "  );\n"
              "};\n");
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    assert_string_equal(c.model.preset, "custom");
    assert_int_equal(c.model.nlayers, 3);
    assert_int_equal(c.model.nhidden, 0);
    assert_string_equal(c.model.layers[0].type, "linear");
    assert_int_equal(c.model.layers[0].out, 300);
    assert_string_equal(c.model.layers[0].name, "enc.fc1");
    assert_string_equal(c.model.layers[1].type, "relu");
    assert_int_equal(c.model.layers[1].out, 0);
    assert_string_equal(c.model.layers[1].name, "");
    assert_int_equal(c.model.layers[2].out, 10);
    assert_null(strstr(c.text, "preset ="));
    assert_null(strstr(c.text, "hidden ="));
    mp_config_free(&c);
}

static void round_trip(const char *path, const char *const *sets, int nsets, const char *name);

/* The transformer layer types and their keys; the presets' width and heads. */
static void test_transformer_layers(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "gpt_layers.cfg",
              "model = {\n"
              "  layers = (\n"
              "    { type = \"embedding\"; out = 16; vocab = 300; name = \"wte\"; },\n"
              "    { type = \"posembed\"; name = \"wpe\"; },\n"
              "    { type = \"transformer\"; heads = 4; causal = true; p = 0.1; eps = 1e-6; },\n"
              "    { type = \"layernorm\"; },\n"
              "    { type = \"attention\"; },\n"
              "    { type = \"attention\"; attention = \"matrix\"; },\n"
              "    { type = \"gelu\"; },\n"
              "    { type = \"linear\"; out = 48; per_token = true; },\n"
              "    { type = \"linear\"; out = 300; tie = true; name = \"head\"; }\n"
              "  );\n"
              "};\n");
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    const mp_layer_spec *l = c.model.layers;
    assert_int_equal(c.model.nlayers, 9);
    assert_int_equal(l[0].out, 16);
    assert_int_equal(l[0].vocab, 300);
    assert_string_equal(l[1].type, "posembed");
    assert_int_equal(l[2].heads, 4);
    assert_true(l[2].causal);
    assert_true(l[2].p == 0.1);
    assert_true(l[2].eps == 1e-6);
    assert_true(l[3].eps == 1e-5); /* the defaults */
    assert_int_equal(l[4].heads, 1);
    assert_false(l[4].causal);
    assert_true(l[4].p == 0.0);
    assert_string_equal(l[4].attention, "flash"); /* the default */
    assert_string_equal(l[5].attention, "matrix");
    assert_true(l[7].per_token);
    assert_false(l[7].tie);
    assert_true(l[8].tie);
    assert_false(l[8].per_token);
    assert_int_equal(l[8].vocab, 0);
    mp_config_free(&c);
    round_trip(path, NULL, 0, "gpt_layers_out.cfg");

    const char *gpt[] = {"model.preset=gpt", "model.dim=96", "model.heads=6", "model.depth=2",
                         "data.format=text"};
    mp_test_cfg_load_ok(&c, NULL, gpt, 5);
    assert_string_equal(c.model.preset, "gpt");
    assert_int_equal(c.model.dim, 96);
    assert_int_equal(c.model.heads, 6);
    assert_int_equal(c.data.num_classes, 256); /* text data's default */
    mp_config_free(&c);
    const char *vit[] = {"model.preset=vit", "amp.opt_level=O3"};
    mp_test_cfg_load_ok(&c, NULL, vit, 2);
    assert_false(c.amp.keep_norm_fp32); /* O3's default, and its alias with it */
    assert_false(c.amp.keep_batchnorm_fp32);
    mp_config_free(&c);
}

/* One file with one error: the message must start with "<file>:<line>: <key>: ". */
typedef struct bad_case {
    const char *text;
    int line;
    const char *key;
    const char *fragment;
} bad_case;

static const bad_case k_bad[] = {
    /* unknown keys, groups and top-level settings */
    {"optim = {\n  lr = 0.1;\n  lrr = 0.2;\n};\n", 3, "optim.lrr",
     "unknown key (did you mean optim.lr?)"},
    {"# top\nlr = 0.1;\n", 2, "lr", "unknown key (did you mean optim.lr?)"},
    {"data = {};\n\nfoo = {\n  bar = 1;\n};\n", 3, "foo", "unknown group"},
    {"optm = { lr = 0.1; };\n", 1, "optm", "unknown group (did you mean optim?)"},
    {"checkpoint = {\n  folder = \"ck\";\n};\n", 2, "checkpoint.folder", "unknown key"},
    {"optim = {\n  sgd = { lr = 0.1; };\n};\n", 2, "optim.sgd", "unknown key"},
    /* wrong types */
    {"optim = {\n  lr = \"fast\";\n};\n", 2, "optim.lr", "wrong type: expected float, got string"},
    {"data = {\n  batch_size = 64.0;\n};\n", 2, "data.batch_size",
     "wrong type: expected int, got float"},
    {"data = { shuffle = 1; };\n", 1, "data.shuffle", "wrong type: expected bool, got int"},
    {"data = { path = 5; };\n", 1, "data.path", "wrong type: expected string, got int"},
    {"model = {\n  hidden = 256;\n};\n", 2, "model.hidden",
     "wrong type: expected int array, got int"},
    {"model = {\n  hidden = [256.0];\n};\n", 2, "model.hidden.[0]",
     "wrong type: expected int, got float"},
    {"\noptim = 5;\n", 2, "optim", "wrong type: expected group, got int"},
    /* out of range */
    {"data = {\n  batch_size = 0;\n};\n", 2, "data.batch_size", "must be in [1, 65536] (got 0)"},
    {"data = { batch_size = 65537; };\n", 1, "data.batch_size", "(got 65537)"},
    {"data = { num_classes = 1; };\n", 1, "data.num_classes", "must be in [2, 1000000] (got 1)"},
    {"data = { std = 0.0; };\n", 1, "data.std", "must be > 0 (got 0)"},
    {"data = { path = \"\"; };\n", 1, "data.path", "must not be empty"},
    {"data = { train_limit = -1; };\n", 1, "data.train_limit", "must be >= 0 (got -1)"},
    {"optim = {\n  lr = -1;\n};\n", 2, "optim.lr", "must be in (0, 1000] (got -1)"},
    {"optim = {\n\n  momentum = 1.0;\n};\n", 3, "optim.momentum", "must be in [0, 1) (got 1)"},
    {"optim = { dampening = 1.5; };\n", 1, "optim.dampening", "must be in [0, 1]"},
    {"optim = { weight_decay = -0.1; };\n", 1, "optim.weight_decay", "must be >= 0"},
    {"schedule = {\n  gamma = 0;\n};\n", 2, "schedule.gamma", "must be in (0, 1] (got 0)"},
    {"schedule = { step_epochs = 0.0; };\n", 1, "schedule.step_epochs", "must be in (0, 1000000] (got 0)"},
    {"train = {\n  epochs = 100001;\n};\n", 2, "train.epochs", "must be in [1, 100000]"},
    {"train = { seed = -5; };\n", 1, "train.seed", "must be >= 0 (got -5)"},
    {"log = { every = 0; };\n", 1, "log.every", "must be in [1, 1000000000] (got 0)"},
    /* a predivide that overflows every gradient: every step would be skipped (issue 45) */
    {"comm = { predivide = 1e-300; };\n", 1, "comm.predivide",
     "must be in [0.001, 1000000] (got 1e-300)"},
    {"model = {\n  hidden = [];\n};\n", 2, "model.hidden", "must have 1 to 16 entries (got 0)"},
    {"model = {\n  hidden = [64,\n 0];\n};\n", 3, "model.hidden.[1]",
     "must be in [1, 1000000] (got 0)"},
    /* strings outside their allowed values */
    {"amp = {\n  opt_level = \"O4\";\n};\n", 2, "amp.opt_level",
     "must be one of \"O0\", \"O1\", \"O2\", \"O3\" (got \"O4\")"},
    {"amp = { half = \"fp8\"; };\n", 1, "amp.half", "must be one of \"fp16\", \"bf16\""},
    {"log = { progress = \"fancy\"; };\n", 1, "log.progress",
     "\"auto\", \"bar\", \"plain\", \"none\""},
    {"schedule = { type = \"exponential\"; };\n", 1, "schedule.type", "\"constant\", \"step\""},
    {"model = { preset = \"custom\"; };\n", 1, "model.preset", "must be one of \"mlp\""},
    /* cross-checks */
    {"optim = {\n  momentum = 0.0;\n  nesterov = true;\n};\n", 3, "optim.nesterov",
     "requires optim.momentum > 0 and optim.dampening = 0"},
    {"optim = {\n  nesterov = true;\n  dampening = 0.1;\n};\n", 2, "optim.nesterov",
     "dampening 0.1"},
    /* model.layers */
    {"model = {\n  layers = (\n    { type = \"linear\"; out = 100; },\n    { type = \"relu\"; },\n"
     "    { type = \"linear\"; }\n  );\n};\n",
     5, "model.layers.[2].out", "missing: required for linear layers"},
    {"model = {\n  layers = (\n    { type = \"linear\"; out = 100; },\n    { type = \"relu\";\n"
     "      out = 5; }\n  );\n};\n",
     5, "model.layers.[1].out", "not allowed for relu layers"},
    {"model = {\n  layers = (\n    { type = \"conv\"; out = 100; }\n  );\n};\n", 3,
     "model.layers.[0].type",
     "must be one of \"linear\", \"relu\", \"conv2d\", "}, /* the rest: test_layer_registry */
    {"model = {\n  layers = (\n    { out = 100; }\n  );\n};\n", 3, "model.layers.[0].type",
     "missing"},
    /* the transformer layer keys, each on its own types only */
    {"model = {\n  layers = (\n    { type = \"conv2d\"; out = 8; kernel = 3;\n      heads = 2; }\n"
     "  );\n};\n", 4, "model.layers.[0].heads", "not allowed for conv2d layers"},
    {"model = {\n  layers = (\n    { type = \"flatten\"; },\n    { type = \"relu\"; tie = true; }\n"
     "  );\n};\n", 4, "model.layers.[1].tie", "not allowed for relu layers"},
    {"model = {\n  layers = (\n    { type = \"embedding\"; out = 8; per_token = true; }\n"
     "  );\n};\n", 3, "model.layers.[0].per_token", "not allowed for embedding layers"},
    {"model = {\n  layers = (\n    { type = \"linear\"; out = 8;\n vocab = 9; }\n  );\n};\n", 4,
     "model.layers.[0].vocab", "not allowed for linear layers"},
    {"model = {\n  layers = (\n    { type = \"layernorm\"; causal = true; }\n  );\n};\n", 3,
     "model.layers.[0].causal", "not allowed for layernorm layers"},
    {"model = {\n  layers = (\n    { type = \"gelu\"; p = 0.1; }\n  );\n};\n", 3,
     "model.layers.[0].p", "not allowed for gelu layers"},
    {"model = {\n  layers = (\n    { type = \"embedding\"; vocab = 256; }\n  );\n};\n", 3,
     "model.layers.[0].out", "missing: required for embedding layers"},
    {"model = {\n  layers = (\n    { type = \"transformer\"; heads = 0; }\n  );\n};\n", 3,
     "model.layers.[0].heads", "must be in [1, 1024] (got 0)"},
    {"model = {\n  heads = 0;\n};\n", 2, "model.heads", "must be in [1, 1024] (got 0)"},
    {"model = {\n  dim = 8193;\n};\n", 2, "model.dim", "must be in [1, 8192] (got 8193)"},
    {"amp = { keep_norm_fp32 = 1; };\n", 1, "amp.keep_norm_fp32",
     "wrong type: expected bool, got int"},
    {"model = {\n  layers = (\n    { type = \"linear\"; outs = 10; }\n  );\n};\n", 3,
     "model.layers.[0].outs", "unknown key (did you mean out?)"},
    {"model = {\n  layers = (\n    { type = \"linear\"; out = 0; }\n  );\n};\n", 3,
     "model.layers.[0].out", "must be in [1, 1000000] (got 0)"},
    {"model = {\n  layers = (\n    { type = \"linear\"; out = 10; name = \"a-b\"; }\n  );\n};\n",
     3, "model.layers.[0].name", "letters, digits"},
    {"model = {\n  layers = ( { type = \"linear\"; out = 10;\n name = "
     "\"a_very_long_layer_name_that_goes_past_the_limit_x\"; } );\n};\n",
     3, "model.layers.[0].name", "too long: at most 47 characters"},
    {"model = {\n  layers = (\n    { type = \"linear\"; out = 10; name = \"fc\"; },\n"
     "    { type = \"linear\"; out = 10; name = \"fc\"; }\n  );\n};\n",
     4, "model.layers.[1].name", "already the name of model.layers.[0]"},
    {"model = {\n  layers = ( 5 );\n};\n", 2, "model.layers.[0]", "expected group, got int"},
    {"model = {\n  layers = ();\n};\n", 2, "model.layers", "must have 1 to 64 layers (got 0)"},
    {"model = {\n  layers = [1, 2];\n};\n", 2, "model.layers", "expected list of layer groups"},
    {"model = {\n  preset = \"mlp\";\n  layers = ( { type = \"linear\"; out = 10; } );\n};\n", 3,
     "model.layers", "cannot be combined with model.preset"},
    {"model = {\n  hidden = [10];\n\n  layers = ( { type = \"linear\"; out = 10; } );\n};\n", 4,
     "model.layers", "cannot be combined with model.hidden"},
};

static void test_file_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        char name[64], path[1200], prefix[1400];
        snprintf(name, sizeof name, "bad%02zu.cfg", i);
        write_cfg(path, sizeof path, name, k_bad[i].text);
        snprintf(prefix, sizeof prefix, "%s:%d: %s: ", path, k_bad[i].line, k_bad[i].key);
        mp_test_cfg_expect_fail(path, NULL, 0, prefix, k_bad[i].fragment);
    }
}

static void test_syntax_and_io_errors(void **state)
{
    (void)state;
    char path[1200], prefix[1400];
    write_cfg(path, sizeof path, "syntax.cfg", "data = {\n  batch_size = 64;\n  path = ;\n};\n");
    snprintf(prefix, sizeof prefix, "%s:3: ", path);
    mp_test_cfg_expect_fail(path, NULL, 0, prefix, "syntax error");

    write_cfg(path, sizeof path, "dup.cfg", "optim = {\n  lr = 0.1;\n  lr = 0.2;\n};\n");
    snprintf(prefix, sizeof prefix, "%s:3: ", path);
    mp_test_cfg_expect_fail(path, NULL, 0, prefix, "lr: given twice in its group");
    write_cfg(path, sizeof path, "dup2.cfg", "data = { batch_size = 8; };\n\tdata: { };\n");
    snprintf(prefix, sizeof prefix, "%s:2: ", path);
    mp_test_cfg_expect_fail(path, NULL, 0, prefix, "data: given twice in its group");

    snprintf(path, sizeof path, "%s/no-such.cfg", g_dir);
    snprintf(prefix, sizeof prefix, "%s: cannot read: ", path);
    mp_test_cfg_expect_fail(path, NULL, 0, prefix, "No such file");

    mp_test_cfg_expect_fail(g_dir, NULL, 0, g_dir, ": cannot read: Is a directory");
}

/* What editors write: a last line that is a comment without its newline (libconfig 1.5 ends
 * # and // comments only at a newline), and a UTF-8 byte order mark, in a file and in an
 * @included one; a BOM anywhere else is still an error. */
static void test_editor_endings(void **state)
{
    (void)state;
    char path[1200], inc[1200], prefix[1400];
    const char *texts[] = {"data = { batch_size = 32; };\n# the end", "data = { batch_size = 32; };"
                           " // the end", "\xEF\xBB\xBF" "data = { batch_size = 32; };\n"};
    for (int i = 0; i < 3; i++) {
        mp_config c;
        write_cfg(path, sizeof path, "editor.cfg", texts[i]);
        mp_test_cfg_load_ok(&c, path, NULL, 0);
        assert_int_equal(c.data.batch_size, 32);
        mp_config_free(&c);
        write_cfg(inc, sizeof inc, "editor_inc.cfg", texts[i]);
        write_cfg(path, sizeof path, "editor_main.cfg", "@include \"editor_inc.cfg\"\n// end");
        mp_test_cfg_load_ok(&c, path, NULL, 0);
        assert_int_equal(c.data.batch_size, 32);
        mp_config_free(&c);
    }
    write_cfg(path, sizeof path, "bom2.cfg", "data = { batch_size = 32; };\n\xEF\xBB\xBF\n");
    snprintf(prefix, sizeof prefix, "%s:2: ", path);
    mp_test_cfg_expect_fail(path, NULL, 0, prefix, "syntax error");
}

static void test_include_relative(void **state)
{
    (void)state;
    char path[1200], inc[1200], prefix[1400];
    write_cfg(inc, sizeof inc, "common.cfg", "data = { batch_size = 32; };\n");
    write_cfg(path, sizeof path, "main.cfg", "@include \"common.cfg\"\noptim = { lr = 0.3; };\n");
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    assert_int_equal(c.data.batch_size, 32);
    assert_true(c.optim.lr == 0.3);
    mp_config_free(&c);

    write_cfg(inc, sizeof inc, "common_bad.cfg", "data = {\n  batch_size = -3;\n};\n");
    write_cfg(path, sizeof path, "main_bad.cfg", "@include \"common_bad.cfg\"\n");
    snprintf(prefix, sizeof prefix, "%s:2: data.batch_size: ", inc);
    mp_test_cfg_expect_fail(path, NULL, 0, prefix, "(got -3)");

    write_cfg(inc, sizeof inc, "common_syntax.cfg", "data = {\n  batch_size = ;\n};\n");
    write_cfg(path, sizeof path, "main_syntax.cfg", "\n@include \"common_syntax.cfg\"\n");
    snprintf(prefix, sizeof prefix, "%s:2: ", inc);
    mp_test_cfg_expect_fail(path, NULL, 0, prefix, "syntax error");
}

static void assert_same_values(const mp_config *a, const mp_config *b)
{
    for (int i = 0; i < mp_config_nkeys; i++) {
        const mp_key *k = &mp_config_keys[i];
        if (memcmp((const char *)a + k->offset, (const char *)b + k->offset, k->size) != 0)
            fail_msg("%s differs after the round trip", k->path);
        if ((k->type == MP_KEY_INT_ARRAY || k->type == MP_KEY_LAYERS) &&
            memcmp((const char *)a + k->count_offset, (const char *)b + k->count_offset,
                   sizeof(int)) != 0)
            fail_msg("the count of %s differs after the round trip", k->path);
    }
}

static void round_trip(const char *path, const char *const *sets, int nsets, const char *name)
{
    mp_config a, b;
    mp_test_cfg_load_ok(&a, path, sets, nsets);
    char rpath[1200];
    write_cfg(rpath, sizeof rpath, name, a.text);
    mp_test_cfg_load_ok(&b, rpath, NULL, 0);
    assert_same_values(&a, &b);
    assert_string_equal(a.text, b.text);
    mp_config_free(&a);
    mp_config_free(&b);
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "rt_full.cfg", k_full);
    round_trip(path, NULL, 0, "rt_full_out.cfg");
    round_trip(NULL, NULL, 0, "rt_defaults_out.cfg");

    const char *sets[] = {"log.metrics=\"q\\\"uote\\\\back\\tslash\"",
                          "optim.lr=0.30000000000000004", "data.mean=-1e-300",
                          "schedule.min_lr=1e-7", "train.seed=9007199254740993"};
    round_trip(path, sets, 5, "rt_sets_out.cfg");
    const char *layers[] = {"model.layers=({type=\"linear\"; out=7; name=\"a.b_c\";}, "
                            "{type=\"relu\";}, {type=\"linear\"; out=12;})"};
    round_trip(path, layers, 1, "rt_layers_out.cfg");

    /* The text really carries the values (a changed value changes the reloaded config). */
    mp_config c;
    mp_test_cfg_load_ok(&c, path, sets, 5);
    assert_non_null(strstr(c.text, "lr = 0.30000000000000004;"));
    assert_non_null(strstr(c.text, "seed = 9007199254740993L;"));
    assert_non_null(strstr(c.text, "metrics = \"q\\\"uote\\\\back\\tslash\";"));
    assert_string_equal(c.log.metrics, "q\"uote\\back\tslash");
    assert_true(c.train.seed == 9007199254740993u);
    assert_non_null(strstr(c.text, "checkpoint = {"));
    /* Float keys print as floats even when integral. */
    assert_non_null(strstr(c.text, "\n  step_epochs = 7.5;\n"));
    assert_non_null(strstr(c.text, "\n  dampening = 0.0;\n"));
    assert_non_null(strstr(c.text, "\n  std = 2.0;\n"));

    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_non_null(mem);
    mp_config_print(&c, mem);
    fclose(mem);
    assert_string_equal(buf, c.text);
    free(buf);
    mp_config_free(&c);
}

/* data.mean and data.std not given for a format with per-channel values (an RGB image folder,
 * CIFAR-10) print as a comment with those values and read back still not given, so the run of
 * the printed text normalises as the original's; given, they print as keys. */
static void test_round_trip_channel_norm(void **state)
{
    (void)state;
    const char *folder[] = {"data.format=\"folder\"", "data.path=\"root\"",
                            "data.image_size=32", "data.std=0.5"};
    mp_config a, b;
    mp_test_cfg_load_ok(&a, NULL, folder, 4);
    assert_non_null(strstr(a.text, "\n  # mean: not given, so data.format \"folder\"'s per "
                                   "channel: [0.485, 0.456, 0.406]\n"));
    assert_null(strstr(a.text, "\n  mean = "));
    assert_non_null(strstr(a.text, "\n  std = 0.5;\n"));
    char rpath[1200];
    write_cfg(rpath, sizeof rpath, "rt_norm_out.cfg", a.text);
    mp_test_cfg_load_ok(&b, rpath, NULL, 0);
    assert_false(mp_config_given(&b, "data.mean"));
    assert_true(mp_config_given(&b, "data.std"));
    assert_same_values(&a, &b);
    assert_string_equal(a.text, b.text);
    mp_config_free(&a);
    mp_config_free(&b);
    const char *gray[] = {"data.format=\"folder\"", "data.path=\"root\"",
                          "data.image_size=32", "data.channels=1"};
    mp_test_cfg_load_ok(&a, NULL, gray, 4);
    assert_non_null(strstr(a.text, "\n  mean = 0.286;\n")); /* one value for every channel */
    mp_config_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_round_trip_channel_norm),
        cmocka_unit_test(test_full_file),
        cmocka_unit_test(test_custom_layers),
        cmocka_unit_test(test_transformer_layers),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_syntax_and_io_errors),
        cmocka_unit_test(test_editor_endings),
        cmocka_unit_test(test_include_relative),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, setup_dir, NULL);
}
