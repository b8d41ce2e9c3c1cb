/* Text corpora for byte-level language models (data.format = "text"). The files are listed
 * first (a directory walked recursively, each directory's entries in strcmp order, regular files
 * only, so that fortune's ".u8" symbolic links to the same files are not read twice), their
 * sizes summed and the two splits sized from that sum, checked against memory and allocated;
 * the files are then streamed through a small buffer straight into the splits, so the corpus is
 * never held twice. A file must still have the size it was listed with. Every failure leaves
 * both datasets zeroed with nothing allocated. */
#include "io/dataset.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/alloc.h"
#include "io/ckpt_dir.h"
#include "io/fsutil.h"
#include "io/memcheck.h"

#define MP_TEXT_MAX_DEPTH 32   /* directories nested deeper than this are refused */
#define MP_TEXT_MAX_CONTEXT 4096
#define MP_TEXT_CHUNK (1 << 16) /* bytes read at a time */

typedef struct text_file {
    char *path; /* malloc'd */
    int64_t size;
} text_file;

typedef struct text_list {
    text_file *files;
    int n, cap;
    int64_t total;
} text_list;

static void list_free(text_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->files[i].path);
    free(l->files);
    memset(l, 0, sizeof *l);
}

static mp_status list_add(text_list *l, const char *path, int64_t size)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        text_file *f = realloc(l->files, (size_t)cap * sizeof *f);
        if (!f)
            return mp_fail(MP_EDATA, "%s: out of memory listing the text files", path);
        l->files = f;
        l->cap = cap;
    }
    if (size > INT64_MAX - l->total)
        return mp_fail(MP_EDATA, "%s: the text files' sizes overflow 64 bits", path);
    l->files[l->n].path = strdup(path);
    if (!l->files[l->n].path)
        return mp_fail(MP_EDATA, "%s: out of memory listing the text files", path);
    l->files[l->n].size = size;
    l->n++;
    l->total += size;
    return MP_OK;
}

/* Whether a directory entry's name is read as text: not hidden, not a fortune index, not a
 * checkpoint (a checkpoint.dir inside data.path would otherwise become training text). */
static bool text_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && !(n >= 4 && strcmp(name + n - 4, ".dat") == 0) &&
           mp_ckpt_name_step(name) < 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory `dir` that text_name accepts, sorted by strcmp, in a malloc'd array of
 * malloc'd strings (*names, *count). */
static mp_status dir_names(const char *dir, char ***names, int *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return mp_fail(MP_EDATA, "%s: %s", dir, strerror(errno));
    char **v = NULL;
    int n = 0, cap = 0;
    mp_status st = MP_OK;
    struct dirent *e;
    errno = 0;
    while (st == MP_OK && (e = readdir(d)) != NULL) {
        if (!text_name(e->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **g = realloc(v, (size_t)cap * sizeof *g);
            if (!g) {
                st = mp_fail(MP_EDATA, "%s: out of memory listing the directory", dir);
                break;
            }
            v = g;
        }
        v[n] = strdup(e->d_name);
        if (!v[n])
            st = mp_fail(MP_EDATA, "%s: out of memory listing the directory", dir);
        else
            n++;
        errno = 0;
    }
    if (st == MP_OK && errno != 0)
        st = mp_fail(MP_EDATA, "%s: %s", dir, strerror(errno));
    closedir(d);
    if (st != MP_OK) {
        for (int i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return st;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, name_cmp);
    *names = v;
    *count = n;
    return MP_OK;
}

/* Appends the regular files under directory `dir` to l, in the order described above. */
static mp_status walk(text_list *l, const char *dir, int depth)
{
    if (depth > MP_TEXT_MAX_DEPTH)
        return mp_fail(MP_EDATA, "%s: directories nested more than %d deep", dir,
                       MP_TEXT_MAX_DEPTH);
    char **names;
    int n;
    MP_TRY(dir_names(dir, &names, &n));
    mp_status st = MP_OK;
    for (int i = 0; i < n && st == MP_OK; i++) {
        char path[4096];
        int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (len < 0 || (size_t)len >= sizeof path)
            st = mp_fail(MP_EDATA, "%s/%s: path too long", dir, names[i]);
        else if (lstat(path, &sb) != 0)
            st = mp_fail(MP_EDATA, "%s: %s", path, strerror(errno));
        else if (S_ISDIR(sb.st_mode))
            st = walk(l, path, depth + 1);
        else if (S_ISREG(sb.st_mode))
            st = list_add(l, path, (int64_t)sb.st_size);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return st;
}

/* The files of `path` (a regular file, or a directory walked recursively). */
static mp_status list_files(text_list *l, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return mp_fail(MP_EDATA, "%s: no such file or directory", path);
        return mp_fail(MP_EDATA, "%s: %s", path, strerror(errno));
    }
    if (S_ISREG(sb.st_mode))
        return list_add(l, path, (int64_t)sb.st_size);
    if (!S_ISDIR(sb.st_mode))
        return mp_fail(MP_EDATA, "%s: neither a regular file nor a directory", path);
    MP_TRY(walk(l, path, 0));
    if (l->n == 0)
        return mp_fail(MP_EDATA, "%s: no text files in the directory (regular files, not hidden, "
                                 "not *.dat)", path);
    return MP_OK;
}

/* Where the corpus's bytes go: [0, train_keep) to train, [val_start, val_start + val_keep) to
 * test; the rest is read past. */
typedef struct text_dest {
    uint8_t *train, *test;
    int64_t train_keep, val_start, val_keep;
} text_dest;

/* Copies bytes buf[0..n), which are the corpus's bytes [pos, pos + n), to where they go. */
static void scatter(const text_dest *d, int64_t pos, const uint8_t *buf, int64_t n)
{
    int64_t lo = pos, hi = pos + n < d->train_keep ? pos + n : d->train_keep;
    if (lo < hi)
        memcpy(d->train + lo, buf, (size_t)(hi - lo));
    int64_t vend = d->val_start + d->val_keep;
    lo = pos > d->val_start ? pos : d->val_start;
    hi = pos + n < vend ? pos + n : vend;
    if (lo < hi)
        memcpy(d->test + (lo - d->val_start), buf + (lo - pos), (size_t)(hi - lo));
}

/* Streams the listed files, each exactly its listed size, through `scatter`, stopping once
 * every kept byte is in place. */
static mp_status read_files(const text_list *l, const text_dest *d)
{
    uint8_t *buf = malloc(MP_TEXT_CHUNK);
    if (!buf)
        return mp_fail(MP_EDATA, "%s: out of memory reading", l->files[0].path);
    int64_t pos = 0, need = d->val_start + d->val_keep;
    mp_status st = MP_OK;
    for (int i = 0; i < l->n && st == MP_OK && pos < need; i++) {
        const text_file *f = &l->files[i];
        const char *why;
        FILE *fp = mp_fopen_regular(f->path, &why);
        if (!fp) {
            st = mp_fail(MP_EDATA, "%s: %s", f->path, why);
            break;
        }
        int64_t done = 0;
        while (done < f->size && pos < need) {
            int64_t want = f->size - done < MP_TEXT_CHUNK ? f->size - done : MP_TEXT_CHUNK;
            size_t got = fread(buf, 1, (size_t)want, fp);
            if (got != (size_t)want) {
                if (ferror(fp))
                    st = mp_fail(MP_EDATA, "%s: read error: %s", f->path, strerror(errno));
                else
                    st = mp_fail(MP_EDATA, "%s: truncated: listed with %lld bytes, read %lld "
                                           "(the file changed while the corpus was read)",
                                 f->path, (long long)f->size, (long long)(done + (int64_t)got));
                break;
            }
            scatter(d, pos, buf, (int64_t)got);
            done += (int64_t)got;
            pos += (int64_t)got;
        }
        fclose(fp);
    }
    free(buf);
    return st;
}

static mp_status text_load(mp_dataset *train, mp_dataset *test, text_list *l, const char *path,
                           int T, double val_fraction, int64_t train_limit, int64_t test_limit)
{
    MP_TRY(list_files(l, path));
    int64_t total = l->total;
    if (total == 0)
        return mp_fail(MP_EDATA, "%s: no text: %d file%s, all empty", path, l->n,
                       l->n == 1 ? "" : "s");
    int64_t val_len = (int64_t)floor((double)total * val_fraction);
    int64_t train_len = total - val_len;
    int64_t ntrain = train_len / T - 1, ntest = val_len > 0 ? (val_len - 1) / T : 0;
    if (ntrain < 1 || ntest < 1)
        return mp_fail(MP_EDATA,
                       "%s: %lld bytes of text are too few for windows of data.context = %d "
                       "bytes: the training split (%lld bytes) needs at least %lld and the "
                       "validation split (%lld bytes, data.val_fraction = %g) at least %lld",
                       path, (long long)total, T, (long long)train_len, 2 * (long long)T,
                       (long long)val_len, val_fraction, (long long)T + 1);
    if (train_limit > 0 && train_limit < ntrain)
        ntrain = train_limit;
    if (test_limit > 0 && test_limit < ntest)
        ntest = test_limit;
    text_dest d = {.train_keep = (ntrain + 1) * T, .val_start = train_len,
                   .val_keep = ntest * T + 1};
    char what[200];
    snprintf(what, sizeof what, "%lld + %lld bytes of text (%lld training and %lld validation "
                                "windows of %d bytes)",
             (long long)d.train_keep, (long long)d.val_keep, (long long)ntrain,
             (long long)ntest, T);
    int64_t bytes[1] = {d.train_keep + d.val_keep};
    MP_TRY(mp_data_mem_check(path, what, 1, bytes, NULL));
    d.train = mp_alloc((size_t)d.train_keep, MP_MEM_DATA);
    d.test = mp_alloc((size_t)d.val_keep, MP_MEM_DATA);
    *train = (mp_dataset){.count = ntrain, .h = 1, .w = T, .c = 1, .num_classes = 256,
                          .text = d.train, .text_len = d.train_keep, .text_shift = true};
    *test = (mp_dataset){.count = ntest, .h = 1, .w = T, .c = 1, .num_classes = 256,
                         .text = d.test, .text_len = d.val_keep, .text_shift = false};
    return read_files(l, &d);
}

mp_status mp_text_load(mp_dataset *train, mp_dataset *test, const char *path, int context,
                       double val_fraction, int64_t train_limit, int64_t test_limit)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!path || !*path)
        return mp_fail(MP_EUSAGE, "text data: no path");
    if (context < 2 || context > MP_TEXT_MAX_CONTEXT)
        return mp_fail(MP_EUSAGE, "text data: context %d: expected 2..%d", context,
                       MP_TEXT_MAX_CONTEXT);
    if (!(val_fraction > 0.0 && val_fraction < 1.0))
        return mp_fail(MP_EUSAGE, "text data: val_fraction %g: expected a value in (0, 1)",
                       val_fraction);
    text_list l = {0};
    mp_status st = text_load(train, test, &l, path, context, val_fraction, train_limit,
                             test_limit);
    list_free(&l);
    if (st != MP_OK) {
        mp_dataset_free(train);
        mp_dataset_free(test);
    }
    return st;
}

int mp_dataset_label_len(const mp_dataset *d)
{
    return d->text || d->tokens ? d->w : 1;
}

void mp_text_batch(const mp_dataset *d, const int64_t *idx, int64_t n, uint64_t seed,
                   int64_t epoch, mp_dtype dt, void *x, int32_t *y)
{
    double table[256]; /* the 256 byte values in dt; double is the widest and most aligned */
    size_t es = mp_dtype_size(dt), T = (size_t)d->w;
    for (int v = 0; v < 256; v++)
        mp_store(table, dt, (size_t)v, (double)v);
    int64_t off = mp_text_offset(d, seed, epoch);
    unsigned char *out = x;
    for (int64_t i = 0; i < n; i++) {
        assert(idx[i] >= 0 && idx[i] < d->count);
        int64_t start = idx[i] * d->w + off;
        assert(start + d->w < d->text_len);
        const uint8_t *src = d->text + start;
        unsigned char *dst = out + (size_t)i * T * es;
        int32_t *lab = y + (size_t)i * T;
        for (size_t k = 0; k < T; k++) {
            memcpy(dst + k * es, (const unsigned char *)table + (size_t)src[k] * es, es);
            lab[k] = src[k + 1];
        }
    }
}
