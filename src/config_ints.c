/* Guards against libconfig 1.5's silent 32-bit wrap: finds the integer literals that do not fit
 * in 32 bits and have no L suffix (4294967396 reads back as 100, 0x100000020 as 32), and those
 * beyond 64 bits even with one, for the callers to refuse (files) or suffix (--set values). The
 * scanner knows just enough of the syntax to find the literals: it skips comments and strings
 * and keeps a stack of the enclosing groups and lists for the key name. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config_internal.h"

#define MP_SCAN_DEPTH 32

typedef struct scan_frame {
    char name[64];  /* the group's or list's key, or "[i]" for an unnamed element */
    int list;       /* inside ( ) or [ ]: elements are counted */
    int element;
} scan_frame;

typedef struct scan_state {
    scan_frame stack[MP_SCAN_DEPTH];
    int depth;
    char last[64];    /* the last identifier seen */
    char pending[64]; /* the key whose value comes next */
} scan_state;

static void key_path(const scan_state *s, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; i < s->depth; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", n ? "." : "", s->stack[i].name);
    }
    size_t n = strlen(buf);
    if (s->pending[0])
        snprintf(buf + n, cap - n, "%s%s", n ? "." : "", s->pending);
    else if (s->depth > 0 && s->stack[s->depth - 1].list)
        snprintf(buf + n, cap - n, ".[%d]", s->stack[s->depth - 1].element);
}

static void open_frame(scan_state *s, int list)
{
    if (s->depth >= MP_SCAN_DEPTH)
        return;
    scan_frame *f = &s->stack[s->depth];
    const scan_frame *up = s->depth ? &s->stack[s->depth - 1] : NULL;
    if (s->pending[0])
        snprintf(f->name, sizeof f->name, "%s", s->pending);
    else
        snprintf(f->name, sizeof f->name, "[%d]", up ? up->element : 0);
    f->list = list;
    f->element = 0;
    s->depth++;
    s->pending[0] = '\0';
}

/* Reads the number starting at text[*i], advances *i past it and calls fn if libconfig 1.5
 * would read it wrongly (or, with `all`, if it has no L suffix). */
static mp_status check_number(const char *text, size_t *i, int line, const scan_state *s,
                              bool all, mp_int_literal_fn fn, void *ctx)
{
    size_t start = *i, j = *i;
    if (text[j] == '+' || text[j] == '-')
        j++;
    bool hex = text[j] == '0' && (text[j + 1] == 'x' || text[j + 1] == 'X');
    size_t digits = hex ? j + 2 : j;
    size_t end = digits;
    while (hex ? isxdigit((unsigned char)text[end]) : isdigit((unsigned char)text[end]))
        end++;
    bool is_float = !hex && (text[end] == '.' || text[end] == 'e' || text[end] == 'E');
    size_t stop = end;
    while (isalnum((unsigned char)text[stop]) || text[stop] == '.' ||
           ((text[stop] == '+' || text[stop] == '-') &&
            (text[stop - 1] == 'e' || text[stop - 1] == 'E')))
        stop++;
    *i = stop;
    if (is_float || end == digits)
        return MP_OK;
    bool suffixed = text[end] == 'L';
    mp_int_literal lit = {.end = end, .line = line};
    int shown = end - start < sizeof lit.text - 4 ? (int)(end - start) : (int)sizeof lit.text - 4;
    snprintf(lit.text, sizeof lit.text, "%.*s%s", shown, text + start,
             shown < (int)(end - start) ? "..." : "");
    errno = 0;
    bool fits64, fits32;
    if (hex) {
        unsigned long long v = strtoull(text + start, NULL, 16);
        fits64 = errno == 0 && v <= 0x7fffffffffffffffULL;
        fits32 = fits64 && v <= 0x7fffffffULL;
    } else {
        long long v = strtoll(text + start, NULL, 10);
        fits64 = errno == 0;
        fits32 = fits64 && v >= -2147483648LL && v <= 2147483647LL;
    }
    if (fits64 && (suffixed || (fits32 && !all)))
        return MP_OK;
    lit.fits64 = fits64;
    lit.fits32 = fits32;
    key_path(s, lit.key, sizeof lit.key);
    if (!lit.key[0])
        snprintf(lit.key, sizeof lit.key, "?");
    return fn(ctx, &lit);
}

mp_status mp_config_scan_int_literals(const char *text, bool all, mp_int_literal_fn fn,
                                      void *ctx)
{
    scan_state s;
    memset(&s, 0, sizeof s);
    int line = 1;
    for (size_t i = 0; text[i];) {
        char c = text[i];
        if (c == '\n') {
            line++;
            i++;
        } else if (c == '#' || (c == '/' && text[i + 1] == '/')) {
            while (text[i] && text[i] != '\n')
                i++;
        } else if (c == '/' && text[i + 1] == '*') {
            for (i += 2; text[i] && !(text[i] == '*' && text[i + 1] == '/'); i++)
                line += text[i] == '\n';
            i += text[i] ? 2 : 0;
        } else if (c == '"') {
            for (i++; text[i] && text[i] != '"'; i++) {
                if (text[i] == '\\' && (text[i + 1] == '"' || text[i + 1] == '\\'))
                    i++;
                line += text[i] == '\n';
            }
            i += text[i] ? 1 : 0;
        } else if (isalpha((unsigned char)c) || c == '*') {
            size_t n = 0;
            while (isalnum((unsigned char)text[i]) || strchr("_-*", text[i]) != NULL) {
                if (n + 1 < sizeof s.last)
                    s.last[n++] = text[i];
                i++;
            }
            s.last[n] = '\0';
        } else if (c == '=' || c == ':') {
            snprintf(s.pending, sizeof s.pending, "%s", s.last);
            i++;
        } else if (c == '{' || c == '(' || c == '[') {
            open_frame(&s, c != '{');
            i++;
        } else if (c == '}' || c == ')' || c == ']') {
            if (s.depth > 0)
                s.depth--;
            s.pending[0] = '\0';
            i++;
        } else if (c == ',' || c == ';') {
            if (c == ',' && s.depth > 0 && s.stack[s.depth - 1].list)
                s.stack[s.depth - 1].element++;
            if (c == ';' || (s.depth > 0 && !s.stack[s.depth - 1].list))
                s.pending[0] = '\0';
            i++;
        } else if (c == '.' || isdigit((unsigned char)c) ||
                   ((c == '-' || c == '+') && isdigit((unsigned char)text[i + 1]))) {
            if (c == '.') { /* a float such as .4294967296: its digits are no integer */
                i++;
                while (isalnum((unsigned char)text[i]) || text[i] == '.' ||
                       ((text[i] == '+' || text[i] == '-') &&
                        (text[i - 1] == 'e' || text[i - 1] == 'E')))
                    i++;
            } else {
                MP_TRY(check_number(text, &i, line, &s, all, fn, ctx));
            }
        } else {
            i++;
        }
    }
    return MP_OK;
}
