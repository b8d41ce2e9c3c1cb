/* --set overrides: parses "key.path=value" (the value in libconfig syntax, else taken as a bare
 * string) and writes it into the loaded libconfig tree before validation, creating missing
 * groups. Each setting it creates carries the override's key as its libconfig hook, so that
 * validation can report "--set KEY: ..." instead of a file line. */
#include "src/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config_schema.h"

static char *trimmed_copy(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\0';
    }
    return r;
}

/* Dotted names, each a libconfig setting name: [A-Za-z*][-A-Za-z0-9_*]*. */
static bool valid_key(const char *key)
{
    const char *p = key;
    for (;;) {
        if (!isalpha((unsigned char)*p) && *p != '*')
            return false;
        while (isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '*')
            p++;
        if (*p == '\0')
            return true;
        if (*p++ != '.')
            return false;
    }
}

/* The text "v = VALUE;" being read, and the wide literals found in it so far. */
typedef struct suffix_ctx {
    const char *key; /* the override's key, for messages */
    size_t ends[1024]; /* offsets where an L suffix goes */
    int n;
} suffix_ctx;

/* libconfig 1.5 silently wraps integers beyond 32 bits (decimal or hex) unless they carry an
 * L suffix: a --set value's get one, wherever they are (an array, a list of groups), so that
 * they are read whole and range-checked; one beyond 64 bits is refused. */
static mp_status note_wide(void *ctx, const mp_int_literal *lit)
{
    suffix_ctx *x = ctx;
    if (!lit->fits64) {
        const char *inner = strncmp(lit->key, "v.", 2) == 0 ? lit->key + 1 : "";
        return mp_config_fail("--set %s%s: integer %s does not fit in 64 bits", x->key, inner,
                              lit->text);
    }
    if (x->n == (int)(sizeof x->ends / sizeof x->ends[0]))
        return mp_config_fail("--set %s: more than %d integers with one beyond 32 bits", x->key,
                              x->n);
    x->ends[x->n++] = lit->end;
    return MP_OK;
}

/* A copy of src with an L after each integer literal when one of them is beyond 32 bits, into
 * a malloc'ed *out (NULL when none is). */
static mp_status suffix_wide(const char *key, const char *src, char **out)
{
    *out = NULL;
    suffix_ctx x = {.key = key};
    MP_TRY(mp_config_scan_int_literals(src, false, note_wide, &x));
    if (x.n == 0)
        return MP_OK;
    /* Every integer then, as an array's elements must all have one type. */
    x.n = 0;
    MP_TRY(mp_config_scan_int_literals(src, true, note_wide, &x));
    size_t len = strlen(src);
    char *wide = malloc(len + (size_t)x.n + 1);
    if (!wide)
        return mp_fail(MP_EINTERNAL, "--set %s: out of memory", key);
    size_t from = 0, w = 0;
    for (int i = 0; i < x.n; i++) {
        memcpy(wide + w, src + from, x.ends[i] - from);
        w += x.ends[i] - from;
        wide[w++] = 'L';
        from = x.ends[i];
    }
    memcpy(wide + w, src + from, len - from + 1);
    *out = wide;
    return MP_OK;
}

/* Whether a line of text starts with libconfig's @include, which its scanner would follow. */
static bool has_include(const char *text)
{
    for (const char *p = text; p; p = strchr(p, '\n')) {
        p += *p == '\n';
        p += strspn(p, " \t");
        if (strncmp(p, "@include", 8) == 0)
            return true;
    }
    return false;
}

/* Why a text that is no libconfig value is no bare string either, or NULL for a bare word: it
 * opens a string, array, list or group whose quote or bracket a bare string would keep (a typo:
 * `"a"b"`, `[1, 2`), it is single-quoted, or it holds a double quote. why is libconfig's reason,
 * or NULL. */
static const char *not_bare(const char *text, const char *why, char *buf, size_t cap)
{
    const char *kind = text[0] == '"'   ? "a string"
                       : text[0] == '[' ? "an array"
                       : text[0] == '(' ? "a list"
                       : text[0] == '{' ? "a group"
                                        : NULL;
    if (kind)
        snprintf(buf, cap,
                 "it opens %s but is not one libconfig value (%s; a string that starts so is "
                 "written in double quotes, a quote inside it as \\\")",
                 kind, why ? why : "more than one value");
    else if (text[0] == '\'')
        snprintf(buf, cap, "libconfig strings are in double quotes, not single ones");
    else if (strchr(text, '"'))
        snprintf(buf, cap, "a double quote in a bare string (quote the whole value, a quote "
                           "inside it as \\\")");
    else
        return NULL;
    return buf;
}

/* Reads `text` as the value of a setting "v" into the fresh config tmp; if it is not exactly
 * one libconfig value, "v" becomes the string `text` itself, unless it cannot be a bare string
 * (not_bare). NULL with *st set for such a text, or a value that holds an @include, an unclosed
 * comment or string, or an integer beyond 64 bits. */
static const config_setting_t *parse_value(config_t *tmp, const char *key, const char *text,
                                           mp_status *st)
{
    char name[200];
    snprintf(name, sizeof name, "--set %s", key);
    *st = has_include(text) ? mp_config_fail("%s: @include is for config files only", name)
                            : MP_OK;
    size_t n = strlen(text) + 8; /* no ';' after it: one the value ends with, or a comment, */
                                 /* would take it (libconfig 1.5's terminator is optional) */
    char *src = *st == MP_OK ? malloc(n) : NULL;
    if (*st == MP_OK && !src)
        *st = mp_fail(MP_EINTERNAL, "%s: out of memory", name);
    if (*st != MP_OK)
        return NULL;
    snprintf(src, n, "v = %s\n", text);
    int ok = config_read_string(tmp, src);
    config_setting_t *root = config_root_setting(tmp);
    ok = ok && config_setting_length(root) == 1 && config_setting_get_member(root, "v");
    char *wide = NULL;
    if (ok) /* a value: no comment or string may swallow the rest, no integer may wrap */
        *st = mp_config_src_check_text(name, text);
    if (ok && *st == MP_OK)
        *st = suffix_wide(key, src, &wide);
    if (wide) {
        config_destroy(tmp);
        config_init(tmp);
        ok = config_read_string(tmp, wide);
        free(wide);
    }
    free(src);
    if (*st != MP_OK)
        return NULL;
    if (ok)
        return config_setting_get_member(config_root_setting(tmp), "v");
    char buf[320];
    const char *no = not_bare(text, config_error_text(tmp), buf, sizeof buf);
    if (no) {
        *st = mp_config_fail("%s: %s", name, no);
        return NULL;
    }
    config_destroy(tmp);
    config_init(tmp);
    config_setting_t *v = config_setting_add(config_root_setting(tmp), "v", CONFIG_TYPE_STRING);
    if (!v || !config_setting_set_string(v, text)) {
        *st = mp_fail(MP_EINTERNAL, "%s: out of memory", name);
        return NULL;
    }
    return v;
}

/* Adds a deep copy of src to parent under `name` (ignored inside lists and arrays). */
static config_setting_t *copy_setting(config_setting_t *parent, const char *name,
                                      const config_setting_t *src)
{
    int type = config_setting_type(src);
    config_setting_t *d = config_setting_add(parent, name, type);
    if (!d)
        return NULL;
    int ok = CONFIG_TRUE;
    switch (type) {
    case CONFIG_TYPE_INT: ok = config_setting_set_int(d, config_setting_get_int(src)); break;
    case CONFIG_TYPE_INT64: ok = config_setting_set_int64(d, config_setting_get_int64(src)); break;
    case CONFIG_TYPE_FLOAT: ok = config_setting_set_float(d, config_setting_get_float(src)); break;
    case CONFIG_TYPE_BOOL: ok = config_setting_set_bool(d, config_setting_get_bool(src)); break;
    case CONFIG_TYPE_STRING:
        ok = config_setting_set_string(d, config_setting_get_string(src));
        break;
    default:
        for (int i = 0; i < config_setting_length(src) && ok; i++) {
            const config_setting_t *e = config_setting_get_elem(src, (unsigned)i);
            ok = copy_setting(d, config_setting_name(e), e) != NULL;
        }
        break;
    }
    config_setting_set_format(d, config_setting_get_format(src));
    return ok ? d : NULL;
}

/* Removes the setting at a two-part schema path ("model.preset") if it is there. */
static void remove_key(config_t *cfg, const char *path)
{
    const char *dot = strchr(path, '.');
    char group[32];
    if (!dot || (size_t)(dot - path) >= sizeof group)
        return;
    memcpy(group, path, (size_t)(dot - path));
    group[dot - path] = '\0';
    config_setting_t *g = config_setting_get_member(config_root_setting(cfg), group);
    if (g && config_setting_is_group(g) && config_setting_get_member(g, dot + 1))
        config_setting_remove(g, dot + 1);
}

/* model.layers and the preset's parameters exclude each other: the override given last wins. */
static void drop_conflicts(config_t *cfg, const char *key)
{
    const mp_key *k = mp_config_key_find(key);
    if (!k)
        return;
    for (int i = 0; i < mp_config_nkeys; i++) {
        const mp_key *o = &mp_config_keys[i];
        if ((k->type == MP_KEY_LAYERS && (o->flags & MP_KEY_PRESET)) ||
            ((k->flags & MP_KEY_PRESET) && o->type == MP_KEY_LAYERS))
            remove_key(cfg, o->path);
    }
}

/* Writes the value setting `val` at `key` in cfg, creating groups on the way. */
static mp_status put_value(config_t *cfg, char *key, const config_setting_t *val)
{
    config_setting_t *parent = config_root_setting(cfg);
    char *name = key;
    for (char *dot; (dot = strchr(name, '.')) != NULL; name = dot + 1) {
        *dot = '\0';
        config_setting_t *m = config_setting_get_member(parent, name);
        if (!m) {
            m = config_setting_add(parent, name, CONFIG_TYPE_GROUP);
            if (m)
                config_setting_set_hook(m, key);
        }
        *dot = '.';
        if (!m)
            return mp_fail(MP_EINTERNAL, "--set %s: out of memory", key);
        if (!config_setting_is_group(m))
            return mp_config_fail("--set %s: cannot set: %.*s is a %s, not a group", key,
                                  (int)(dot - key), key,
                                  mp_config_type_name(config_setting_type(m)));
        parent = m;
    }
    if (config_setting_get_member(parent, name))
        config_setting_remove(parent, name);
    config_setting_t *d = copy_setting(parent, name, val);
    if (!d)
        return mp_fail(MP_EINTERNAL, "--set %s: cannot store the value", key);
    config_setting_set_hook(d, key);
    return MP_OK;
}

mp_status mp_config_set_apply(config_t *cfg, const char *arg, char **key_out)
{
    *key_out = NULL;
    const char *eq = strchr(arg, '=');
    char *key = trimmed_copy(arg, eq ? (size_t)(eq - arg) : strlen(arg));
    if (!key)
        return mp_fail(MP_EINTERNAL, "--set: out of memory");
    *key_out = key;
    if (!eq || !key[0])
        return mp_config_fail("--set %s: expected key.path=value", arg);
    if (!valid_key(key))
        return mp_config_fail("--set %s: not a key path (dot-separated names of letters, digits, "
                              "'_' and '-')",
                              key);
    char *text = trimmed_copy(eq + 1, strlen(eq + 1));
    if (!text)
        return mp_fail(MP_EINTERNAL, "--set %s: out of memory", key);
    config_t tmp;
    config_init(&tmp);
    mp_status st = MP_OK;
    const config_setting_t *val = parse_value(&tmp, key, text, &st);
    if (val)
        st = put_value(cfg, key, val);
    if (st == MP_OK)
        drop_conflicts(cfg, key);
    config_destroy(&tmp);
    free(text);
    return st;
}
