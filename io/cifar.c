/* CIFAR-10 binary loading (the "binary version" of the dataset, cifar-10-batches-bin/).
 * Every file of the split is checked by size first (it must exist, be a regular file, be
 * non-empty and hold a whole number of 3073-byte records), so the image array is sized from
 * real file sizes, never from a guess, and that size is checked against memory
 * (io/memcheck.h) before anything is allocated. Records are then read in file order, each
 * converted from the file's planar CHW (R plane, G plane, B plane) to NHWC. Every failure leaves
 * *d zeroed with nothing allocated; only a fully verified dataset is handed out, counted under
 * MP_MEM_DATA. */
#include "io/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/alloc.h"
#include "io/fsutil.h"
#include "io/memcheck.h"

#define MP_CIFAR_SIDE 32
#define MP_CIFAR_PLANE (MP_CIFAR_SIDE * MP_CIFAR_SIDE) /* 1024 pixels per channel */
#define MP_CIFAR_PIXELS (3 * MP_CIFAR_PLANE)            /* 3072 bytes per image */
#define MP_CIFAR_RECORD (1 + MP_CIFAR_PIXELS)           /* 3073 bytes: label, R, G, B */
#define MP_CIFAR_CLASSES 10
#define MP_CIFAR_MAX_FILES 5

static const char *const cifar_train_files[] = {"data_batch_1.bin", "data_batch_2.bin",
                                                "data_batch_3.bin", "data_batch_4.bin",
                                                "data_batch_5.bin"};
static const char *const cifar_test_files[] = {"test_batch.bin"};

typedef struct cifar_file {
    char path[4096];
    int64_t records; /* whole records in the file */
} cifar_file;

/* The split's file names in reading order; returns their count, or 0 for an unknown split. */
static int cifar_split_files(const char *split, const char *const **names)
{
    if (split && strcmp(split, "train") == 0) {
        *names = cifar_train_files;
        return (int)(sizeof cifar_train_files / sizeof cifar_train_files[0]);
    }
    if (split && strcmp(split, "test") == 0) {
        *names = cifar_test_files;
        return 1;
    }
    return 0;
}

/* Fills f->path = dir/name and f->records from the file's size, checking the size is valid. */
static mp_status cifar_check_file(cifar_file *f, const char *dir, const char *name)
{
    snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    struct stat st;
    if (stat(f->path, &st) != 0) {
        if (errno == ENOENT)
            return mp_fail(MP_EDATA, "%s: no such file", f->path);
        return mp_fail(MP_EDATA, "%s: %s", f->path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return mp_fail(MP_EDATA, "%s: not a regular file", f->path);
    if (st.st_size == 0)
        return mp_fail(MP_EDATA, "%s: empty file", f->path);
    if (st.st_size % MP_CIFAR_RECORD != 0)
        return mp_fail(MP_EDATA,
                       "%s: truncated: %lld bytes is not a whole number of %d-byte records",
                       f->path, (long long)st.st_size, MP_CIFAR_RECORD);
    f->records = (int64_t)(st.st_size / MP_CIFAR_RECORD);
    return MP_OK;
}

/* Reads the first `take` records of f, converting each into images (take, 32, 32, 3) and
 * labels (take). */
static mp_status cifar_read_file(const cifar_file *f, int64_t take, uint8_t *images,
                                 int32_t *labels)
{
    const char *why;
    FILE *fp = mp_fopen_regular(f->path, &why);
    if (!fp)
        return mp_fail(MP_EDATA, "%s: %s", f->path, why);
    unsigned char rec[MP_CIFAR_RECORD];
    mp_status st = MP_OK;
    for (int64_t r = 0; r < take && st == MP_OK; r++) {
        size_t got = fread(rec, 1, sizeof rec, fp);
        if (got != sizeof rec) {
            if (ferror(fp))
                st = mp_fail(MP_EDATA, "%s: read error: %s", f->path, strerror(errno));
            else
                st = mp_fail(MP_EDATA, "%s: truncated: expected %lld bytes, got %lld", f->path,
                             (long long)(f->records * MP_CIFAR_RECORD),
                             (long long)(r * MP_CIFAR_RECORD + (int64_t)got));
            break;
        }
        if (rec[0] >= MP_CIFAR_CLASSES) {
            st = mp_fail(MP_EDATA, "%s: label %u at record %lld is out of range [0, %d)",
                         f->path, rec[0], (long long)r, MP_CIFAR_CLASSES);
            break;
        }
        labels[r] = rec[0];
        uint8_t *dst = images + (size_t)r * MP_CIFAR_PIXELS;
        for (int p = 0; p < MP_CIFAR_PLANE; p++)
            for (int ch = 0; ch < 3; ch++)
                dst[3 * p + ch] = rec[1 + ch * MP_CIFAR_PLANE + p];
    }
    fclose(fp);
    return st;
}

static mp_status cifar_load(mp_dataset *d, const char *dir, const char *split, int64_t limit)
{
    const char *const *names = NULL;
    int nfiles = cifar_split_files(split, &names);
    if (nfiles == 0)
        return mp_fail(MP_EUSAGE, "data split \"%s\": expected \"train\" or \"test\"",
                       split ? split : "(null)");
    MP_TRY(mp_check_dir(dir));

    cifar_file files[MP_CIFAR_MAX_FILES];
    int64_t total = 0;
    for (int i = 0; i < nfiles; i++) {
        MP_TRY(cifar_check_file(&files[i], dir, names[i]));
        total += files[i].records;
    }
    int64_t count = limit > 0 && limit < total ? limit : total;
    char what[160];
    snprintf(what, sizeof what, "%s split: %lld records of 32x32x3 images with labels", split,
             (long long)count);
    int64_t sizes[2] = {count, MP_CIFAR_PIXELS + (int64_t)sizeof(int32_t)};
    MP_TRY(mp_data_mem_check(dir, what, 2, sizes, NULL));

    d->images = mp_alloc((size_t)count * MP_CIFAR_PIXELS, MP_MEM_DATA);
    d->labels = mp_alloc((size_t)count * sizeof(int32_t), MP_MEM_DATA);
    int64_t done = 0;
    for (int i = 0; i < nfiles && done < count; i++) {
        int64_t take = files[i].records < count - done ? files[i].records : count - done;
        MP_TRY(cifar_read_file(&files[i], take, d->images + (size_t)done * MP_CIFAR_PIXELS,
                               d->labels + done));
        done += take;
    }
    d->count = count;
    d->h = MP_CIFAR_SIDE;
    d->w = MP_CIFAR_SIDE;
    d->c = 3;
    d->num_classes = MP_CIFAR_CLASSES;
    return MP_OK;
}

mp_status mp_cifar10_load(mp_dataset *d, const char *dir, const char *split, int64_t limit)
{
    memset(d, 0, sizeof *d);
    mp_status st = cifar_load(d, dir, split, limit);
    if (st != MP_OK)
        mp_dataset_free(d);
    return st;
}
