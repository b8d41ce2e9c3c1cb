/* IDX (MNIST / Fashion-MNIST) loading and batch assembly. Files are read through io/gzfile.h,
 * which reads gzip and raw files alike, verifies every gzip member's CRC-32 and length trailer and
 * refuses what is not a regular file (a FIFO); NAME.gz is tried before NAME. The header's sizes
 * are never trusted for allocation: what they promise is first checked against memory
 * (io/memcheck.h), then pixels are read into a buffer that grows with the data actually present,
 * so a lying header fails as "truncated" or "needs N bytes" instead of asking for gigabytes. A
 * gzip file is always read to the end of its stream, even when `limit` keeps fewer samples, so
 * that every trailer is checked; a stream that ends before its trailer is truncated. A file must
 * hold exactly what its header announces: no more (raw bytes appended, a second gzip member), no
 * less. Every failure leaves *d zeroed with nothing allocated; only a fully verified dataset is
 * handed out, its arrays counted under MP_MEM_DATA. */
#include "io/dataset.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/alloc.h"
#include "io/fsutil.h"
#include "io/gzfile.h"
#include "io/memcheck.h"
#include "io/folder.h"
#include "io/h5data.h"
#include "io/tokens.h"

#define MP_IDX_IMAGES_MAGIC 0x00000803u
#define MP_IDX_LABELS_MAGIC 0x00000801u
#define MP_IDX_MAX_SIDE 4096u        /* rows and cols above this are not an image dataset */
#define MP_IDX_MAX_COUNT 0x7fffffffu /* sample indices must fit int32 consumers */
#define MP_IDX_FIRST_CHUNK (16u << 20)

typedef struct idx_file {
    mp_gzf *gz;
    char path[4096];
} idx_file;

/* Opens dir/name.gz, else dir/name. MP_EDATA naming both names when neither exists. */
static mp_status idx_open(idx_file *f, const char *dir, const char *name)
{
    char plain[4096];
    bool missing;
    snprintf(f->path, sizeof f->path, "%s/%s.gz", dir, name);
    snprintf(plain, sizeof plain, "%s/%s", dir, name);
    if (mp_gzf_open(&f->gz, f->path, &missing) == MP_OK || !missing)
        return f->gz ? MP_OK : MP_EDATA;
    snprintf(f->path, sizeof f->path, "%s", plain);
    if (mp_gzf_open(&f->gz, f->path, &missing) == MP_OK)
        return MP_OK;
    if (missing)
        return mp_fail(MP_EDATA, "%s.gz: no such file (nor %s)", plain, plain);
    return MP_EDATA;
}

static void idx_close(idx_file *f)
{
    mp_gzf_close(f->gz);
    f->gz = NULL;
}

/* Reads up to n bytes; returns how many arrived (fewer only at the end of the data), or -1
 * after MP_EDATA (a read error, a damaged or truncated gzip stream). */
static int64_t idx_read(idx_file *f, void *buf, size_t n) { return mp_gzf_read(f->gz, buf, n); }

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads `nwords` big-endian header words and checks the magic. */
static mp_status idx_header(idx_file *f, uint32_t magic, const char *kind, uint32_t *words,
                            int nwords)
{
    unsigned char raw[16];
    size_t want = 4u * (size_t)nwords;
    int64_t got = idx_read(f, raw, want);
    if (got < 0)
        return MP_EDATA;
    if (got >= 4 && be32(raw) != magic)
        return mp_fail(MP_EDATA, "%s: bad magic 0x%08x, expected 0x%08x (IDX %s)", f->path,
                       be32(raw), magic, kind);
    if ((size_t)got < want)
        return mp_fail(MP_EDATA, "%s: truncated: expected %zu bytes of header, got %lld",
                       f->path, want, (long long)got);
    for (int i = 0; i < nwords; i++)
        words[i] = be32(raw + 4 * i);
    return MP_OK;
}

/* Reads exactly `n` bytes of `what` into a fresh malloc'd buffer that grows with the data, so
 * a file shorter than its header claims costs only its real size. */
static mp_status idx_read_body(idx_file *f, size_t n, const char *what, unsigned char **out)
{
    *out = NULL;
    size_t cap = n < MP_IDX_FIRST_CHUNK ? n : MP_IDX_FIRST_CHUNK, have = 0;
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf)
        return mp_fail(MP_EDATA, "%s: out of memory reading %zu bytes", f->path, n);
    for (;;) {
        int64_t got = idx_read(f, buf + have, cap - have);
        if (got < 0) {
            free(buf);
            return MP_EDATA;
        }
        have += (size_t)got;
        if (have < cap || cap == n)
            break;
        size_t next = cap > n / 2 ? n : 2 * cap;
        unsigned char *grown = realloc(buf, next);
        if (!grown) {
            free(buf);
            return mp_fail(MP_EDATA, "%s: out of memory reading %zu bytes", f->path, n);
        }
        buf = grown;
        cap = next;
    }
    if (have < n) {
        free(buf);
        return mp_fail(MP_EDATA, "%s: truncated: expected %zu bytes of %s, got %zu", f->path, n,
                       what, have);
    }
    *out = buf;
    return MP_OK;
}

/* Checks that, after what was read, the file holds exactly the `left` more items of `per` bytes
 * that its header announces (`total` `items` in all): a gzip stream is read to its end so that
 * every member's trailer is checked, a raw file is measured. Bytes past the announced data (raw
 * bytes appended, a second gzip member) are refused, as torchvision refuses a size mismatch. */
static mp_status idx_check_rest(idx_file *f, int64_t left, size_t per, uint32_t total,
                                const char *items)
{
    int64_t rest;
    MP_TRY(mp_gzf_rest(f->gz, &rest));
    int64_t want = left * (int64_t)per;
    if (rest > want)
        return mp_fail(MP_EDATA, "%s: %lld byte%s more than the %u %s its header announces "
                       "(the file is longer than its header says)", f->path,
                       (long long)(rest - want), rest - want == 1 ? "" : "s", total, items);
    if (rest < want)
        return mp_fail(MP_EDATA, "%s: truncated: %lld byte%s short of the %u %s its header "
                       "announces", f->path, (long long)(want - rest),
                       want - rest == 1 ? "" : "s", total, items);
    return MP_OK;
}

/* The two headers disagree on the count: names a file whose size contradicts its own header
 * (when one does), else the mismatch. */
static mp_status idx_count_mismatch(idx_file *fi, idx_file *fl, const uint32_t ih[4],
                                    const uint32_t lh[2], const char *images)
{
    MP_TRY(idx_check_rest(fi, ih[1], (size_t)ih[2] * ih[3], ih[1], images));
    MP_TRY(idx_check_rest(fl, lh[1], 1, lh[1], "labels"));
    return mp_fail(MP_EDATA, "%s: count mismatch: %u labels, but %s has %u images", fl->path,
                   lh[1], fi->path, ih[1]);
}

static const char *split_prefix(const char *split)
{
    if (split && strcmp(split, "train") == 0)
        return "train";
    if (split && strcmp(split, "test") == 0)
        return "t10k";
    return NULL;
}

static mp_status idx_load(mp_dataset *d, idx_file *fi, idx_file *fl, const char *dir,
                          const char *split, int num_classes, int64_t limit, unsigned char **pix,
                          unsigned char **lab)
{
    const char *prefix = split_prefix(split);
    if (!prefix)
        return mp_fail(MP_EUSAGE, "data split \"%s\": expected \"train\" or \"test\"",
                       split ? split : "(null)");
    if (num_classes < 1 || num_classes > 256)
        return mp_fail(MP_EUSAGE, "num_classes %d: expected 1..256 for IDX labels", num_classes);
    MP_TRY(mp_check_dir(dir));

    char name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    MP_TRY(idx_open(fi, dir, name));
    uint32_t ih[4] = {0};
    MP_TRY(idx_header(fi, MP_IDX_IMAGES_MAGIC, "images", ih, 4));
    if (ih[1] == 0 || ih[1] > MP_IDX_MAX_COUNT || ih[2] == 0 || ih[2] > MP_IDX_MAX_SIDE ||
        ih[3] == 0 || ih[3] > MP_IDX_MAX_SIDE)
        return mp_fail(MP_EDATA, "%s: bad dimensions: %u images of %ux%u", fi->path, ih[1], ih[2],
                       ih[3]);

    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    MP_TRY(idx_open(fl, dir, name));
    uint32_t lh[2] = {0};
    MP_TRY(idx_header(fl, MP_IDX_LABELS_MAGIC, "labels", lh, 2));
    char images[64];
    snprintf(images, sizeof images, "images of %ux%u", ih[2], ih[3]);
    if (lh[1] != ih[1])
        return idx_count_mismatch(fi, fl, ih, lh, images);

    int64_t count = ih[1];
    if (limit > 0 && limit < count)
        count = limit;
    size_t per = (size_t)ih[2] * ih[3];
    /* At the peak: the pixel and label read buffers, the dataset's images and int32 labels. */
    char what[160];
    snprintf(what, sizeof what, "%lld images of %ux%u with labels (read, then kept)",
             (long long)count, ih[2], ih[3]);
    int64_t sizes[2] = {count, 2 * (int64_t)per + 1 + (int64_t)sizeof(int32_t)};
    MP_TRY(mp_data_mem_check(fi->path, what, 2, sizes, NULL));
    MP_TRY(idx_read_body(fi, (size_t)count * per, "pixels", pix));
    MP_TRY(idx_check_rest(fi, ih[1] - count, per, ih[1], images));
    MP_TRY(idx_read_body(fl, (size_t)count, "labels", lab));
    MP_TRY(idx_check_rest(fl, lh[1] - count, 1, lh[1], "labels"));
    for (int64_t i = 0; i < count; i++)
        if ((*lab)[i] >= num_classes)
            return mp_fail(MP_EDATA, "%s: label %u at index %lld is out of range [0, %d)",
                           fl->path, (*lab)[i], (long long)i, num_classes);

    d->images = mp_alloc((size_t)count * per, MP_MEM_DATA);
    memcpy(d->images, *pix, (size_t)count * per);
    d->labels = mp_alloc((size_t)count * sizeof(int32_t), MP_MEM_DATA);
    for (int64_t i = 0; i < count; i++)
        d->labels[i] = (*lab)[i];
    d->count = count;
    d->h = (int)ih[2];
    d->w = (int)ih[3];
    d->c = 1;
    d->num_classes = num_classes;
    return MP_OK;
}

mp_status mp_idx_load(mp_dataset *d, const char *dir, const char *split, int num_classes,
                      int64_t limit)
{
    memset(d, 0, sizeof *d);
    idx_file fi = {0}, fl = {0};
    unsigned char *pix = NULL, *lab = NULL;
    mp_status st = idx_load(d, &fi, &fl, dir, split, num_classes, limit, &pix, &lab);
    idx_close(&fi);
    idx_close(&fl);
    free(pix);
    free(lab);
    if (st != MP_OK)
        mp_dataset_free(d);
    return st;
}

void mp_dataset_free(mp_dataset *d)
{
    mp_free(d->images);
    mp_free(d->labels);
    mp_free(d->text);
    mp_tokens_free(d->tokens);
    mp_h5data_free(d->h5);
    mp_folder_free(d->folder);
    memset(d, 0, sizeof *d);
}

void mp_dataset_batch(const mp_dataset *d, const int64_t *idx, int64_t n, double mean,
                      double std, mp_dtype dt, void *x, int32_t *y)
{
    /* Each of the 256 pixel values is normalised in double and rounded once (by mp_store) into
     * a table; the batch is then gathered by copying table entries. */
    double table[256]; /* 256 elements of dt; double is the widest and most aligned dtype */
    size_t es = mp_dtype_size(dt);
    for (int p = 0; p < 256; p++)
        mp_store(table, dt, (size_t)p, ((double)p / 255.0 - mean) / std);
    size_t per = (size_t)d->h * (size_t)d->w * (size_t)d->c;
    unsigned char *out = x;
    for (int64_t i = 0; i < n; i++) {
        assert(idx[i] >= 0 && idx[i] < d->count);
        const uint8_t *src = d->images + (size_t)idx[i] * per;
        unsigned char *dst = out + (size_t)i * per * es;
        for (size_t k = 0; k < per; k++)
            memcpy(dst + k * es, (const unsigned char *)table + (size_t)src[k] * es, es);
        y[i] = d->labels[idx[i]];
    }
}
