/* Internals shared by the src/config*.c files that handle libconfig trees: --set overrides
 * (config_set.c), the resolved text (config_text.c) and one-line error messages. Not for use
 * outside the configuration code. */
#ifndef MP_CONFIG_INTERNAL_H
#define MP_CONFIG_INTERNAL_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>

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

/* A config file with its @includes expanded, as one text for config_read_string, and where
 * each of its lines came from. */
typedef struct mp_config_line {
    int file; /* index into files */
    int line; /* 1-based line in that file */
} mp_config_line;

typedef struct mp_config_src {
    char *text;            /* the combined text, NUL-terminated, no @include left */
    size_t len, cap;
    mp_config_line *lines; /* lines[k]: where line k + 1 of text came from */
    int nlines, lines_cap;
    char **files;          /* files[0]: the path as given; then each include as resolved */
    int nfiles;
    bool too_long;
    bool no_include;       /* a --set value: @include refused, messages without a line */
} mp_config_src;

/* Reads the config file at `path` and everything it @includes (config_source.c) into *s. Any
 * problem (unreadable, not a regular file, over 1 MiB, NUL byte or \x00 escape, unclosed
 * comment or string, a bad, missing, recursive or too deep @include) is MP_EUSAGE with one line
 * "FILE:LINE: ..." or "FILE: cannot read: ...". The caller frees *s with mp_config_src_free. */
mp_status mp_config_src_read(mp_config_src *s, const char *path);

/* Checks a --set value's text as mp_config_src_read checks a file (NUL, \\x00, unclosed comment
 * or string; no @include at all), with messages "NAME: ...". */
mp_status mp_config_src_check_text(const char *name, const char *text);

/* Writes "FILE:LINE" for line `line` of the combined text (clamped into range) into buf. */
void mp_config_src_where(const mp_config_src *s, int line, char *buf, size_t cap);

/* Frees what mp_config_src_read allocated (safe on a zeroed or failed *s). */
void mp_config_src_free(mp_config_src *s);

/* An integer literal that libconfig 1.5 would read wrongly: beyond 32 bits without an L suffix
 * (wrapped to 32 bits) or beyond 64 bits (with or without one). */
typedef struct mp_int_literal {
    size_t end;      /* offset just past its digits (where an L suffix would go) */
    int line;        /* 1-based line of the text */
    bool fits32;     /* libconfig reads it whole without a suffix */
    bool fits64;     /* an L suffix would read it whole */
    char key[256];   /* the setting it belongs to ("model.layers.[1].out"), or "?" */
    char text[64];   /* the literal as written, without suffix */
} mp_int_literal;

typedef mp_status (*mp_int_literal_fn)(void *ctx, const mp_int_literal *lit);

/* Scans libconfig text (skipping comments and strings) and calls fn for every integer literal
 * that libconfig 1.5 would read wrongly (with `all`: also every other one without an L suffix),
 * in text order, stopping at the first status fn returns other than MP_OK (which it returns). */
mp_status mp_config_scan_int_literals(const char *text, bool all, mp_int_literal_fn fn,
                                      void *ctx);

/* Checks the rules between keys of a filled configuration (config_rules.c): amp.min_scale <=
 * amp.init_scale (dynamic scale) <= amp.max_scale, schedule.min_lr <= optim.lr for cosine and
 * linear schedules, a preset's depth buildable. MP_EUSAGE naming both keys and their places. */
mp_status mp_config_check_rules(const mp_config *c);

/* Builds the resolved configuration of c in libconfig syntax (every key, defaults included)
 * into a malloc'ed string *out that mp_config_load reads back to the same values.
 * MP_EINTERNAL if out of memory. */
mp_status mp_config_text_build(const mp_config *c, char **out);

#endif
