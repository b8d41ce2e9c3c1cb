/* Reading a config file for libconfig without letting libconfig's scanner near the file
 * system: libconfig 1.5's flex scanner exits the process on a read error (an @include of ""
 * or of a directory, /proc/self/mem), prefixes absolute @include names with the include
 * directory, cuts strings at a NUL byte and drops the rest of a file after an unclosed comment.
 * So mpdist reads the files itself (regular files only, at most MP_CONFIG_MAX_BYTES each),
 * refuses NUL bytes, \x00 escapes, unclosed comments, strings and @include names, expands
 * @include in place (names relative to the including file's directory, absolute names as they
 * are; missing, empty-named, non-regular, recursive or too deeply nested includes refused) and
 * hands libconfig one combined text. Each line of that text maps back to the file and line it
 * came from, so every message names where the user wrote it. The lexer follows libconfig's
 * scanner rules exactly: @include counts only at the start of a line outside comments and
 * strings (`^[ \t]*@include[ \t]+"`), comments are `#`, `//` to the end of the line and
 * `/ * ... * /`, strings take the escapes \n \r \t \f \\ \" \xHH. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/config_internal.h"

#define MP_CONFIG_MAX_BYTES (1 << 20)
#define MP_CONFIG_MAX_LINES 65535 /* libconfig keeps a setting's line in an unsigned short */
#define MP_CONFIG_MAX_DEPTH 10    /* libconfig's own limit on nested includes */

/* The files being expanded, innermost last: an @include of one of them is a cycle. */
typedef struct open_files {
    dev_t dev[MP_CONFIG_MAX_DEPTH + 1];
    ino_t ino[MP_CONFIG_MAX_DEPTH + 1];
    int n;
} open_files;

/* Reads the regular file at path into a malloc'ed, NUL-terminated buffer; NULL with *why set
 * (an errno text or a reason) if it cannot. Opens without blocking, so a FIFO cannot stall. */
static char *slurp(const char *path, size_t *len, struct stat *sb, const char **why)
{
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return NULL;
    }
    char *buf = NULL;
    if (fstat(fd, sb) != 0)
        *why = strerror(errno);
    else if (S_ISDIR(sb->st_mode))
        *why = strerror(EISDIR);
    else if (!S_ISREG(sb->st_mode))
        *why = "not a regular file";
    else if (!(buf = malloc(MP_CONFIG_MAX_BYTES + 2)))
        *why = "out of memory";
    size_t n = 0;
    while (buf && n <= MP_CONFIG_MAX_BYTES) {
        ssize_t got = read(fd, buf + n, MP_CONFIG_MAX_BYTES + 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *why = strerror(errno);
            free(buf);
            buf = NULL;
        } else if (got == 0) {
            break;
        }
        n += got > 0 ? (size_t)got : 0;
    }
    close(fd);
    if (buf && n > MP_CONFIG_MAX_BYTES) {
        *why = "larger than 1 MiB: not a config file";
        free(buf);
        buf = NULL;
    }
    if (buf) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

/* Appends one byte of (file, line) to the combined text, starting a line-map entry at the
 * start of each combined line. false when out of memory or past the limits. */
static bool put(mp_config_src *s, char c, int file, int line)
{
    if (s->len + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        char *t = realloc(s->text, cap);
        if (!t)
            return false;
        s->text = t;
        s->cap = cap;
    }
    if (s->len == 0 || s->text[s->len - 1] == '\n') {
        if (s->nlines == MP_CONFIG_MAX_LINES || s->len >= 4u * MP_CONFIG_MAX_BYTES) {
            s->too_long = true;
            return false;
        }
        if (s->nlines == s->lines_cap) {
            int cap = s->lines_cap ? s->lines_cap * 2 : 256;
            mp_config_line *l = realloc(s->lines, (size_t)cap * sizeof *l);
            if (!l)
                return false;
            s->lines = l;
            s->lines_cap = cap;
        }
        s->lines[s->nlines].file = file;
        s->lines[s->nlines].line = line;
        s->nlines++;
    }
    s->text[s->len++] = c;
    s->text[s->len] = '\0';
    return true;
}

static mp_status put_failed(const mp_config_src *s, int file)
{
    if (s->too_long)
        return mp_config_fail("%s: too long with its @includes (more than %d lines or %d MiB)",
                              s->files[0], MP_CONFIG_MAX_LINES, 4 * MP_CONFIG_MAX_BYTES >> 20);
    return mp_fail(MP_EINTERNAL, "%s: out of memory reading the config", s->files[file]);
}

/* Registers the display name of a file; its index, or -1 if out of memory. */
static int add_file(mp_config_src *s, const char *name)
{
    char **f = realloc(s->files, (size_t)(s->nfiles + 1) * sizeof *f);
    if (!f)
        return -1;
    s->files = f;
    if (!(f[s->nfiles] = strdup(name)))
        return -1;
    return s->nfiles++;
}

static mp_status expand(mp_config_src *s, const char *text, size_t len, int file,
                        open_files *open);

/* Reads the @include name that starts after the opening quote at text[*i] (line `line` of
 * file), resolves it, reads the file and expands it into s; *i ends after the closing quote. */
static mp_status include(mp_config_src *s, const char *text, size_t len, size_t *i, int file,
                         int line, open_files *open)
{
    const char *at = s->files[file];
    char name[1024];
    size_t n = 0;
    for (;; (*i)++) {
        char c = *i < len ? text[*i] : '\n';
        if (c == '"')
            break;
        if (c == '\n' || c == '\0')
            return mp_config_fail("%s:%d: @include: the file name's closing '\"' is missing",
                                  at, line);
        if (c == '\\') {
            c = *i + 1 < len ? text[*i + 1] : '\0';
            if (c != '\\' && c != '"')
                return mp_config_fail("%s:%d: @include: only \\\\ and \\\" may be escaped in a "
                                      "file name",
                                      at, line);
            (*i)++;
        }
        if (n + 1 >= sizeof name)
            return mp_config_fail("%s:%d: @include: file name too long", at, line);
        name[n++] = c;
    }
    (*i)++;
    name[n] = '\0';
    if (n == 0)
        return mp_config_fail("%s:%d: @include \"\": empty file name", at, line);
    char path[2048];
    const char *slash = strrchr(at, '/');
    if (name[0] == '/' || !slash)
        snprintf(path, sizeof path, "%s", name);
    else
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - at), at, name);
    if (open->n > MP_CONFIG_MAX_DEPTH)
        return mp_config_fail("%s:%d: @include \"%s\": includes nested more than %d deep", at,
                              line, name, MP_CONFIG_MAX_DEPTH);
    size_t flen = 0;
    struct stat sb;
    const char *why = NULL;
    char *body = slurp(path, &flen, &sb, &why);
    if (!body)
        return mp_config_fail("%s:%d: @include \"%s\": cannot read %s: %s", at, line, name, path,
                              why);
    for (int k = 0; k < open->n; k++)
        if (open->dev[k] == sb.st_dev && open->ino[k] == sb.st_ino) {
            free(body);
            return mp_config_fail("%s:%d: @include \"%s\": %s includes itself", at, line, name,
                                  path);
        }
    int inc = add_file(s, path);
    mp_status st = inc < 0 ? put_failed(s, file) : MP_OK;
    if (st == MP_OK) {
        open->dev[open->n] = sb.st_dev;
        open->ino[open->n] = sb.st_ino;
        open->n++;
        st = expand(s, body, flen, inc, open);
        open->n--;
    }
    free(body);
    /* The rest of the including line follows on a line of its own. */
    if (st == MP_OK && s->len > 0 && s->text[s->len - 1] != '\n' && !put(s, '\n', inc, 1))
        st = put_failed(s, file);
    return st;
}

/* Whether text[i] starts libconfig's include_open `[ \t]*@include[ \t]+"` (i at a line
 * start); *after is then just past the quote. A line starting with @include in any other way
 * is an error (libconfig would report garbage, or echo it to stdout). */
static int include_open(const char *text, size_t len, size_t i, size_t *after)
{
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    if (len - i < 8 || memcmp(text + i, "@include", 8) != 0)
        return 0;
    i += 8;
    size_t sp = i;
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    if (i == sp || i >= len || text[i] != '"')
        return -1;
    *after = i + 1;
    return 1;
}

static mp_status fail_line(const mp_config_src *s, int file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* MP_EUSAGE "FILE:LINE: message", or "NAME: message" for a --set value. */
static mp_status fail_line(const mp_config_src *s, int file, int line, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s->no_include)
        return mp_config_fail("%s: %s", s->files[file], msg);
    return mp_config_fail("%s:%d: %s", s->files[file], line, msg);
}

/* Copies text (file `file` of s) into the combined text, expanding @include lines. */
static mp_status expand(mp_config_src *s, const char *text, size_t len, int file,
                        open_files *open)
{
    enum { CODE, COMMENT, STRING } state = CODE;
    int line = 1, opened = 0;
    bool bol = true;
    size_t start = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0; /* a UTF-8 BOM */
    for (size_t i = start; i < len;) {
        char c = text[i];
        if (c == '\0')
            return fail_line(s, file, line, "NUL byte: a config file is text");
        if (state == CODE && bol) {
            size_t after = 0;
            int inc = include_open(text, len, i, &after);
            if (inc != 0 && s->no_include)
                return fail_line(s, file, line, "@include is for config files only");
            if (inc < 0)
                return fail_line(s, file, line, "@include: expected @include \"FILE\"");
            if (inc > 0) {
                i = after;
                MP_TRY(include(s, text, len, &i, file, line, open));
                bol = false;
                continue;
            }
        }
        size_t take = 1;
        if (state == CODE) {
            if (c == '#' || (c == '/' && i + 1 < len && text[i + 1] == '/')) {
                while (i + take < len && text[i + take] != '\n' && text[i + take] != '\0')
                    take++;
            } else if (c == '/' && i + 1 < len && text[i + 1] == '*') {
                state = COMMENT;
                opened = line;
                take = 2;
            } else if (c == '"') {
                state = STRING;
                opened = line;
            }
        } else if (state == COMMENT) {
            if (c == '*' && i + 1 < len && text[i + 1] == '/') {
                state = CODE;
                take = 2;
            }
        } else if (c == '"') {
            state = CODE;
        } else if (c == '\\' && i + 1 < len) {
            char e = text[i + 1];
            if (strchr("nrtf\\\"", e) != NULL)
                take = 2;
            else if ((e == 'x' || e == 'X') && i + 3 < len && text[i + 2] == '0' &&
                     text[i + 3] == '0')
                return fail_line(s, file, line, "\\x00 in a string: strings cannot hold NUL");
        }
        for (size_t k = 0; k < take; k++) {
            if (text[i + k] == '\0')
                return fail_line(s, file, line, "NUL byte: a config file is text");
            if (!put(s, text[i + k], file, line))
                return put_failed(s, file);
            if (text[i + k] == '\n')
                line++;
        }
        bol = text[i + take - 1] == '\n';
        i += take;
    }
    if (state == COMMENT)
        return fail_line(s, file, opened, "the /* comment that starts here is not closed");
    if (state == STRING)
        return fail_line(s, file, opened, "the string that starts here is not closed");
    return MP_OK;
}

mp_status mp_config_src_read(mp_config_src *s, const char *path)
{
    memset(s, 0, sizeof *s);
    size_t len = 0;
    struct stat sb;
    const char *why = NULL;
    char *body = slurp(path, &len, &sb, &why);
    if (!body)
        return mp_config_fail("%s: cannot read: %s", path, why);
    open_files open = {.dev = {sb.st_dev}, .ino = {sb.st_ino}, .n = 1};
    mp_status st = add_file(s, path) < 0 ? mp_fail(MP_EINTERNAL, "%s: out of memory", path)
                                         : expand(s, body, len, 0, &open);
    free(body);
    /* a last line without its newline ends with one: libconfig 1.5's # and // comments end
     * only at a newline, so a file whose last line is one was a syntax error */
    if (st == MP_OK && (!s->text || s->text[s->len - 1] != '\n') && !put(s, '\n', 0, 1))
        st = put_failed(s, 0);
    if (st != MP_OK)
        mp_config_src_free(s);
    return st;
}

mp_status mp_config_src_check_text(const char *name, const char *text)
{
    mp_config_src s;
    memset(&s, 0, sizeof s);
    s.no_include = true;
    open_files open = {.n = 0};
    mp_status st = add_file(&s, name) < 0 ? mp_fail(MP_EINTERNAL, "%s: out of memory", name)
                                          : expand(&s, text, strlen(text), 0, &open);
    mp_config_src_free(&s);
    return st;
}

void mp_config_src_where(const mp_config_src *s, int line, char *buf, size_t cap)
{
    if (!s || s->nlines == 0) {
        snprintf(buf, cap, "%s:%d", s && s->nfiles ? s->files[0] : "(none)", line);
        return;
    }
    int k = line < 1 ? 0 : line > s->nlines ? s->nlines - 1 : line - 1;
    snprintf(buf, cap, "%s:%d", s->files[s->lines[k].file], s->lines[k].line);
}

void mp_config_src_free(mp_config_src *s)
{
    free(s->text);
    free(s->lines);
    for (int i = 0; i < s->nfiles; i++)
        free(s->files[i]);
    free(s->files);
    memset(s, 0, sizeof *s);
}
