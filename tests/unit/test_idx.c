/* IDX loading: synthetic raw and gzip files with known contents, every error class (each must
 * be MP_EDATA with a message naming the file and the problem, and leave nothing allocated),
 * batch normalisation per dtype, and the real Fashion-MNIST test split. Issue 18: a header
 * promising more than memory is refused before reading; a gzip file without its trailer is
 * truncated (it used to load); every single-bit flip of a small .gz is refused or loads the
 * same data, and only where gzip stores nothing that reaches the data. A file holds exactly
 * what its header announces, no more (appended bytes or gzip members) and no less. */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "io/dataset.h"

#define N_IMG 5
#define ROWS 2
#define COLS 3
#define PER (ROWS * COLS)
#define FMNIST "/usr/share/datasets/fashion-mnist"

static uint8_t pixels[N_IMG * PER];
static const uint8_t labels[N_IMG] = {3, 0, 9, 1, 3};

static void fill_pixels(void)
{
    for (int i = 0; i < N_IMG * PER; i++)
        pixels[i] = (uint8_t)((i * 37 + 11) % 256);
    pixels[0] = 0;
    pixels[1] = 255;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Writes DIR/NAME[.gz] as a header of `nwords` words followed by `len` body bytes. */
static void write_idx(const char *dir, const char *name, const uint32_t *words, int nwords,
                      const uint8_t *body, size_t len, int gz)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
    size_t total = 4u * (size_t)nwords + len;
    uint8_t *buf = malloc(total ? total : 1);
    assert_non_null(buf);
    for (int i = 0; i < nwords; i++)
        put_be32(buf + 4 * i, words[i]);
    if (len)
        memcpy(buf + 4 * nwords, body, len);
    mp_test_write_file(path, buf, total, gz);
    free(buf);
}

static void write_images(const char *dir, const char *prefix, uint32_t magic, uint32_t n,
                         uint32_t rows, uint32_t cols, size_t len, int gz)
{
    char name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    uint32_t h[4] = {magic, n, rows, cols};
    write_idx(dir, name, h, 4, pixels, len, gz);
}

static void write_labels(const char *dir, const char *prefix, uint32_t magic, uint32_t n,
                         const uint8_t *lab, size_t len, int gz)
{
    char name[64];
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    uint32_t h[2] = {magic, n};
    write_idx(dir, name, h, 2, lab, len, gz);
}

/* A fresh directory holding a valid `prefix` pair. */
static void good_pair(char *dir, size_t cap, const char *test, const char *prefix, int gz)
{
    fill_pixels();
    snprintf(dir, cap, "%s", mp_test_dir(test));
    write_images(dir, prefix, 0x803, N_IMG, ROWS, COLS, sizeof pixels, gz);
    write_labels(dir, prefix, 0x801, N_IMG, labels, N_IMG, gz);
}

static void check_contents(const mp_dataset *d, int64_t n)
{
    assert_int_equal(d->count, n);
    assert_int_equal(d->h, ROWS);
    assert_int_equal(d->w, COLS);
    assert_int_equal(d->c, 1);
    assert_int_equal(d->num_classes, 10);
    assert_memory_equal(d->images, pixels, (size_t)n * PER);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(d->labels[i], labels[i]);
}

/* Reads a whole file into a malloc'd buffer. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

/* Loads and expects failure `code` with a message containing each of the given substrings;
 * *d must come back zeroed and nothing may stay allocated. */
static void expect_fail(const char *dir, const char *split, int num_classes, int64_t limit,
                        mp_status code, const char *s1, const char *s2, const char *s3)
{
    mp_dataset d;
    memset(&d, 0x5a, sizeof d);
    int64_t before = mp_mem_current(MP_MEM_DATA);
    mp_error_clear();
    const char *want[3] = {s1, s2, s3};
    mp_test_expect_load_fail(mp_idx_load(&d, dir, split, num_classes, limit), code, &d, before,
                             want, 3);
}

static void test_raw(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_raw", "train", 0);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 0), MP_OK);
    check_contents(&d, N_IMG);
    assert_true(mp_mem_current(MP_MEM_DATA) >= N_IMG * PER + N_IMG * 4);
    mp_dataset_free(&d);
    assert_null(d.images);
    assert_null(d.labels);
    assert_int_equal(d.count, 0);
}

static void test_gz_preferred(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_gz", "t10k", 1);
    /* A raw pair with other contents next to the .gz pair: the .gz files must win. */
    uint8_t other[N_IMG] = {1, 1, 1, 1, 1};
    write_labels(dir, "t10k", 0x801, N_IMG, other, N_IMG, 0);
    write_images(dir, "t10k", 0x803, N_IMG, 1, 1, N_IMG, 0);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "test", 10, 0), MP_OK);
    check_contents(&d, N_IMG);
    mp_dataset_free(&d);
}

static void test_limit(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_limit", "train", 1);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 2), MP_OK);
    check_contents(&d, 2);
    mp_dataset_free(&d);
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 100), MP_OK);
    check_contents(&d, N_IMG);
    mp_dataset_free(&d);
    /* A file holding fewer samples than its header says is truncated whatever the limit: a
     * raw file is measured, a whole gzip stream (its CRC checks) read to its end. */
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, sizeof pixels, 0);
    write_labels(dir, "train", 0x801, N_IMG, labels, N_IMG, 0);
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, 3 * PER, 0);
    char path[1100];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    assert_int_equal(remove(path), 0);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", dir);
    assert_int_equal(remove(path), 0);
    expect_fail(dir, "train", 10, 3, MP_EDATA, "train-images-idx3-ubyte: truncated: 12 bytes "
                "short of the 5 images of 2x3 its header announces", NULL, NULL);
    expect_fail(dir, "train", 10, 4, MP_EDATA, "train-images-idx3-ubyte", "truncated", NULL);
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, 3 * PER, 1);
    expect_fail(dir, "train", 10, 3, MP_EDATA, "train-images-idx3-ubyte.gz: truncated: 12 bytes "
                "short", NULL, NULL);
    /* But a gzip file is read to its end whatever the limit, so that its CRC is checked: a
     * stream cut after the kept samples is truncated, as is one without its trailer. */
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, sizeof pixels, 1);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    size_t len;
    uint8_t *gz = slurp(path, &len);
    mp_test_write_file(path, gz, len - 8, 0);
    expect_fail(dir, "train", 10, 2, MP_EDATA, "train-images-idx3-ubyte.gz: truncated",
                "trailer", NULL);
    mp_test_write_file(path, gz, len - 12, 0);
    expect_fail(dir, "train", 10, 2, MP_EDATA, "train-images-idx3-ubyte.gz: truncated", NULL,
                NULL);
    free(gz);
}

static void test_batch(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_batch", "train", 0);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 0), MP_OK);
    const int64_t idx[4] = {3, 0, 4, 3};
    const double mean = 0.2860, std = 0.3530;
    float x32[4 * PER];
    uint16_t x16[4 * PER], xbf[4 * PER];
    double x64[4 * PER];
    int32_t y[4];
    mp_dataset_batch(&d, idx, 4, mean, std, MP_F32, x32, y);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(y[i], labels[idx[i]]);
        for (int k = 0; k < PER; k++) {
            double want = ((double)pixels[idx[i] * PER + k] / 255.0 - mean) / std;
            float wf = (float)want;
            assert_memory_equal(&x32[i * PER + k], &wf, sizeof wf);
        }
    }
    memset(y, -1, sizeof y);
    mp_dataset_batch(&d, idx, 4, mean, std, MP_F16, x16, y);
    mp_dataset_batch(&d, idx, 4, mean, std, MP_BF16, xbf, y);
    mp_dataset_batch(&d, idx, 4, mean, std, MP_F64, x64, y);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(y[i], labels[idx[i]]);
        for (int k = 0; k < PER; k++) {
            double want = ((double)pixels[idx[i] * PER + k] / 255.0 - mean) / std;
            assert_int_equal(x16[i * PER + k], mp_f32_to_f16((float)want));
            assert_int_equal(xbf[i * PER + k], mp_f32_to_bf16((float)want));
            assert_true(x64[i * PER + k] == want);
        }
    }
    /* The extremes: pixel 0 and 255 of image 0. */
    const int64_t first = 0;
    mp_dataset_batch(&d, &first, 1, 0.0, 1.0, MP_F32, x32, y);
    assert_true(x32[0] == 0.0f);
    assert_true(x32[1] == 1.0f);
    mp_dataset_free(&d);
}

static void test_missing(void **state)
{
    (void)state;
    char dir[1024], gone[1100];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("idx_missing"));
    snprintf(gone, sizeof gone, "%s/nope", dir);
    expect_fail(gone, "train", 10, 0, MP_EDATA, gone, "no such directory", NULL);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte.gz", "no such file",
                NULL);
    fill_pixels();
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, sizeof pixels, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-labels-idx1-ubyte.gz", "no such file",
                NULL);
    /* The test split reads t10k-* only. */
    write_labels(dir, "train", 0x801, N_IMG, labels, N_IMG, 0);
    expect_fail(dir, "test", 10, 0, MP_EDATA, "t10k-images-idx3-ubyte", "no such file", NULL);
    expect_fail(dir, "valid", 10, 0, MP_EUSAGE, "valid", NULL, NULL);
    /* A regular file given as the directory, and a directory where a file should be. */
    char file[1100], sub[1100];
    snprintf(file, sizeof file, "%s/train-labels-idx1-ubyte", dir);
    expect_fail(file, "train", 10, 0, MP_EDATA, file, "not a directory", NULL);
    snprintf(sub, sizeof sub, "%s/t10k-images-idx3-ubyte.gz", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    expect_fail(dir, "test", 10, 0, MP_EDATA, "t10k-images-idx3-ubyte.gz: not a regular file",
                "(a directory)", NULL);
    expect_fail(dir, "train", 0, 0, MP_EUSAGE, "num_classes", NULL, NULL);
}

static void test_bad_magic(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_magic", "train", 0);
    write_images(dir, "train", 0x801, N_IMG, ROWS, COLS, sizeof pixels, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte: bad magic 0x00000801",
                "expected 0x00000803", NULL);
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, sizeof pixels, 0);
    write_labels(dir, "train", 0x803, N_IMG, labels, N_IMG, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-labels-idx1-ubyte: bad magic 0x00000803",
                "expected 0x00000801", NULL);
}

static void test_bad_dims(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_dims", "train", 0);
    const uint32_t bad[4][3] = {{0, ROWS, COLS}, {N_IMG, 0, COLS}, {N_IMG, ROWS, 0},
                                {N_IMG, 100000, COLS}};
    for (int i = 0; i < 4; i++) {
        write_images(dir, "train", 0x803, bad[i][0], bad[i][1], bad[i][2], sizeof pixels, 0);
        expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte", "dimensions", NULL);
    }
    /* A header promising more than memory (2^31 images of 4096x4096, 64 PiB) is refused with
     * the numbers before anything is read or allocated. */
    write_images(dir, "train", 0x803, 0x7fffffff, 4096, 4096, sizeof pixels, 0);
    write_labels(dir, "train", 0x801, 0x7fffffff, labels, N_IMG, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA,
                "train-images-idx3-ubyte: 2147483647 images of 4096x4096 with labels (read, then "
                "kept) needs 2147483647 x 33554437 = 72057604741791739 bytes",
                "this process may use", "already held for data");
    /* A header promising more than the file holds, but not more than memory, is "truncated"
     * after reading what is there, not an allocation of what it promised. */
    write_images(dir, "train", 0x803, 1000, 100, 100, sizeof pixels, 0);
    write_labels(dir, "train", 0x801, 1000, labels, N_IMG, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte", "truncated",
                "expected 10000000 bytes of pixels, got 30");
}

static void test_truncated(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_trunc", "train", 0);
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, sizeof pixels - 3, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte: truncated",
                "expected 30 bytes of pixels, got 27", NULL);
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, sizeof pixels, 0);
    write_labels(dir, "train", 0x801, N_IMG, labels, N_IMG - 1, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-labels-idx1-ubyte: truncated",
                "expected 5 bytes of labels, got 4", NULL);
    /* A header cut short. */
    char path[1100];
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
    mp_test_write_file(path, "\0\0\x08\x01\0\0", 6, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-labels-idx1-ubyte: truncated", "header",
                NULL);
}

static void test_count_mismatch(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_count", "train", 0);
    write_labels(dir, "train", 0x801, N_IMG - 1, labels, N_IMG - 1, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-labels-idx1-ubyte: count mismatch",
                "4 labels", "train-images-idx3-ubyte has 5 images");
    /* The check uses the header counts even when a limit reads fewer samples. */
    expect_fail(dir, "train", 10, 2, MP_EDATA, "count mismatch", NULL, NULL);
}

/* A header that claims more images than its file holds, next to labels that hold what the
 * header says: the images file is named as truncated, not the pair as disagreeing. */
static void test_count_claims_more(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_claims", "train", 0);
    write_images(dir, "train", 0x803, N_IMG + 1, ROWS, COLS, sizeof pixels, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte: truncated",
                "6 bytes short of the 6 images of 2x3 its header announces", NULL);
    write_images(dir, "train", 0x803, N_IMG + 1, ROWS, COLS, sizeof pixels, 1);
    expect_fail(dir, "train", 10, 2, MP_EDATA, "train-images-idx3-ubyte.gz: truncated",
                "6 bytes short", NULL);
}

/* A file must end where its header says, as torchvision checks the size: raw bytes appended to
 * the pixels or the labels, or a second gzip member holding one more image, are refused, with a
 * limit too (a raw file is measured, a gzip one read to its end). */
static void test_longer_than_header(void **state)
{
    (void)state;
    char dir[1024], img[1100], part[1100];
    good_pair(dir, sizeof dir, "idx_longer", "train", 0);
    uint8_t extra[N_IMG + 1];
    memcpy(extra, labels, N_IMG);
    extra[N_IMG] = 1;
    write_labels(dir, "train", 0x801, N_IMG, extra, N_IMG + 1, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-labels-idx1-ubyte: 1 byte more than the "
                "5 labels its header announces", "longer than its header says", NULL);
    expect_fail(dir, "train", 10, 3, MP_EDATA, "train-labels-idx1-ubyte: 1 byte more", NULL,
                NULL);
    write_labels(dir, "train", 0x801, N_IMG, labels, N_IMG, 0);
    write_images(dir, "train", 0x803, N_IMG - 1, ROWS, COLS, sizeof pixels, 0);
    write_labels(dir, "train", 0x801, N_IMG - 1, labels, N_IMG - 1, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte: 6 bytes more than the "
                "4 images of 2x3", NULL, NULL);
    expect_fail(dir, "train", 10, 2, MP_EDATA, "train-images-idx3-ubyte: 6 bytes more", NULL,
                NULL);
    /* Gzip: the header's 4 images in one member, a fifth appended as a second member. */
    write_images(dir, "train", 0x803, N_IMG - 1, ROWS, COLS, sizeof pixels - PER, 1);
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(part, sizeof part, "%s/part.gz", dir);
    mp_test_write_file(part, pixels + sizeof pixels - PER, PER, 1);
    size_t alen, blen;
    uint8_t *a = slurp(img, &alen), *b = slurp(part, &blen);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 0), MP_OK); /* one member: whole */
    check_contents(&d, N_IMG - 1);
    mp_dataset_free(&d);
    uint8_t *both = malloc(alen + blen);
    assert_non_null(both);
    memcpy(both, a, alen);
    memcpy(both + alen, b, blen);
    mp_test_write_file(img, both, alen + blen, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte.gz: 6 bytes more than "
                "the 4 images of 2x3", NULL, NULL);
    expect_fail(dir, "train", 10, 2, MP_EDATA, "train-images-idx3-ubyte.gz: 6 bytes more", NULL,
                NULL);
    free(both);
    free(a);
    free(b);
}

static void test_label_range(void **state)
{
    (void)state;
    char dir[1024];
    good_pair(dir, sizeof dir, "idx_range", "train", 0);
    expect_fail(dir, "train", 9, 0, MP_EDATA, "train-labels-idx1-ubyte: label 9 at index 2",
                "out of range [0, 9)", NULL);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 9, 2), MP_OK); /* index 2 not loaded */
    mp_dataset_free(&d);
}

static void test_corrupt_gz(void **state)
{
    (void)state;
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("idx_corrupt"));
    /* 200 images of 8x8 with varied but compressible pixels, so the stream has real blocks. */
    enum { N = 200, S = 8 };
    static uint8_t big[N * S * S], lab[N];
    for (int i = 0; i < N * S * S; i++)
        big[i] = (uint8_t)((i * i / 7 + i / 64) % 251);
    for (int i = 0; i < N; i++)
        lab[i] = (uint8_t)(i % 10);
    uint32_t h[4] = {0x803, N, S, S};
    write_idx(dir, "train-images-idx3-ubyte", h, 4, big, sizeof big, 1);
    write_labels(dir, "train", 0x801, N, lab, N, 1);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 0), MP_OK);
    assert_int_equal(d.count, N);
    assert_memory_equal(d.images, big, sizeof big);
    mp_dataset_free(&d);

    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    size_t len;
    uint8_t *gz = slurp(path, &len);
    assert_true(len > 64);
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, gz, len);
    for (size_t i = len / 2 - 4; i < len / 2 + 4; i++)
        gz[i] ^= 0xa5;
    mp_test_write_file(path, gz, len, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte.gz: gzip stream error",
                NULL, NULL);
    /* Flipping one byte of the CRC trailer is caught after the data decompresses fine. */
    memcpy(gz, copy, len);
    gz[len - 6] ^= 0x01;
    mp_test_write_file(path, gz, len, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "gzip stream error: incorrect data check", NULL,
                NULL);
    /* A gzip file cut in half is truncated. */
    mp_test_write_file(path, copy, len / 2, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte.gz: truncated", NULL,
                NULL);
    free(copy);
    free(gz);
}

/* Issue 18: a gzip stream that ends before its 8-byte trailer (CRC-32, then ISIZE) used to load,
 * so its data went unverified. With any part of the trailer missing, for the images or the
 * labels, with or without a limit, the file is truncated. */
static void test_gz_trailer(void **state)
{
    (void)state;
    char dir[1024], img[1100], lab[1100];
    good_pair(dir, sizeof dir, "idx_trailer", "train", 1);
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", dir);
    size_t ilen, llen;
    uint8_t *igz = slurp(img, &ilen), *lgz = slurp(lab, &llen);
    const size_t cut[3] = {8, 4, 1};
    for (int k = 0; k < 3; k++) {
        mp_test_write_file(img, igz, ilen - cut[k], 0);
        expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte.gz: truncated",
                    "ends before its CRC-32 and length trailer", NULL);
        expect_fail(dir, "train", 10, 2, MP_EDATA, "train-images-idx3-ubyte.gz: truncated",
                    NULL, NULL);
        mp_test_write_file(img, igz, ilen, 0);
        mp_test_write_file(lab, lgz, llen - cut[k], 0);
        expect_fail(dir, "train", 10, 0, MP_EDATA, "train-labels-idx1-ubyte.gz: truncated",
                    "trailer", NULL);
        mp_test_write_file(lab, lgz, llen, 0);
    }
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 0), MP_OK);
    check_contents(&d, N_IMG);
    mp_dataset_free(&d);
    free(igz);
    free(lgz);
}

/* What follows a gzip member: another member is more of the same stream (gzip(1) and zlib read
 * concatenated members as one), so a file written in two members loads whole; bytes that do not
 * start a member are ignored, as gzip(1) ignores trailing garbage, and never change the data. */
static void test_gz_members(void **state)
{
    (void)state;
    char dir[1024], img[1100], part[1100];
    good_pair(dir, sizeof dir, "idx_members", "train", 1);
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(part, sizeof part, "%s/part.gz", dir);
    uint8_t raw[16 + sizeof pixels];
    const uint32_t h[4] = {0x803, N_IMG, ROWS, COLS};
    for (int i = 0; i < 4; i++)
        put_be32(raw + 4 * i, h[i]);
    memcpy(raw + 16, pixels, sizeof pixels);
    size_t split = 16 + 2 * PER + 1, alen, blen;
    mp_test_write_file(img, raw, split, 1);
    mp_test_write_file(part, raw + split, sizeof raw - split, 1);
    uint8_t *a = slurp(img, &alen), *b = slurp(part, &blen);
    uint8_t *both = malloc(alen + blen + 9);
    assert_non_null(both);
    memcpy(both, a, alen);
    memcpy(both + alen, b, blen);
    mp_test_write_file(img, both, alen + blen, 0);
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 0), MP_OK);
    check_contents(&d, N_IMG);
    mp_dataset_free(&d);
    /* The first member alone is a whole gzip stream holding too few pixels. */
    mp_test_write_file(img, a, alen, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte.gz: truncated",
                "expected 30 bytes of pixels, got 13", NULL);
    /* The second member without its trailer is truncated like a single one. */
    mp_test_write_file(img, both, alen + blen - 8, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte.gz: truncated",
                "trailer", NULL);
    /* Trailing bytes that are not a gzip member are ignored. */
    memcpy(both + alen + blen, "garbage!\n", 9);
    mp_test_write_file(img, both, alen + blen + 9, 0);
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 0), MP_OK);
    check_contents(&d, N_IMG);
    mp_dataset_free(&d);
    free(both);
    free(a);
    free(b);
}

/* Issue 18: every single-bit flip of a small .gz (images and labels, each bit of each byte) is
 * refused or loads exactly the original data (a flip in the trailer is always refused). Flips
 * that load are where gzip stores nothing that reaches the data (FLG's text bit, MTIME, XFL,
 * OS: bytes 3..9) or, rarely, deflate encodings with slack (a padding bit after the last block,
 * a dynamic block header describing one more unused code); there the data passed its CRC-32 and
 * length check, so it is the original. Before the fix, flips that cut the deflate stream short
 * loaded wrong data. */
static void test_gz_bit_flips(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("idx_flips"));
    enum { N = 16, S = 5 };
    static uint8_t img[N * S * S], lab[N];
    for (int i = 0; i < N * S * S; i++)
        img[i] = (uint8_t)(((i / 3) % 11) * 20 + (i % 7 == 0)); /* compressible: Huffman */
    for (int i = 0; i < N; i++)
        lab[i] = (uint8_t)((i * 7) % 10);
    uint32_t h[4] = {0x803, N, S, S};
    write_idx(dir, "train-images-idx3-ubyte", h, 4, img, sizeof img, 1);
    write_labels(dir, "train", 0x801, N, lab, N, 1);
    const char *names[2] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"};
    for (int f = 0; f < 2; f++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        size_t len;
        uint8_t *gz = slurp(path, &len);
        int refused = 0, same = 0;
        for (size_t i = 0; i < len; i++)
            for (int bit = 0; bit < 8; bit++) {
                gz[i] ^= (uint8_t)(1u << bit);
                mp_test_write_file(path, gz, len, 0);
                gz[i] ^= (uint8_t)(1u << bit);
                mp_dataset d;
                mp_status st = mp_idx_load(&d, dir, "train", 10, 0);
                if (st != MP_OK) {
                    assert_int_equal(st, MP_EDATA);
                    assert_non_null(strstr(mp_error_message(), names[f]));
                    refused++;
                    continue;
                }
                if (d.count != N || memcmp(d.images, img, sizeof img) != 0)
                    fail_msg("%s: bit %d of byte %zu loads different pixels", names[f], bit, i);
                for (int k = 0; k < N; k++)
                    if (d.labels[k] != lab[k])
                        fail_msg("%s: bit %d of byte %zu loads different labels", names[f], bit,
                                 i);
                mp_dataset_free(&d);
                if (i >= len - 8)
                    fail_msg("%s: bit %d of trailer byte %zu (of %zu) loads", names[f], bit, i,
                             len);
                if (i < 3 || i > 9)
                    print_message("%s: bit %d of deflate byte %zu loads the same data (checked "
                                  "by its CRC)\n",
                                  names[f], bit, i);
                same++;
            }
        print_message("%s: %zu bytes, first deflate block type %d, %d flips refused, %d load "
                      "the same data\n",
                      names[f], len, (gz[10] >> 1) & 3, refused, same);
        assert_int_equal(refused + same, 8 * (int)len);
        assert_true(same <= 49 + 8); /* at most the header's 49 and one byte of slack */
        mp_test_write_file(path, gz, len, 0);
        free(gz);
    }
}

static void test_fashion_mnist(void **state)
{
    (void)state;
    struct stat st;
    if (stat(FMNIST, &st) != 0) {
        print_message("skipping: %s not present\n", FMNIST);
        skip();
    }
    mp_dataset d;
    assert_int_equal(mp_idx_load(&d, FMNIST, "test", 10, 0), MP_OK);
    assert_int_equal(d.count, 10000);
    assert_int_equal(d.h, 28);
    assert_int_equal(d.w, 28);
    assert_int_equal(d.c, 1);
    /* Facts checked independently with Python's gzip module: the first test image is an ankle
     * boot (class 9) whose pixels sum to 33456, the last sums to 24390, 1000 of each class. */
    assert_int_equal(d.labels[0], 9);
    assert_int_equal(d.labels[1], 2);
    int hist[10] = {0};
    for (int64_t i = 0; i < d.count; i++) {
        assert_in_range(d.labels[i], 0, 9);
        hist[d.labels[i]]++;
    }
    for (int k = 0; k < 10; k++)
        assert_int_equal(hist[k], 1000);
    long s0 = 0, s1 = 0;
    for (int k = 0; k < 784; k++) {
        s0 += d.images[k];
        s1 += d.images[9999 * 784 + k];
    }
    assert_int_equal(s0, 33456);
    assert_int_equal(s1, 24390);
    mp_dataset_free(&d);
    assert_int_equal(mp_idx_load(&d, FMNIST, "test", 10, 100), MP_OK);
    assert_int_equal(d.count, 100);
    assert_int_equal(d.labels[0], 9);
    mp_dataset_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw),          cmocka_unit_test(test_gz_preferred),
        cmocka_unit_test(test_limit),        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_missing),      cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_dims),     cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_count_mismatch), cmocka_unit_test(test_count_claims_more),
        cmocka_unit_test(test_longer_than_header), cmocka_unit_test(test_label_range),
        cmocka_unit_test(test_corrupt_gz),   cmocka_unit_test(test_gz_trailer),
        cmocka_unit_test(test_gz_members),   cmocka_unit_test(test_gz_bit_flips),
        cmocka_unit_test(test_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
