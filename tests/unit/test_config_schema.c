/* The config schema (src/config_schema.c): every key in an accepted group, once, with a field of
 * its type's size, a meaning, and a line in the resolved text; rule texts that fit their
 * buffer; key lookup and suggestions; and the reference table built from the schema. */
#include "tests/util/test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config.h"
#include "src/config_schema.h"

static void test_schema_table(void **state)
{
    (void)state;
    mp_config c;
    if (mp_config_load(&c, NULL, NULL, 0) != MP_OK)
        fail_msg("mp_config_load: %s", mp_error_message());
    for (int i = 0; i < mp_config_nkeys; i++) {
        const mp_key *k = &mp_config_keys[i];
        const char *dot = strchr(k->path, '.');
        assert_non_null(dot);
        char group[32];
        snprintf(group, sizeof group, "%.*s", (int)(dot - k->path), k->path);
        if (!mp_config_group_known(group))
            fail_msg("%s: group %s is not accepted", k->path, group);
        for (int j = 0; j < i; j++)
            if (strcmp(mp_config_keys[j].path, k->path) == 0)
                fail_msg("%s appears twice", k->path);
        switch (k->type) {
        case MP_KEY_INT: assert_int_equal(k->size, sizeof(int64_t)); break;
        case MP_KEY_FLOAT:
        case MP_KEY_SCALE: assert_int_equal(k->size, sizeof(double)); break;
        case MP_KEY_BOOL: assert_int_equal(k->size, sizeof(bool)); break;
        case MP_KEY_STRING:
            for (int a = 0; k->allowed[a]; a++)
                assert_true(strlen(k->allowed[a]) < k->size);
            break;
        case MP_KEY_INT_ARRAY: assert_int_equal(k->size, k->max_count * sizeof(int64_t)); break;
        case MP_KEY_LAYERS: assert_int_equal(k->size, k->max_count * sizeof(mp_layer_spec)); break;
        }
        assert_true(k->meaning && k->meaning[0]);
        /* Every key with a value is in the resolved text under its group. */
        char line[96];
        snprintf(line, sizeof line, "\n  %s = ", dot + 1);
        if (k->type != MP_KEY_LAYERS && !strstr(c.text, line))
            fail_msg("%s is missing from the resolved text", k->path);
    }
    for (int i = 0; i < mp_config_nkeys + mp_layer_nkeys; i++) { /* no rule text is cut */
        char rule[MP_KEY_RULE_MAX];
        mp_key_describe(i < mp_config_nkeys ? &mp_config_keys[i]
                                            : &mp_layer_keys[i - mp_config_nkeys],
                        rule, sizeof rule);
        assert_true(strlen(rule) < sizeof rule - 1);
    }
    assert_non_null(mp_config_key_find("optim.lr"));
    assert_null(mp_config_key_find("optim"));
    assert_non_null(mp_config_key_find("checkpoint.dir"));
    assert_null(mp_config_key_find("checkpoint.folder"));
    assert_string_equal(mp_config_suggest("optim.lrr", false), "optim.lr");
    assert_string_equal(mp_config_suggest("batch_size", false), "data.batch_size");
    assert_string_equal(mp_config_suggest("tpye", true), "type");
    assert_null(mp_config_suggest("zzzzzzzz", false));
    mp_config_free(&c);
}

static void test_reference(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_non_null(mem);
    mp_config_reference(mem);
    fclose(mem);
    assert_non_null(strstr(buf, "| key | type | default | meaning |\n"));
    for (int i = 0; i < mp_config_nkeys; i++) {
        char row[160];
        snprintf(row, sizeof row, "| `%s` | %s | ", mp_config_keys[i].path,
                 mp_key_type_name(mp_config_keys[i].type));
        if (!strstr(buf, row))
            fail_msg("no reference row starts with %s", row);
    }
    assert_non_null(strstr(buf, "| `data.batch_size` | int | `64` |"));
    assert_non_null(strstr(buf, "| `model.layers.[N].out` | int |"));
    assert_non_null(strstr(buf, "| `checkpoint.resume` | string |"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_table),
        cmocka_unit_test(test_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
