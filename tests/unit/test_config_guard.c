/* Hostile config input (issue 18): what libconfig 1.5 alone gets wrong must be an ordinary
 * config error, MP_EUSAGE with one line naming the file and line. Its scanner exited the
 * process for `@include ""`, an @include of a directory and /proc/self/mem; absolute @include
 * names never worked; a NUL byte cut a string; an unclosed comment dropped the rest of the file;
 * integers beyond 32 bits wrapped in --set values and @included files; contradictory amp and
 * schedule keys, and an unbuildable preset depth, were accepted; model-building errors did not
 * say where the layer was configured. */
#include "tests/util/test_util.h"
#include "tests/util/test_config_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config.h"
#include "src/train.h"

static char g_dir[1024];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s", mp_test_dir("test_config_guard"));
    return 0;
}

/* Writes len bytes of text to <dir>/<name>; the path in `path`. */
static void write_raw(char *path, size_t cap, const char *name, const char *text, size_t len)
{
    snprintf(path, cap, "%s/%s", g_dir, name);
    mp_test_write_file(path, text, len, 0);
}

static void write_cfg(char *path, size_t cap, const char *name, const char *text)
{
    write_raw(path, cap, name, text, strlen(text));
}

/* Loads and expects MP_EUSAGE with one line "<where>: ..." holding `fragment`. */
static void expect_fail(const char *path, const char *const *sets, int nsets, const char *where,
                        const char *fragment)
{
    char prefix[1400];
    snprintf(prefix, sizeof prefix, "%s: ", where);
    mp_test_cfg_expect_fail(path, sets, nsets, prefix, fragment);
}

/* "<path>:<line>" */
static const char *at(const char *path, int line)
{
    static char buf[1300];
    snprintf(buf, sizeof buf, "%s:%d", path, line);
    return buf;
}

static void test_include_errors(void **state)
{
    (void)state;
    char path[1200], inc[1200], text[1400];
    write_cfg(path, sizeof path, "empty_name.cfg", "train = { epochs = 2; };\n@include \"\"\n");
    expect_fail(path, NULL, 0, at(path, 2), "@include \"\": empty file name");

    snprintf(text, sizeof text, "\n@include \"%s\"\n", g_dir);
    write_cfg(path, sizeof path, "dir.cfg", text);
    expect_fail(path, NULL, 0, at(path, 2), "Is a directory");

    write_cfg(path, sizeof path, "dir_rel.cfg", "  @include \".\"\n");
    expect_fail(path, NULL, 0, at(path, 1), "Is a directory");

    write_cfg(path, sizeof path, "devnull.cfg", "@include \"/dev/null\"\n");
    expect_fail(path, NULL, 0, at(path, 1), "not a regular file");

    write_cfg(path, sizeof path, "missing.cfg", "\n\n@include \"no-such.cfg\"\n");
    expect_fail(path, NULL, 0, at(path, 3), "No such file");

    write_cfg(path, sizeof path, "self.cfg", "@include \"self.cfg\"\n");
    expect_fail(path, NULL, 0, at(path, 1), "includes itself");
    write_cfg(inc, sizeof inc, "ping.cfg", "\n@include \"pong.cfg\"\n");
    write_cfg(path, sizeof path, "pong.cfg", "@include \"ping.cfg\"\n");
    expect_fail(path, NULL, 0, at(inc, 2), "includes itself");

    write_cfg(path, sizeof path, "no_quote.cfg", "@include other.cfg\n");
    expect_fail(path, NULL, 0, at(path, 1), "expected @include \"FILE\"");
    write_cfg(path, sizeof path, "open_name.cfg", "@include \"other.cfg\n");
    expect_fail(path, NULL, 0, at(path, 1), "closing '\"' is missing");

    /* An @include inside a comment or a string is not one. */
    write_cfg(path, sizeof path, "commented.cfg",
              "/*\n@include \"\"\n*/\ndata = { path = \"\n@include \\\"\\\"\"; };\n");
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    assert_string_equal(c.data.path, "\n@include \"\"");
    mp_config_free(&c);
}

static void test_proc_self_mem(void **state)
{
    (void)state;
    expect_fail("/proc/self/mem", NULL, 0, "/proc/self/mem", "cannot read");
}

static void test_include_paths(void **state)
{
    (void)state;
    char path[1200], inc[1200], text[1400];
    write_cfg(inc, sizeof inc, "abs_common.cfg", "data = { batch_size = 48; };\n");
    snprintf(text, sizeof text, "@include \"%s\"\noptim = { lr = 0.25; };\n", inc);
    write_cfg(path, sizeof path, "abs.cfg", text);
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    assert_int_equal(c.data.batch_size, 48);
    assert_true(c.optim.lr == 0.25);
    mp_config_free(&c);

    /* Nested includes resolve relative to the including file; errors name the right line. */
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/sub", g_dir);
    snprintf(text, sizeof text, "mkdir -p %s", sub);
    char out[256];
    assert_int_equal(mp_test_run(text, out, sizeof out), 0);
    write_cfg(inc, sizeof inc, "sub/leaf.cfg", "\n\noptim = {\n  lr = -1;\n};\n");
    write_cfg(inc, sizeof inc, "sub/mid.cfg", "# mid\n@include \"leaf.cfg\" # the leaf\n");
    write_cfg(path, sizeof path, "nested.cfg",
              "data = { batch_size = 8; };\n@include \"sub/mid.cfg\"\ntrain = { epochs = 0; };\n");
    snprintf(text, sizeof text, "%s/sub/leaf.cfg:4: optim.lr", g_dir);
    expect_fail(path, NULL, 0, text, "(got -1)");
    /* Lines after an include keep their own numbers. */
    write_cfg(inc, sizeof inc, "sub/leaf.cfg", "optim = { lr = 0.5; };");
    expect_fail(path, NULL, 0, at(path, 3), "train.epochs");
}

static void test_nul_and_unclosed(void **state)
{
    (void)state;
    char path[1200];
    static const char nul[] = "data = {\n  path = \"/data\0/evil\";\n};\n";
    write_raw(path, sizeof path, "nul.cfg", nul, sizeof nul - 1);
    expect_fail(path, NULL, 0, at(path, 2), "NUL byte");

    write_cfg(path, sizeof path, "nul_escape.cfg", "\ndata = { path = \"/data\\x00/evil\"; };\n");
    expect_fail(path, NULL, 0, at(path, 2), "\\x00 in a string");

    write_cfg(path, sizeof path, "comment.cfg",
              "data = { batch_size = 32; };\n/* the rest is dropped\noptim = { lr = -1; };\n");
    expect_fail(path, NULL, 0, at(path, 2), "comment that starts here is not closed");

    write_cfg(path, sizeof path, "string.cfg", "data = {\n  path = \"/data;\n};\n");
    expect_fail(path, NULL, 0, at(path, 2), "string that starts here is not closed");

    const char *set_comment[] = {"optim.lr=0.5 /* note"};
    expect_fail(NULL, set_comment, 1, "--set optim.lr", "not closed");
    const char *set_include[] = {"data.path=x\n@include \"/\""};
    expect_fail(NULL, set_include, 1, "--set data.path", "@include is for config files only");
}

static void test_wide_integers(void **state)
{
    (void)state;
    char path[1200], inc[1200];
    write_cfg(path, sizeof path, "plain.cfg", "train = { epochs = 2; };\n");
    const char *hidden[] = {"model.hidden=[64, 4294967328]"};
    expect_fail(path, hidden, 1, "--set model.hidden.[1]", "(got 4294967328)");
    const char *hex[] = {"data.batch_size=0x100000020"};
    expect_fail(path, hex, 1, "--set data.batch_size", "(got 4294967328)");
    const char *layer[] = {"model.layers=({ type = \"linear\"; out = 4294967306; })"};
    expect_fail(path, layer, 1, "--set model.layers.[0].out", "(got 4294967306)");
    const char *huge[] = {"train.seed=99999999999999999999"};
    expect_fail(path, huge, 1, "--set train.seed", "does not fit in 64 bits");
    const char *seed[] = {"train.seed=0x100000000"};
    mp_config c;
    mp_test_cfg_load_ok(&c, path, seed, 1);
    assert_int_equal(c.train.seed, 0x100000000ULL);
    mp_config_free(&c);

    write_cfg(inc, sizeof inc, "wide_inc.cfg", "# included\n\ndata = { batch_size = 4294967328; };\n");
    write_cfg(path, sizeof path, "wide_main.cfg", "optim = { lr = 0.1; };\n@include \"wide_inc.cfg\"\n");
    expect_fail(path, NULL, 0, at(inc, 3), "data.batch_size: integer 4294967328 does not fit");
    write_cfg(inc, sizeof inc, "wide_inc.cfg", "model = { hidden = [8, 0x100000020]; };\n");
    expect_fail(path, NULL, 0, at(inc, 1), "model.hidden.[1]: integer 0x100000020");
    write_cfg(path, sizeof path, "huge_l.cfg", "train = {\n  seed = 99999999999999999999L;\n};\n");
    expect_fail(path, NULL, 0, at(path, 2), "train.seed: integer 99999999999999999999 does not fit in 64");
    write_cfg(path, sizeof path, "dot.cfg", "data = { mean = .4294967296; };\n");
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    assert_true(c.data.mean == .4294967296);
    mp_config_free(&c);
}

static void test_contradictions(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "scales.cfg",
              "amp = {\n  opt_level = \"O2\";\n  min_scale = 65536.0;\n  max_scale = 1024.0;\n};\n");
    expect_fail(path, NULL, 0, at(path, 3),
                "amp.min_scale: 65536 is above amp.max_scale = 1024 (");
    write_cfg(path, sizeof path, "init.cfg",
              "amp = {\n  opt_level = \"O2\";\n  max_scale = 1024.0;\n};\n");
    expect_fail(path, NULL, 0, at(path, 3),
                "amp.max_scale: 1024 is below amp.init_scale = 65536 (default)");
    const char *low[] = {"amp.init_scale=2.0", "amp.min_scale=8.0"};
    expect_fail(path, low, 2, "--set amp.min_scale", "above amp.init_scale = 2 (--set amp.init_scale)");
    /* A static scale never starts at init_scale: only the floor and ceiling must agree. */
    write_cfg(path, sizeof path, "static.cfg", "amp = { opt_level = \"O0\"; max_scale = 1024.0; };\n");
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    mp_config_free(&c);

    write_cfg(path, sizeof path, "cosine.cfg",
              "optim = { lr = 0.01; };\nschedule = {\n  type = \"cosine\";\n  min_lr = 0.1;\n};\n");
    expect_fail(path, NULL, 0, at(path, 4), "schedule.min_lr: 0.1 is above optim.lr = 0.01 (");
    const char *linear[] = {"schedule.type=linear"};
    write_cfg(path, sizeof path, "linear.cfg", "schedule = {\n  min_lr = 0.5;\n};\n");
    expect_fail(path, linear, 1, at(path, 2), "above optim.lr = 0.1 (default)");
    mp_test_cfg_load_ok(&c, path, NULL, 0); /* constant: min_lr is not used */
    mp_config_free(&c);
}

static void test_preset_depth(void **state)
{
    (void)state;
    char path[1200];
    write_cfg(path, sizeof path, "deep.cfg", "model = {\n  preset = \"resnet20\";\n  depth = 998;\n};\n");
    expect_fail(path, NULL, 0, at(path, 3), "model.depth: resnet20 of depth 998 has 166 blocks "
                                            "per stage, 503 layers in all; a model holds at most "
                                            "64 layers (depth at most 116)");
    const char *wrn[] = {"model.preset=wrn"};
    expect_fail(path, wrn, 1, at(path, 3), "wrn needs depth = 6n + 4");
    const char *ok[] = {"model.depth=116"};
    mp_config c;
    mp_test_cfg_load_ok(&c, path, ok, 1);
    mp_config_free(&c);
}

/* A transformer preset's heads must divide its width: refused at model.heads, naming
 * model.dim, for the file's keys and for --set ones. */
static void test_preset_heads(void **state)
{
    (void)state;
    char path[1200], frag[1600];
    write_cfg(path, sizeof path, "heads.cfg",
              "model = {\n  preset = \"gpt\";\n  dim = 96;\n  heads = 5;\n};\n");
    snprintf(frag, sizeof frag, "model.heads: 5 heads do not divide the token width model.dim = "
             "96 (model.preset = \"gpt\", %s)", at(path, 2));
    expect_fail(path, NULL, 0, at(path, 4), frag);
    const char *vit[] = {"model.preset=vit", "model.heads=7"};
    expect_fail(path, vit, 2, "--set model.heads", "7 heads do not divide");
    const char *ok[] = {"model.heads=6"};
    mp_config c;
    mp_test_cfg_load_ok(&c, path, ok, 1);
    mp_config_free(&c);
}

/* amp.keep_batchnorm_fp32 is the older name of amp.keep_norm_fp32: either alone sets the norm
 * layers' policy, both may be given alike, and different values are refused at the alias with
 * one line naming both keys and their places. The resolved text (both keys) loads again. */
static void test_norm_alias(void **state)
{
    (void)state;
    char path[1200], frag[1600];
    mp_config c;
    write_cfg(path, sizeof path, "alias.cfg",
              "amp = {\n  opt_level = \"O3\";\n  keep_batchnorm_fp32 = true;\n};\n");
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    assert_true(c.amp.keep_norm_fp32);
    assert_int_equal(mp_train_amp_policy(&c).norm, MP_F32); /* O3's default would be fp16 */
    char again[1200];
    write_cfg(again, sizeof again, "alias_resolved.cfg", c.text);
    mp_config_free(&c);
    mp_test_cfg_load_ok(&c, again, NULL, 0);
    assert_true(c.amp.keep_norm_fp32 && c.amp.keep_batchnorm_fp32);
    mp_config_free(&c);

    const char *o2[] = {"amp.opt_level=O2", "amp.keep_batchnorm_fp32=false"};
    mp_test_cfg_load_ok(&c, NULL, o2, 2);
    assert_false(c.amp.keep_norm_fp32);
    assert_int_equal(mp_train_amp_policy(&c).norm, MP_F16);
    mp_config_free(&c);
    const char *both[] = {"amp.opt_level=O2", "amp.keep_norm_fp32=false",
                          "amp.keep_batchnorm_fp32=false"};
    mp_test_cfg_load_ok(&c, NULL, both, 3);
    assert_false(c.amp.keep_norm_fp32);
    mp_config_free(&c);
    const char *new_name[] = {"amp.opt_level=O2", "amp.keep_norm_fp32=false"};
    mp_test_cfg_load_ok(&c, NULL, new_name, 2);
    assert_false(c.amp.keep_batchnorm_fp32); /* the alias follows */
    mp_config_free(&c);

    write_cfg(path, sizeof path, "alias_clash.cfg",
              "amp = {\n  keep_norm_fp32 = false;\n\n  keep_batchnorm_fp32 = true;\n};\n");
    snprintf(frag, sizeof frag, "amp.keep_batchnorm_fp32: true contradicts amp.keep_norm_fp32 = "
             "false (%s), of which it is the older name", at(path, 2));
    expect_fail(path, NULL, 0, at(path, 4), frag);
    const char *clash[] = {"amp.keep_norm_fp32=true", "amp.keep_batchnorm_fp32=false"};
    expect_fail(NULL, clash, 2, "--set amp.keep_batchnorm_fp32",
                "false contradicts amp.keep_norm_fp32 = true (--set amp.keep_norm_fp32)");
}

static void test_places(void **state)
{
    (void)state;
    char path[1200], inc[1200], want[1400];
    write_cfg(inc, sizeof inc, "layers_inc.cfg",
              "model = {\n  layers = (\n    { type = \"flatten\"; },\n"
              "    { type = \"linear\"; out = 10; }\n  );\n};\n");
    write_cfg(path, sizeof path, "layers_main.cfg", "optim = { lr = 0.2; };\n@include \"layers_inc.cfg\"\n");
    mp_config c;
    mp_test_cfg_load_ok(&c, path, NULL, 0);
    snprintf(want, sizeof want, "%s:4: model.layers.[1]", inc);
    assert_non_null(mp_config_where(&c, "model.layers.[1]"));
    assert_string_equal(mp_config_where(&c, "model.layers.[1]"), want);
    snprintf(want, sizeof want, "%s:1: optim.lr", path);
    assert_string_equal(mp_config_where(&c, "optim.lr"), want);
    assert_null(mp_config_where(&c, "data.batch_size"));
    mp_config_free(&c);
}

/* The binary: exit status 2 and exactly one line "mpdist: error: FILE:LINE: ..." where
 * libconfig's scanner used to print "input in flex scanner failed" and exit; model-building
 * errors name the model.layers group's line. */
static void run_expect(const char *args, const char *want)
{
    const char *bin = getenv("MPDIST");
    if (!bin)
        skip();
    char cmd[3000], out[4096];
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=detect_leaks=0 %s %s --dry-run", bin, args);
    int rc = mp_test_run(cmd, out, sizeof out);
    const char *line = strstr(out, "mpdist: error: ");
    const char *end = line ? strchr(line, '\n') : NULL;
    if (rc != 2 || !line || !end || !strstr(line, want) || strstr(line, want) > end ||
        strstr(end, "mpdist: error") || strstr(out, "flex"))
        fail_msg("`%s`: exit %d, output \"%s\"; want exit 2 and one error line with \"%s\"", cmd,
                 rc, out, want);
}

static void test_binary(void **state)
{
    (void)state;
    char path[1200], want[1400], text[1400];
    write_cfg(path, sizeof path, "bin_empty.cfg", "@include \"\"\n");
    snprintf(want, sizeof want, "%s:1: @include \"\": empty file name", path);
    run_expect(path, want);
    snprintf(text, sizeof text, "@include \"%s\"\n", g_dir);
    write_cfg(path, sizeof path, "bin_dir.cfg", text);
    snprintf(want, sizeof want, "%s:1: @include", path);
    run_expect(path, want);
    run_expect("/proc/self/mem", "/proc/self/mem: cannot read");

    write_cfg(path, sizeof path, "bin_layers.cfg",
              "data = { format = \"synthetic\"; synthetic_train = 64; synthetic_test = 64; };\n"
              "model = {\n  layers = (\n    { type = \"flatten\"; },\n"
              "    { type = \"conv2d\"; out = 8; kernel = 3; },\n"
              "    { type = \"linear\"; out = 10; }\n  );\n};\n");
    snprintf(want, sizeof want, "%s:5: model.layers.[1]: layer layers.1: conv2d", path);
    run_expect(path, want);
    write_cfg(path, sizeof path, "bin_last.cfg",
              "data = { format = \"synthetic\"; synthetic_train = 64; synthetic_test = 64; };\n"
              "model = {\n  layers = (\n    { type = \"flatten\"; },\n"
              "    { type = \"linear\"; out = 10; }\n  );\n};\n");
    snprintf(want, sizeof want, "%s:5: model.layers.[1]: model: the last layer", path);
    snprintf(text, sizeof text, "%s --set data.num_classes=7", path);
    run_expect(text, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_include_errors),   cmocka_unit_test(test_proc_self_mem),
        cmocka_unit_test(test_include_paths),    cmocka_unit_test(test_nul_and_unclosed),
        cmocka_unit_test(test_wide_integers),    cmocka_unit_test(test_contradictions),
        cmocka_unit_test(test_preset_depth),     cmocka_unit_test(test_preset_heads),
        cmocka_unit_test(test_norm_alias),       cmocka_unit_test(test_places),
        cmocka_unit_test(test_binary),
    };
    return cmocka_run_group_tests(tests, setup_dir, NULL);
}
