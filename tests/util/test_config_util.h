/* What the configuration tests share: loading a config that must fail, or must load. */
#ifndef MP_TEST_CONFIG_UTIL_H
#define MP_TEST_CONFIG_UTIL_H

#include "src/config.h"

/* Writes `text` to <dir>/<name> and returns the path in `path` (cap bytes). */
void mp_test_cfg_write(char *path, size_t cap, const char *dir, const char *name,
                       const char *text);

/* Loads `path` (NULL: defaults) with the --set arguments sets[0..nsets) and expects MP_EUSAGE
 * with a one-line message that starts with `prefix` and contains `fragment` (when not NULL);
 * also checks that nothing is left allocated. */
void mp_test_cfg_expect_fail(const char *path, const char *const *sets, int nsets,
                             const char *prefix, const char *fragment);

/* Loads `path` with sets[0..nsets) into *c and fails the test unless that succeeds. */
void mp_test_cfg_load_ok(mp_config *c, const char *path, const char *const *sets, int nsets);

#endif
