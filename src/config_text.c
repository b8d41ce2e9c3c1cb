/* The resolved configuration as libconfig text: every group of the schema, every key with its
 * effective value (defaults included), written so that mp_config_load reads it back to the
 * same mp_config (floats in their shortest round-trip form, 64-bit ints with an L suffix,
 * strings escaped). With model.layers, the preset keys are left out (they would conflict);
 * data.mean and data.std not given where the format brings per-channel values are a comment
 * with those values (a number there would apply to every channel). */
#include "src/config_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/config_schema.h"

typedef struct text_buf {
    char *p;
    size_t len, cap;
    bool oom;
} text_buf;

static void tb_printf(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_printf(text_buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        b->oom = true;
        return;
    }
    if (b->len + (size_t)need + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + (size_t)need + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)need;
}

/* A string literal in libconfig syntax: \" \\ \n \r \t \f escaped, other controls as \xHH. */
static void tb_string(text_buf *b, const char *s)
{
    tb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': tb_printf(b, "\\\""); break;
        case '\\': tb_printf(b, "\\\\"); break;
        case '\n': tb_printf(b, "\\n"); break;
        case '\r': tb_printf(b, "\\r"); break;
        case '\t': tb_printf(b, "\\t"); break;
        case '\f': tb_printf(b, "\\f"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                tb_printf(b, "\\x%02x", *p);
            else
                tb_printf(b, "%c", *p);
        }
    }
    tb_printf(b, "\"");
}

/* An integer; beyond 32 bits libconfig 1.5 needs the L suffix. */
static void tb_int(text_buf *b, int64_t v)
{
    tb_printf(b, "%" PRId64 "%s", v, (v < INT32_MIN || v > INT32_MAX) ? "L" : "");
}

/* The shortest %g form that reads back to exactly v, always with a '.' or an exponent. */
static void tb_float(text_buf *b, double v)
{
    char s[40];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            break;
    }
    /* Enough precision for every integer digit, so that 30 prints as 30.0, not 3e+01. */
    int digits = 1;
    for (double a = v < 0 ? -v : v; a >= 10 && digits <= 17; a /= 10)
        digits++;
    if (digits > prec && digits <= 17)
        prec = digits;
    snprintf(s, sizeof s, "%.*g", prec, v);
    tb_printf(b, "%s%s", s, strpbrk(s, ".eE") ? "" : ".0");
}

static int64_t field_int(const void *base, const mp_key *k, size_t i)
{
    int64_t v;
    memcpy(&v, (const char *)base + k->offset + i * sizeof v, sizeof v);
    return v;
}

static int field_count(const void *base, const mp_key *k)
{
    int n;
    memcpy(&n, (const char *)base + k->count_offset, sizeof n);
    return n;
}

static void tb_layers(text_buf *b, const mp_config *c)
{
    tb_printf(b, "  # model.preset is \"custom\": these layers replace the preset model\n");
    tb_printf(b, "  layers = (\n");
    for (int i = 0; i < c->model.nlayers; i++) {
        const mp_layer_spec *l = &c->model.layers[i];
        tb_printf(b, "    { type = ");
        tb_string(b, l->type);
        tb_printf(b, ";");
        for (int k = 0; k < mp_layer_nkeys; k++) {
            const mp_key *lk = &mp_layer_keys[k];
            if (strcmp(lk->path, "type") == 0 || strcmp(lk->path, "name") == 0 ||
                !mp_layer_key_rule(l->type, lk->path))
                continue;
            const char *f = (const char *)l + lk->offset;
            tb_printf(b, " %s = ", lk->path);
            if (lk->type == MP_KEY_INT) {
                int64_t v;
                memcpy(&v, f, sizeof v);
                tb_int(b, v);
            } else if (lk->type == MP_KEY_FLOAT) {
                double v;
                memcpy(&v, f, sizeof v);
                tb_float(b, v);
            } else if (lk->type == MP_KEY_STRING) {
                tb_string(b, f);
            } else {
                bool v;
                memcpy(&v, f, sizeof v);
                tb_printf(b, "%s", v ? "true" : "false");
            }
            tb_printf(b, ";");
        }
        if (l->name[0]) {
            tb_printf(b, " name = ");
            tb_string(b, l->name);
            tb_printf(b, ";");
        }
        tb_printf(b, " }%s\n", i + 1 < c->model.nlayers ? "," : "");
    }
    tb_printf(b, "  );\n");
}

static void tb_key(text_buf *b, const mp_config *c, const mp_key *k)
{
    const char *field = (const char *)c + k->offset;
    if (k->type == MP_KEY_LAYERS) {
        if (c->model.nlayers > 0)
            tb_layers(b, c);
        return;
    }
    if ((k->flags & MP_KEY_PRESET) && c->model.nlayers > 0)
        return;
    const char *dot = strchr(k->path, '.');
    double norm[2][3];
    bool is_mean = strcmp(k->path, "data.mean") == 0;
    if ((is_mean || strcmp(k->path, "data.std") == 0) && !mp_config_given(c, k->path) &&
        mp_config_channel_norm(c, norm[0], norm[1])) { /* left out: read back, still not given */
        const double *v = norm[is_mean ? 0 : 1];
        tb_printf(b, "  # %s: not given, so data.format \"%s\"'s per channel: [", dot + 1,
                  c->data.format);
        for (int i = 0; i < 3; i++) {
            tb_printf(b, "%s", i ? ", " : "");
            tb_float(b, v[i]);
        }
        tb_printf(b, "]\n");
        return;
    }
    tb_printf(b, "  %s = ", dot ? dot + 1 : k->path);
    switch (k->type) {
    case MP_KEY_INT: tb_int(b, field_int(c, k, 0)); break;
    case MP_KEY_FLOAT: {
        double v;
        memcpy(&v, field, sizeof v);
        tb_float(b, v);
        break;
    }
    case MP_KEY_BOOL: {
        bool v;
        memcpy(&v, field, sizeof v);
        tb_printf(b, "%s", v ? "true" : "false");
        break;
    }
    case MP_KEY_STRING: tb_string(b, field); break;
    case MP_KEY_SCALE: {
        double v;
        memcpy(&v, field, sizeof v);
        if (v == 0.0)
            tb_printf(b, "\"%s\"", k->word);
        else
            tb_float(b, v);
        break;
    }
    case MP_KEY_INT_ARRAY:
        tb_printf(b, "[");
        for (int i = 0; i < field_count(c, k); i++) {
            tb_printf(b, "%s", i ? ", " : "");
            tb_int(b, field_int(c, k, (size_t)i));
        }
        tb_printf(b, "]");
        break;
    case MP_KEY_LAYERS: break;
    }
    tb_printf(b, ";\n");
}

mp_status mp_config_text_build(const mp_config *c, char **out)
{
    text_buf b = {0};
    *out = NULL;
    tb_printf(&b, "# mpdist resolved configuration: every key with its effective value.\n");
    for (int g = 0; g < mp_config_ngroups; g++) {
        const char *group = mp_config_groups[g];
        size_t n = strlen(group);
        tb_printf(&b, "%s = {\n", group);
        for (int i = 0; i < mp_config_nkeys; i++)
            if (strncmp(mp_config_keys[i].path, group, n) == 0 &&
                mp_config_keys[i].path[n] == '.')
                tb_key(&b, c, &mp_config_keys[i]);
        tb_printf(&b, "};\n");
    }
    if (b.oom) {
        free(b.p);
        return mp_fail(MP_EINTERNAL, "config: out of memory");
    }
    *out = b.p;
    return MP_OK;
}
