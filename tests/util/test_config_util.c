/* What the configuration tests share; see test_config_util.h. */
#include "tests/util/test_config_util.h"

#include "tests/util/test_util.h"

#include <stdio.h>
#include <string.h>

void mp_test_cfg_write(char *path, size_t cap, const char *dir, const char *name,
                       const char *text)
{
    snprintf(path, cap, "%s/%s", dir, name);
    mp_test_write_file(path, text, strlen(text), 0);
}

void mp_test_cfg_expect_fail(const char *path, const char *const *sets, int nsets,
                             const char *prefix, const char *fragment)
{
    mp_config c;
    mp_error_clear();
    mp_status st = mp_config_load(&c, path, sets, nsets);
    const char *msg = mp_error_message();
    if (st != MP_EUSAGE || strncmp(msg, prefix, strlen(prefix)) != 0 ||
        (fragment && !strstr(msg, fragment)) || strchr(msg, '\n'))
        fail_msg("status %d, message \"%s\"; want status %d, prefix \"%s\", fragment \"%s\"",
                 (int)st, msg, (int)MP_EUSAGE, prefix, fragment ? fragment : "");
    assert_null(c.text);
    mp_config_free(&c);
}

void mp_test_cfg_load_ok(mp_config *c, const char *path, const char *const *sets, int nsets)
{
    mp_status st = mp_config_load(c, path, sets, nsets);
    if (st != MP_OK)
        fail_msg("mp_config_load: status %d: %s", (int)st, mp_error_message());
    assert_non_null(c->text);
}
