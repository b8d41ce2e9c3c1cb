/* configs/README.md's key table is the schema's own reference (mp_config_reference), so the
 * documentation cannot drift from what the parser accepts. Regenerate the table with
 * `build/tests/test_config_doc --print` when a key changes. */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config.h"

static char *read_all(FILE *f)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    return buf;
}

static void test_readme_table_matches_schema(void **state)
{
    (void)state;
    const char *src = getenv("MPDIST_SRC");
    assert_non_null(src);
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/README.md", src);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *doc = read_all(f);
    fclose(f);
    FILE *mem = tmpfile();
    mp_config_reference(mem);
    rewind(mem);
    char *ref = read_all(mem);
    fclose(mem);
    char *table = strstr(doc, "| key | type | default | meaning |");
    assert_non_null(table);
    if (strcmp(table, ref) != 0)
        fail_msg("configs/README.md's key table differs from the schema: regenerate it with "
                 "build/tests/test_config_doc --print");
    free(doc);
    free(ref);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--print") == 0) {
        mp_config_reference(stdout);
        return 0;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_readme_table_matches_schema)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
