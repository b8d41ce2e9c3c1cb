/* IDX loading: synthetic raw and gzip files with known contents, every error class (each must
 * be MP_EDATA with a message naming the file and the problem, and leave nothing allocated),
 * batch normalisation per dtype, and the real Fashion-MNIST test split. */
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

/* Loads and expects failure `code` with a message containing each of the given substrings;
 * *d must come back zeroed and nothing may stay allocated. */
static void expect_fail(const char *dir, const char *split, int num_classes, int64_t limit,
                        mp_status code, const char *s1, const char *s2, const char *s3)
{
    mp_dataset d;
    memset(&d, 0x5a, sizeof d);
    int64_t before = mp_mem_current(MP_MEM_DATA);
    mp_error_clear();
    assert_int_equal(mp_idx_load(&d, dir, split, num_classes, limit), code);
    const char *msg = mp_error_message();
    assert_null(strchr(msg, '\n'));
    const char *want[3] = {s1, s2, s3};
    for (int i = 0; i < 3; i++)
        if (want[i] && !strstr(msg, want[i]))
            fail_msg("message \"%s\" lacks \"%s\"", msg, want[i]);
    mp_dataset zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&d, &zero, sizeof d);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), before);
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
    /* A limit only needs its own samples to be present. */
    write_images(dir, "train", 0x803, N_IMG, ROWS, COLS, 3 * PER, 1);
    assert_int_equal(mp_idx_load(&d, dir, "train", 10, 3), MP_OK);
    check_contents(&d, 3);
    mp_dataset_free(&d);
    expect_fail(dir, "train", 10, 4, MP_EDATA, "train-images-idx3-ubyte.gz", "truncated", NULL);
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
    expect_fail(dir, "test", 10, 0, MP_EDATA, "t10k-images-idx3-ubyte.gz: read error",
                "Is a directory", NULL);
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
    /* A header promising far more than the file holds is "truncated", not an allocation. */
    write_images(dir, "train", 0x803, 0x7fffffff, 4096, 4096, sizeof pixels, 0);
    write_labels(dir, "train", 0x801, 0x7fffffff, labels, N_IMG, 0);
    expect_fail(dir, "train", 10, 0, MP_EDATA, "train-images-idx3-ubyte", "truncated", NULL);
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
        cmocka_unit_test(test_count_mismatch), cmocka_unit_test(test_label_range),
        cmocka_unit_test(test_corrupt_gz),   cmocka_unit_test(test_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
