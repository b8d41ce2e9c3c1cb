/* Loading the configuration: reads the libconfig file, applies the --set overrides
 * (config_set.c), fills mp_config with every key's default and then checks each setting of the
 * tree against the schema (config_schema.c), filling its field by offset. Errors come in file
 * order, one line each: "FILE:LINE: KEY: problem", or "--set KEY: problem" for a setting that
 * an override created (marked by its libconfig hook). */
#include "src/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "engine/amp.h"
#include "src/config_internal.h"
#include "src/config_schema.h"

/* Names the place of a setting in messages: the file and line it came from (through the line
 * map of the combined text libconfig read), or the --set that made it. */
typedef struct load_ctx {
    const char *file;          /* the path as the caller gave it */
    const mp_config_src *src;  /* the combined text's line map; NULL without a file */
    mp_config *c;              /* receives the places of the keys */
} load_ctx;

/* Writes the prefix of a message about setting s at `key` into buf: "FILE:LINE: KEY", or
 * "--set KEY" for a setting an override made (a group the override had to create on its path
 * is named by the override's key). */
static void where_of(const load_ctx *x, const config_setting_t *s, const char *key, char *buf,
                     size_t cap)
{
    const char *set_key = NULL;
    for (const config_setting_t *p = s; p && !set_key; p = config_setting_parent(p))
        set_key = config_setting_get_hook(p);
    if (set_key) {
        size_t n = strlen(set_key);
        bool inside = strncmp(key, set_key, n) == 0 && (key[n] == '\0' || key[n] == '.');
        snprintf(buf, cap, "--set %s", inside ? key : set_key);
        return;
    }
    char at[640];
    if (x->src)
        mp_config_src_where(x->src, (int)config_setting_source_line(s), at, sizeof at);
    else
        snprintf(at, sizeof at, "%s:%u", x->file, (unsigned)config_setting_source_line(s));
    snprintf(buf, cap, "%s: %s", at, key);
}

static mp_status fail_at(const load_ctx *x, const config_setting_t *s, const char *key,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static mp_status fail_at(const load_ctx *x, const config_setting_t *s, const char *key,
                         const char *fmt, ...)
{
    char msg[768], where[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    where_of(x, s, key, where, sizeof where);
    return mp_config_fail("%s: %s", where, msg);
}

/* Records where the key was given, for mp_config_where. */
static mp_status note_place(const load_ctx *x, const config_setting_t *s, const char *key)
{
    mp_config *c = x->c;
    if (!c)
        return MP_OK;
    char where[900];
    where_of(x, s, key, where, sizeof where);
    mp_config_place *p = realloc(c->places, (size_t)(c->nplaces + 1) * sizeof *p);
    if (!p)
        return mp_fail(MP_EINTERNAL, "config: out of memory");
    c->places = p;
    p[c->nplaces].key = strdup(key);
    p[c->nplaces].where = strdup(where);
    c->nplaces++;
    if (!p[c->nplaces - 1].key || !p[c->nplaces - 1].where)
        return mp_fail(MP_EINTERNAL, "config: out of memory");
    return MP_OK;
}

static mp_status wrong_type(const load_ctx *x, const config_setting_t *s, const char *key,
                            const char *expected)
{
    return fail_at(x, s, key, "wrong type: expected %s, got %s", expected,
                   mp_config_type_name(config_setting_type(s)));
}

static mp_status out_of_range(const load_ctx *x, const config_setting_t *s, const char *key,
                              const mp_key *k, const char *got)
{
    char rule[MP_KEY_RULE_MAX];
    mp_key_describe(k, rule, sizeof rule);
    return fail_at(x, s, key, "must be %s (got %s)", rule, got);
}

static mp_status get_int(const load_ctx *x, const mp_key *k, const config_setting_t *s,
                         const char *key, int64_t *v)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
        return wrong_type(x, s, key, "int");
    *v = config_setting_get_int64(s);
    if (!mp_key_in_range(k, (double)*v)) {
        char got[32];
        snprintf(got, sizeof got, "%lld", (long long)*v);
        return out_of_range(x, s, key, k, got);
    }
    return MP_OK;
}

static mp_status get_string(const load_ctx *x, const mp_key *k, const config_setting_t *s,
                            const char *key, char *field)
{
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return wrong_type(x, s, key, "string");
    const char *v = config_setting_get_string(s);
    size_t n = strlen(v);
    if ((k->flags & MP_KEY_NONEMPTY) && n == 0)
        return fail_at(x, s, key, "must not be empty");
    if (k->allowed[0]) {
        int i = 0;
        while (k->allowed[i] && strcmp(k->allowed[i], v) != 0)
            i++;
        if (!k->allowed[i]) {
            char got[80];
            snprintf(got, sizeof got, "\"%.60s\"%s", v, n > 60 ? "..." : "");
            return out_of_range(x, s, key, k, got);
        }
    }
    static const char ident[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.";
    if ((k->flags & MP_KEY_IDENT) && strspn(v, ident) != n)
        return fail_at(x, s, key, "may only hold letters, digits, '_' and '.' (got \"%.60s\")",
                       v);
    if (n >= k->size)
        return fail_at(x, s, key, "too long: at most %zu characters (got %zu)", k->size - 1, n);
    memset(field, 0, k->size);
    memcpy(field, v, n);
    return MP_OK;
}

static mp_status fill_layers(const load_ctx *x, const mp_key *k, const config_setting_t *s,
                             const char *key, char *field);

/* Checks setting s against key k and stores its value in the field of k inside `base`. */
static mp_status fill_key(const load_ctx *x, const mp_key *k, const config_setting_t *s,
                          const char *key, void *base)
{
    char *field = (char *)base + k->offset;
    int t = config_setting_type(s);
    switch (k->type) {
    case MP_KEY_INT: {
        int64_t v;
        MP_TRY(get_int(x, k, s, key, &v));
        memcpy(field, &v, sizeof v);
        return MP_OK;
    }
    case MP_KEY_FLOAT: {
        if (t != CONFIG_TYPE_FLOAT && t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return wrong_type(x, s, key, "float");
        double v = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                          : (double)config_setting_get_int64(s);
        if (!isfinite(v))
            return fail_at(x, s, key, "must be finite (got %g)", v);
        if (!mp_key_in_range(k, v)) {
            char got[32];
            snprintf(got, sizeof got, "%.10g", v);
            return out_of_range(x, s, key, k, got);
        }
        memcpy(field, &v, sizeof v);
        return MP_OK;
    }
    case MP_KEY_BOOL: {
        if (t != CONFIG_TYPE_BOOL)
            return wrong_type(x, s, key, "bool");
        bool v = config_setting_get_bool(s) != 0;
        memcpy(field, &v, sizeof v);
        return MP_OK;
    }
    case MP_KEY_STRING: return get_string(x, k, s, key, field);
    case MP_KEY_SCALE: {
        double v = 0.0;
        if (t == CONFIG_TYPE_STRING) {
            if (strcmp(config_setting_get_string(s), k->word) != 0)
                return fail_at(x, s, key, "must be \"%s\" or a number (got \"%s\")", k->word,
                               config_setting_get_string(s));
        } else if (t == CONFIG_TYPE_FLOAT || t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
            v = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                       : (double)config_setting_get_int64(s);
            if (!isfinite(v) || !mp_key_in_range(k, v)) {
                char got[32];
                snprintf(got, sizeof got, "%.10g", v);
                return out_of_range(x, s, key, k, got);
            }
        } else {
            char want[48];
            snprintf(want, sizeof want, "\"%s\" or float", k->word);
            return wrong_type(x, s, key, want);
        }
        memcpy(field, &v, sizeof v);
        return MP_OK;
    }
    case MP_KEY_INT_ARRAY: {
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            return wrong_type(x, s, key, "int array");
        int n = config_setting_length(s);
        if (n < 1 || n > k->max_count)
            return fail_at(x, s, key, "must have 1 to %d entries (got %d)", k->max_count, n);
        memset(field, 0, k->size);
        for (int i = 0; i < n; i++) {
            char ekey[160];
            snprintf(ekey, sizeof ekey, "%s.[%d]", key, i);
            int64_t v;
            MP_TRY(get_int(x, k, config_setting_get_elem(s, (unsigned)i), ekey, &v));
            memcpy(field + (size_t)i * sizeof v, &v, sizeof v);
        }
        memcpy((char *)base + k->count_offset, &n, sizeof n);
        return MP_OK;
    }
    case MP_KEY_LAYERS: {
        MP_TRY(fill_layers(x, k, s, key, field));
        int n = config_setting_length(s);
        memcpy((char *)base + k->count_offset, &n, sizeof n);
        return MP_OK;
    }
    }
    return mp_fail(MP_EINTERNAL, "config: key %s has no type", key);
}

/* Fills the defaults of `keys` (those that have one) into `base`. */
static mp_status fill_defaults(const mp_key *keys, int nkeys, void *base)
{
    load_ctx x = {"(schema default)", NULL, NULL};
    for (int i = 0; i < nkeys; i++) {
        if (!keys[i].def)
            continue;
        char src[160];
        snprintf(src, sizeof src, "v = %s;", keys[i].def);
        config_t d;
        config_init(&d);
        mp_status st = MP_EINTERNAL;
        if (config_read_string(&d, src))
            st = fill_key(&x, &keys[i], config_lookup(&d, "v"), keys[i].path, base);
        config_destroy(&d);
        if (st != MP_OK)
            return mp_fail(MP_EINTERNAL, "config schema: bad default %s for %s", keys[i].def,
                           keys[i].path);
    }
    return MP_OK;
}

static mp_status unknown_key(const load_ctx *x, const config_setting_t *s, const char *key,
                             const char *name, bool layer)
{
    const char *near = mp_config_suggest(name, layer);
    if (near)
        return fail_at(x, s, key, "unknown key (did you mean %s?)", near);
    return fail_at(x, s, key, "unknown key");
}

/* One entry of model.layers: a group of mp_layer_keys, with type required and out required
 * for linear and refused for relu. `field` is the entry's mp_layer_spec. */
static mp_status fill_layer(const load_ctx *x, const config_setting_t *e, const char *ekey,
                            char *field)
{
    char key[200];
    if (!config_setting_is_group(e))
        return wrong_type(x, e, ekey, "group");
    MP_TRY(fill_defaults(mp_layer_keys, mp_layer_nkeys, field));
    for (int i = 0; i < config_setting_length(e); i++) {
        const config_setting_t *m = config_setting_get_elem(e, (unsigned)i);
        const char *name = config_setting_name(m);
        snprintf(key, sizeof key, "%s.%s", ekey, name);
        const mp_key *lk = mp_layer_key_find(name);
        if (!lk)
            return unknown_key(x, m, key, name, true);
        MP_TRY(fill_key(x, lk, m, key, field));
    }
    mp_layer_spec *spec = (mp_layer_spec *)field;
    if (!config_setting_get_member(e, "type")) {
        char rule[MP_KEY_RULE_MAX];
        mp_key_describe(mp_layer_key_find("type"), rule, sizeof rule);
        snprintf(key, sizeof key, "%s.type", ekey);
        return fail_at(x, e, key, "missing: must be %s", rule);
    }
    for (int i = 0; i < mp_layer_nkeys; i++) {
        const char *name = mp_layer_keys[i].path;
        const config_setting_t *m = config_setting_get_member(e, name);
        int rule = mp_layer_key_rule(spec->type, name);
        snprintf(key, sizeof key, "%s.%s", ekey, name);
        if (rule == 2 && !m)
            return fail_at(x, e, key, "missing: required for %s layers", spec->type);
        if (rule == 0 && m)
            return fail_at(x, m, key, "not allowed for %s layers", spec->type);
    }
    return MP_OK;
}

static mp_status fill_layers(const load_ctx *x, const mp_key *k, const config_setting_t *s,
                             const char *key, char *field)
{
    if (config_setting_type(s) != CONFIG_TYPE_LIST)
        return wrong_type(x, s, key, mp_key_type_name(k->type));
    int n = config_setting_length(s);
    if (n < 1 || n > k->max_count)
        return fail_at(x, s, key, "must have 1 to %d layers (got %d)", k->max_count, n);
    memset(field, 0, k->size);
    size_t stride = k->size / (size_t)k->max_count;
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        char ekey[160];
        snprintf(ekey, sizeof ekey, "%s.[%d]", key, i);
        MP_TRY(note_place(x, e, ekey));
        MP_TRY(fill_layer(x, e, ekey, field + (size_t)i * stride));
        const mp_layer_spec *l = (const mp_layer_spec *)(field + (size_t)i * stride);
        for (int j = 0; l->name[0] && j < i; j++) {
            const mp_layer_spec *o = (const mp_layer_spec *)(field + (size_t)j * stride);
            if (strcmp(o->name, l->name) == 0) {
                char nkey[200];
                snprintf(nkey, sizeof nkey, "%s.name", ekey);
                const config_setting_t *ns = config_setting_get_member(e, "name");
                return fail_at(x, ns ? ns : e, nkey, "\"%s\" is already the name of %s.[%d]",
                               l->name, key, j);
            }
        }
    }
    return MP_OK;
}

/* Checks every setting of the tree against the schema, in file order, filling c. */
static mp_status check_tree(const load_ctx *x, const config_setting_t *root, mp_config *c)
{
    for (int i = 0; i < config_setting_length(root); i++) {
        const config_setting_t *g = config_setting_get_elem(root, (unsigned)i);
        const char *gname = config_setting_name(g);
        if (!mp_config_group_known(gname)) {
            if (!config_setting_is_group(g))
                return unknown_key(x, g, gname, gname, false);
            const char *near = mp_config_suggest(gname, false);
            if (near)
                return fail_at(x, g, gname, "unknown group (did you mean %s?)", near);
            return fail_at(x, g, gname,
                           "unknown group (groups: data, model, amp, optim, schedule, train, "
                           "comm, checkpoint, log)");
        }
        if (!config_setting_is_group(g))
            return wrong_type(x, g, gname, "group");
        for (int j = 0; j < config_setting_length(g); j++) {
            const config_setting_t *s = config_setting_get_elem(g, (unsigned)j);
            char key[160];
            snprintf(key, sizeof key, "%s.%s", gname, config_setting_name(s));
            const mp_key *k = mp_config_key_find(key);
            if (!k)
                return unknown_key(x, s, key, key, false);
            MP_TRY(note_place(x, s, key));
            MP_TRY(fill_key(x, k, s, key, c));
            size_t idx = (size_t)(k - mp_config_keys);
            c->given[idx / 64] |= 1ull << (idx % 64);
        }
    }
    return MP_OK;
}

/* The setting at a "group.name" schema path, or NULL. */
static const config_setting_t *find_key(const config_setting_t *root, const char *path)
{
    char group[32];
    const char *dot = strchr(path, '.');
    if (!dot || (size_t)(dot - path) >= sizeof group)
        return NULL;
    memcpy(group, path, (size_t)(dot - path));
    group[dot - path] = '\0';
    const config_setting_t *g = config_setting_get_member(root, group);
    return g && config_setting_is_group(g) ? config_setting_get_member(g, dot + 1) : NULL;
}

/* Rules between keys: model.layers excludes the preset keys; nesterov's PyTorch conditions. */
static mp_status cross_check(const load_ctx *x, const config_setting_t *root, mp_config *c)
{
    const config_setting_t *layers = find_key(root, "model.layers");
    if (layers) {
        for (int i = 0; i < mp_config_nkeys; i++) {
            const mp_key *k = &mp_config_keys[i];
            if ((k->flags & MP_KEY_PRESET) && find_key(root, k->path))
                return fail_at(x, layers, "model.layers",
                               "cannot be combined with %s: give one or the other", k->path);
        }
        snprintf(c->model.preset, sizeof c->model.preset, "custom");
        memset(c->model.hidden, 0, sizeof c->model.hidden);
        c->model.nhidden = 0;
    }
    if (c->optim.nesterov && !(c->optim.momentum > 0 && c->optim.dampening == 0)) {
        const config_setting_t *s = find_key(root, "optim.nesterov");
        const char *rule = "requires optim.momentum > 0 and optim.dampening = 0";
        if (!s)
            return mp_config_fail("optim.nesterov: %s", rule);
        return fail_at(x, s, "optim.nesterov", "%s (got momentum %g, dampening %g)", rule,
                       c->optim.momentum, c->optim.dampening);
    }
    return MP_OK;
}

/* Fills the amp properties the file did not give with the opt level's defaults, so the
 * resolved text shows what will run. */
static void resolve_amp(mp_config *c)
{
    mp_opt_level level = MP_O0;
    mp_dtype half = MP_F16;
    mp_opt_level_parse(c->amp.opt_level, &level);
    mp_dtype_parse(c->amp.half, &half);
    mp_amp_defaults d = mp_amp_level_defaults(level, half);
    if (!mp_config_given(c, "amp.keep_norm_fp32"))
        c->amp.keep_norm_fp32 = mp_config_given(c, "amp.keep_batchnorm_fp32")
                                    ? c->amp.keep_batchnorm_fp32
                                    : d.keep_batchnorm_fp32;
    if (!mp_config_given(c, "amp.keep_batchnorm_fp32")) /* given: mp_config_check_rules */
        c->amp.keep_batchnorm_fp32 = c->amp.keep_norm_fp32;
    if (!mp_config_given(c, "amp.master_weights"))
        c->amp.master_weights = d.master_weights;
    if (!mp_config_given(c, "amp.loss_scale"))
        c->amp.loss_scale = d.loss_scale;
}

/* Text data's own defaults for the keys the file did not give: the corpus of Debian's fortunes
 * package and the 256 byte values as classes. */
static void resolve_data(mp_config *c)
{
    if (strcmp(c->data.format, "text") != 0)
        return;
    if (!mp_config_given(c, "data.path"))
        snprintf(c->data.path, sizeof c->data.path, "%s", MP_TEXT_DEFAULT_PATH);
    if (!mp_config_given(c, "data.num_classes"))
        c->data.num_classes = 256;
}

/* Refuses the first integer literal of the combined text that libconfig would wrap, at the
 * file and line it came from. */
static mp_status refuse_literal(void *ctx, const mp_int_literal *lit)
{
    char at[640];
    mp_config_src_where(ctx, lit->line, at, sizeof at);
    if (!lit->fits64)
        return mp_config_fail("%s: %s: integer %s does not fit in 64 bits", at, lit->key,
                              lit->text);
    return mp_config_fail("%s: %s: integer %s does not fit in 32 bits (write %sL for a 64-bit "
                          "value)",
                          at, lit->key, lit->text, lit->text);
}

/* The setting name on line `line` (1-based) of text, into name (cap bytes), when the line
 * sets exactly one (a name, then = or :), else "": the name libconfig's "duplicate setting
 * name" is about, which it does not say. Names in strings or comments are not told apart: a
 * line with more than one candidate names none. */
static void line_name(const char *text, int line, char *name, size_t cap)
{
    name[0] = '\0';
    for (int l = 1; l < line && text; l++)
        text = (text = strchr(text, '\n')) ? text + 1 : NULL;
    int found = 0;
    for (const char *p = text; p && *p && *p != '\n';) {
        size_t n = 0;
        if (isalpha((unsigned char)*p) || *p == '*')
            while (p[n] && (isalnum((unsigned char)p[n]) || strchr("-_*", p[n])))
                n++;
        if (n == 0) {
            p++;
            continue;
        }
        const char *q = p + n + strspn(p + n, " \t");
        if ((*q == '=' || *q == ':') && found++ == 0 && n < cap) {
            memcpy(name, p, n);
            name[n] = '\0';
        }
        p += n;
    }
    if (found != 1)
        name[0] = '\0';
}

/* Reads the file and its @includes (config_source.c) and hands libconfig the combined text, so
 * its scanner never opens a file; messages name the file and line through src's line map. */
static mp_status read_file(config_t *cfg, const char *path, mp_config_src *src)
{
    MP_TRY(mp_config_src_read(src, path));
    if (!config_read_string(cfg, src->text)) {
        char at[640], name[64] = "";
        mp_config_src_where(src, config_error_line(cfg), at, sizeof at);
        const char *why = config_error_text(cfg);
        if (why && strcmp(why, "duplicate setting name") == 0)
            line_name(src->text, config_error_line(cfg), name, sizeof name);
        if (name[0])
            return mp_config_fail("%s: %s: given twice in its group (duplicate setting name)",
                                  at, name);
        return mp_config_fail("%s: %s", at, why);
    }
    return mp_config_scan_int_literals(src->text, false, refuse_literal, src);
}

/* `path` may be NULL: defaults and overrides only (messages then say "(none)" for the file). */
mp_status mp_config_load(mp_config *c, const char *path, const char *const *sets, int nsets)
{
    memset(c, 0, sizeof *c);
    if (path && strlen(path) >= sizeof c->path)
        return mp_config_fail("%.200s...: path too long (at most %zu characters)", path,
                              sizeof c->path - 1);
    if (path)
        memcpy(c->path, path, strlen(path) + 1);
    mp_config_src src;
    memset(&src, 0, sizeof src);
    load_ctx x = {path ? path : "(none)", path ? &src : NULL, c};
    char **keys = calloc((size_t)(nsets > 0 ? nsets : 0) + 1, sizeof *keys);
    if (!keys)
        return mp_fail(MP_EINTERNAL, "config: out of memory");
    config_t cfg;
    config_init(&cfg);
    mp_status st = path ? read_file(&cfg, path, &src) : MP_OK;
    for (int i = 0; st == MP_OK && i < nsets; i++)
        st = mp_config_set_apply(&cfg, sets[i], &keys[i]);
    if (st == MP_OK)
        st = fill_defaults(mp_config_keys, mp_config_nkeys, c);
    if (st == MP_OK)
        st = check_tree(&x, config_root_setting(&cfg), c);
    if (st == MP_OK)
        st = cross_check(&x, config_root_setting(&cfg), c);
    if (st == MP_OK) {
        resolve_amp(c);
        resolve_data(c);
    }
    if (st == MP_OK)
        st = mp_config_check_rules(c);
    if (st == MP_OK)
        st = mp_config_text_build(c, &c->text);
    config_destroy(&cfg);
    for (int i = 0; i < nsets; i++)
        free(keys[i]);
    free(keys);
    mp_config_src_free(&src);
    if (st != MP_OK)
        mp_config_free(c);
    return st;
}

void mp_config_print(const mp_config *c, FILE *out)
{
    if (c->text)
        fputs(c->text, out);
}

void mp_config_free(mp_config *c)
{
    free(c->text);
    c->text = NULL;
    for (int i = 0; i < c->nplaces; i++) {
        free(c->places[i].key);
        free(c->places[i].where);
    }
    free(c->places);
    c->places = NULL;
    c->nplaces = 0;
}
