/* model.attention for the gpt and vit presets (src/config_rules.c, mp_config_preset_specs): the
 * default "auto" builds the (T, T) path on CUDA, whose tiled kernel was 9.6x slower on an H200
 * (2026-11-30), and the tiled one elsewhere; "flash" and "matrix" hold on both backends. */
#include "tests/util/test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "src/config.h"

/* The attention of a one-block gpt's transformer layer (its third) built from model.attention
 * (NULL: not given) for a model on CUDA or not. */
static const char *gpt_attention(const char *setting, bool cuda)
{
    static char got[8];
    char path[1200], text[200];
    snprintf(path, sizeof path, "%s/attn.cfg", mp_test_dir("test_config_attention"));
    snprintf(text, sizeof text, "model = { preset = \"gpt\"; depth = 1;%s%s%s };\n",
             setting ? " attention = \"" : "", setting ? setting : "", setting ? "\";" : "");
    mp_test_write_file(path, text, strlen(text), 0);
    mp_config c;
    if (mp_config_load(&c, path, NULL, 0) != MP_OK)
        fail_msg("mp_config_load: %s", mp_error_message());
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n = mp_config_preset_specs(&c, cuda, specs);
    assert_true(n > 2);
    assert_string_equal(specs[2].type, "transformer");
    snprintf(got, sizeof got, "%s", specs[2].attention);
    mp_config_free(&c);
    return got;
}

static void test_attention_auto(void **state)
{
    (void)state;
    assert_string_equal(gpt_attention(NULL, false), "flash");
    assert_string_equal(gpt_attention(NULL, true), "matrix");
    assert_string_equal(gpt_attention("auto", false), "flash");
    assert_string_equal(gpt_attention("flash", true), "flash");
    assert_string_equal(gpt_attention("matrix", false), "matrix");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
