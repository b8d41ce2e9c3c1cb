/* Internals shared by the src/config*.c files that handle libconfig trees: --set overrides
 * (config_set.c), the resolved text (config_text.c) and one-line error messages. Not for use
 * outside the configuration code. */
#ifndef MP_CONFIG_INTERNAL_H
#define MP_CONFIG_INTERNAL_H

#include <libconfig.h>

#include "src/config.h"

/* Records a printf-style MP_EUSAGE message, with every control character (newline, tab, ...)
 * replaced by '?' so it stays one line, and returns MP_EUSAGE. */
mp_status mp_config_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The name of a libconfig setting type as messages print it ("int", "float", "group", ...). */
const char *mp_config_type_name(int libconfig_type);

/* Applies one --set argument "key.path=value" to the tree of cfg before validation: the value
 * is read in libconfig syntax (a bare word or anything else that does not parse is a string),
 * missing groups on the path are created, an existing setting is replaced. Setting model.layers
 * removes model.preset/model.hidden from the tree and the reverse (the last one given wins).
 * Every setting it creates gets, as its libconfig hook, the override's key; *key_out receives
 * that malloc'ed key (or NULL) and the caller frees it after destroying cfg. MP_EUSAGE
 * "--set ARG: ..." for a malformed argument or a path through a non-group. */
mp_status mp_config_set_apply(config_t *cfg, const char *arg, char **key_out);

/* Scans the text of a config file that libconfig has parsed and fails (MP_EUSAGE,
 * "FILE:LINE: KEY: integer N does not fit in 32 bits ...") on the first integer literal beyond
 * 32 bits without an L suffix, which libconfig 1.5 would silently wrap. */
mp_status mp_config_check_int_literals(const char *text, const char *file);

/* Builds the resolved configuration of c in libconfig syntax (every key, defaults included)
 * into a malloc'ed string *out that mp_config_load reads back to the same values.
 * MP_EINTERNAL if out of memory. */
mp_status mp_config_text_build(const mp_config *c, char **out);

#endif
