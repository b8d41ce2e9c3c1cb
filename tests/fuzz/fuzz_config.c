/* Fuzz target: the config loader (mp_config_load: file reading, @include expansion, libconfig,
 * the integer guard, the schema, the rules between keys) with --set overrides. Input format,
 * line by line:
 *   the config file main.cfg, up to the first line that is a marker;
 *   "--file NAME": the lines up to the next marker are the file NAME (letters, digits, '.',
 *                  '_' and '-', at most 32 characters; an @include target);
 *   "--set":       every further non-empty line is one override "key.path=value" (at most
 *                  32).
 * Each input gets a fresh directory under /tmp holding main.cfg and its --file files, removed
 * afterwards, so @include "NAME" resolves there. The load must succeed or fail with MP_EUSAGE
 * and one non-empty line (MP_EINTERNAL only for memory, which the fuzzer's limits would show);
 * a loaded configuration's resolved text must load again to the same text. It must print
 * nothing, leak nothing and never exit. Anything else aborts, for the fuzzer to report. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/status.h"
#include "src/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FILES 16
#define MAX_SETS 32

typedef struct fuzz_dir {
    char path[64];
    char names[MAX_FILES + 2][40]; /* files written in it, to remove */
    int nnames;
} fuzz_dir;

/* Writes len bytes to dir/name and remembers the name; returns 0, or -1. */
static int put_file(fuzz_dir *d, const char *name, const uint8_t *bytes, size_t len)
{
    for (int i = 0; i < d->nnames; i++)
        if (strcmp(d->names[i], name) == 0)
            return -1;
    if (d->nnames == MAX_FILES + 2)
        return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", d->path, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    snprintf(d->names[d->nnames++], sizeof d->names[0], "%s", name);
    size_t put = len ? fwrite(bytes, 1, len, f) : 0;
    return fclose(f) == 0 && put == len ? 0 : -1;
}

static void remove_dir(const fuzz_dir *d)
{
    char path[128];
    for (int i = 0; i < d->nnames; i++) {
        snprintf(path, sizeof path, "%s/%s", d->path, d->names[i]);
        unlink(path);
    }
    rmdir(d->path);
}

/* A --file name: [A-Za-z0-9._-]{1,32}, not "." or "..". */
static int good_name(const uint8_t *p, size_t n)
{
    if (n < 1 || n > 32 || (n <= 2 && p[0] == '.' && p[n - 1] == '.'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
              (p[i] >= '0' && p[i] <= '9') || p[i] == '.' || p[i] == '_' || p[i] == '-'))
            return 0;
    return 1;
}

static void check_failure(mp_status st, mp_config *c)
{
    const char *msg = mp_error_message();
    if (st == MP_EINTERNAL)
        return;
    if (st != MP_EUSAGE || !msg[0] || strchr(msg, '\n') || c->text || c->places)
        abort();
}

/* The resolved text loads again, to the same text. */
static void check_round_trip(fuzz_dir *d, const mp_config *c)
{
    /* '+' is no --file name's: no clash */
    if (!c->text || put_file(d, "resolved+.cfg", (const uint8_t *)c->text, strlen(c->text)) != 0)
        abort();
    char path[128];
    snprintf(path, sizeof path, "%s/resolved+.cfg", d->path);
    mp_config again;
    mp_status st = mp_config_load(&again, path, NULL, 0);
    if (st == MP_EINTERNAL)
        return;
    if (st != MP_OK || strcmp(again.text, c->text) != 0)
        abort();
    mp_config_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_dir d;
    memset(&d, 0, sizeof d);
    snprintf(d.path, sizeof d.path, "/tmp/mpdist-fuzz-config-XXXXXX");
    if (!mkdtemp(d.path))
        return 0;
    char *copy = malloc(size + 1); /* the --set lines as C strings */
    if (!copy) {
        rmdir(d.path);
        return 0;
    }
    memcpy(copy, data, size);
    copy[size] = '\0';
    const char *sets[MAX_SETS];
    int nsets = 0, in_sets = 0, ok = 1;
    const char *file = "main.cfg";
    char name[40];
    size_t start = 0; /* of the current file's text */
    for (size_t i = 0; i <= size && ok;) {
        size_t end = i;
        while (end < size && data[end] != '\n')
            end++;
        size_t n = end - i;
        int is_set = n == 5 && memcmp(data + i, "--set", 5) == 0;
        int is_file = n > 7 && memcmp(data + i, "--file ", 7) == 0;
        if (in_sets) {
            copy[end < size ? end : size] = '\0';
            if (n > 0 && nsets < MAX_SETS && !memchr(data + i, '\0', n))
                sets[nsets++] = copy + i;
        } else if (is_set || is_file || end >= size) {
            size_t stop = is_set || is_file ? i : size;
            ok = put_file(&d, file, data + start, stop - start) == 0;
            in_sets = is_set;
            if (is_file) {
                ok = ok && good_name(data + i + 7, n - 7) && d.nnames < MAX_FILES;
                snprintf(name, sizeof name, "%.*s", (int)(n - 7), (const char *)data + i + 7);
                file = name;
            }
            start = end + 1;
        }
        i = end + 1;
    }
    if (ok) {
        char path[128];
        snprintf(path, sizeof path, "%s/main.cfg", d.path);
        mp_config c;
        mp_error_clear();
        mp_status st = mp_config_load(&c, path, sets, nsets);
        if (st == MP_OK)
            check_round_trip(&d, &c);
        else
            check_failure(st, &c);
        mp_config_free(&c);
    }
    free(copy);
    remove_dir(&d);
    return 0;
}
