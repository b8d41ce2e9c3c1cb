/* Text data (data.format = "text", io/text.c): the split of a file into training and validation
 * bytes, window counts and kept bytes; windows and their labels shifted by one byte, in every
 * float dtype; the per-epoch offset (the same for the same seed and epoch, different across
 * epochs, every value in [0, T) fitting, none for the validation split); a directory read in
 * name order with subdirectories, skipping *.dat, checkpoints, hidden names and symbolic links;
 * limits; refusals (missing path, empty, too short, a directory without text, bad arguments)
 * leaving nothing allocated; the loader handing out n * T labels per batch, identical to
 * mp_text_batch with any number of threads; Debian's fortunes corpus when it is installed; and
 * the config's text defaults (path, 256 classes, context, val_fraction) and refusals (other
 * classes, augmentation, out-of-range context and fraction). */
#include "tests/util/test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "engine/rng.h"
#include "engine/status.h"
#include "io/augment.h"
#include "io/dataset.h"
#include "io/loader.h"
#include "src/config.h"

#define T 8
#define LEN 1000 /* corpus bytes: 900 for training (111 windows), 100 for validation (12) */

/* The corpus byte at position i: distinct for neighbours, every value 0..255 appears. */
static uint8_t byte_at(int64_t i)
{
    return (uint8_t)((i * 37 + i / 256) % 256);
}

static void corpus(uint8_t *b, int64_t n, int64_t first)
{
    for (int64_t i = 0; i < n; i++)
        b[i] = byte_at(first + i);
}

/* Writes a corpus file of `len` bytes (byte_at from 0) as dir/name; returns its path. */
static const char *write_corpus(const char *dir, const char *name, int64_t len)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *b = malloc((size_t)len + 1);
    assert_non_null(b);
    corpus(b, len, 0);
    mp_test_write_file(path, b, (size_t)len, 0);
    free(b);
    return path;
}

static void assert_zeroed(const mp_dataset *d)
{
    mp_dataset zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(d, &zero, sizeof zero);
}

static void test_split_file(void **state)
{
    (void)state;
    const char *path = write_corpus(mp_test_dir("text_split"), "corpus.txt", LEN);
    int64_t base = mp_mem_current(MP_MEM_DATA);
    mp_dataset tr, te;
    assert_int_equal(mp_text_load(&tr, &te, path, T, 0.1, 0, 0), MP_OK);
    assert_int_equal(tr.count, 900 / T - 1);
    assert_int_equal(te.count, (100 - 1) / T);
    assert_int_equal(tr.text_len, (tr.count + 1) * T);
    assert_int_equal(te.text_len, te.count * T + 1);
    assert_true(tr.text_shift);
    assert_false(te.text_shift);
    const mp_dataset *both[2] = {&tr, &te};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(both[k]->h, 1);
        assert_int_equal(both[k]->w, T);
        assert_int_equal(both[k]->c, 1);
        assert_int_equal(both[k]->num_classes, 256);
        assert_int_equal(mp_dataset_label_len(both[k]), T);
        assert_null(both[k]->images);
        assert_null(both[k]->labels);
    }
    uint8_t want[LEN];
    corpus(want, LEN, 0);
    assert_memory_equal(tr.text, want, (size_t)tr.text_len);
    assert_memory_equal(te.text, want + 900, (size_t)te.text_len); /* the tail: validation */
    assert_true(mp_mem_current(MP_MEM_DATA) >= base + tr.text_len + te.text_len);

    /* Deterministic: a second load is the same. */
    mp_dataset tr2, te2;
    assert_int_equal(mp_text_load(&tr2, &te2, path, T, 0.1, 0, 0), MP_OK);
    assert_int_equal(tr2.count, tr.count);
    assert_memory_equal(tr2.text, tr.text, (size_t)tr.text_len);
    assert_memory_equal(te2.text, te.text, (size_t)te.text_len);
    mp_dataset_free(&tr2);
    mp_dataset_free(&te2);

    /* Another fraction moves the boundary: 30% of 1000 bytes is 300 for validation. */
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    assert_int_equal(mp_text_load(&tr, &te, path, T, 0.3, 0, 0), MP_OK);
    assert_int_equal(tr.count, 700 / T - 1);
    assert_int_equal(te.count, 299 / T);
    assert_memory_equal(te.text, want + 700, (size_t)te.text_len);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    assert_zeroed(&tr);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
}

/* Window j of the epoch starts at j * T + offset: x holds its first T bytes as values, y the T
 * bytes one further on; the validation split has no offset. */
static void test_windows_shift_by_one(void **state)
{
    (void)state;
    const char *path = write_corpus(mp_test_dir("text_windows"), "c", LEN);
    mp_dataset tr, te;
    assert_int_equal(mp_text_load(&tr, &te, path, T, 0.1, 0, 0), MP_OK);
    static const mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const int64_t idx_tr[4] = {0, 5, 110, 37}, idx_te[4] = {0, 5, 11, 3}; /* 111, 12 windows */
    const uint64_t seed = 42;
    for (int di = 0; di < 4; di++) {
        for (int64_t epoch = 0; epoch < 3; epoch++) {
            for (int split = 0; split < 2; split++) {
                const mp_dataset *d = split ? &te : &tr;
                const int64_t *idx = split ? idx_te : idx_tr, n = 4;
                int64_t first = split ? 900 : 0;
                double x[4 * T];
                int32_t y[4 * T + 1];
                y[n * T] = -7; /* must stay: n * T labels, no more */
                mp_text_batch(d, idx, n, seed, epoch, dts[di], x, y);
                assert_int_equal(y[n * T], -7);
                int64_t off = mp_text_offset(d, seed, epoch);
                if (split)
                    assert_int_equal(off, 0);
                for (int64_t i = 0; i < n; i++) {
                    int64_t s = first + idx[i] * T + off;
                    for (int k = 0; k < T; k++) {
                        double v = mp_load(x, dts[di], (size_t)(i * T + k));
                        assert_true(v == (double)byte_at(s + k)); /* exact in every dtype */
                        assert_int_equal(y[i * T + k], byte_at(s + k + 1));
                    }
                }
                /* mp_dataset_batch_augmented hands text to mp_text_batch (no normalisation). */
                double xa[4 * T];
                int32_t ya[4 * T];
                const double mean[1] = {0.5}, stdv[1] = {0.25};
                mp_dataset_batch_augmented(d, idx, n, mean, stdv, seed, epoch, 4, true, dts[di],
                                           xa, ya);
                assert_memory_equal(xa, x, (size_t)(n * T) * mp_dtype_size(dts[di]));
                assert_memory_equal(ya, y, (size_t)(n * T) * sizeof *y);
            }
        }
    }
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* The offset is mp_rng_seed(seed ^ MP_TEXT_SALT, epoch) below T: the same for the same (seed,
 * epoch) whatever dataset or call, different across epochs, every value in [0, T) drawn and
 * fitting (the last window's last label is still a corpus byte). */
static void test_epoch_offset(void **state)
{
    (void)state;
    const char *path = write_corpus(mp_test_dir("text_offset"), "c", LEN);
    mp_dataset tr, te, tr2, te2;
    assert_int_equal(mp_text_load(&tr, &te, path, T, 0.1, 0, 0), MP_OK);
    assert_int_equal(mp_text_load(&tr2, &te2, path, T, 0.2, 0, 0), MP_OK);
    bool seen[T] = {false};
    int changes = 0;
    int64_t prev = -1;
    for (int64_t epoch = 0; epoch < 200; epoch++) {
        int64_t off = mp_text_offset(&tr, 7, epoch);
        assert_true(off >= 0 && off < T);
        assert_int_equal(mp_text_offset(&tr, 7, epoch), off);
        assert_int_equal(mp_text_offset(&tr2, 7, epoch), off);
        assert_int_equal(mp_text_offset(&te, 7, epoch), 0);
        mp_rng r;
        mp_rng_seed(&r, 7 ^ MP_TEXT_SALT, (uint64_t)epoch);
        assert_int_equal(off, (int64_t)mp_rng_below(&r, T));
        changes += prev >= 0 && off != prev;
        prev = off;
        seen[off] = true;
        int64_t last = tr.count - 1;
        double x[T];
        int32_t y[T];
        mp_text_batch(&tr, &last, 1, 7, epoch, MP_F32, x, y);
        assert_int_equal(y[T - 1], byte_at(tr.count * T + off));
    }
    for (int k = 0; k < T; k++)
        assert_true(seen[k]);
    assert_true(changes > 100);
    /* Another seed gives another sequence of offsets. */
    int same = 0;
    for (int64_t epoch = 0; epoch < 64; epoch++)
        same += mp_text_offset(&tr, 7, epoch) == mp_text_offset(&tr, 8, epoch);
    assert_true(same < 32);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    mp_dataset_free(&tr2);
    mp_dataset_free(&te2);
}

static void write_bytes(const char *dir, const char *name, uint8_t value, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t b[512];
    assert_true(n <= sizeof b);
    memset(b, value, n);
    mp_test_write_file(path, b, n, 0);
}

/* A directory: entries in strcmp order ("Z" before "a"), a subdirectory's files at its name's
 * place, *.dat, checkpoints, hidden files and directories and symbolic links skipped. */
static void test_directory_order(void **state)
{
    (void)state;
    char dir[1024], sub[1100], hid[1100], link[1100], target[1100];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("text_dir"));
    snprintf(sub, sizeof sub, "%s/m", dir);
    snprintf(hid, sizeof hid, "%s/.git", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(mkdir(hid, 0755), 0);
    write_bytes(dir, "b", 'b', 100);
    write_bytes(dir, "a", 'a', 100);
    write_bytes(dir, "Z", 'Z', 100);
    write_bytes(sub, "x", 'x', 100);
    write_bytes(dir, "n", 'n', 100);
    write_bytes(dir, "a.dat", '!', 100);
    write_bytes(dir, ".hidden", '!', 100);
    write_bytes(dir, "ckpt-00000003.h5", '!', 100); /* checkpoint.dir = data.path */
    write_bytes(hid, "y", '!', 100);
    snprintf(link, sizeof link, "%s/a.u8", dir);
    snprintf(target, sizeof target, "%s/a", dir);
    assert_int_equal(symlink(target, link), 0);
    mp_dataset tr, te;
    /* 500 bytes: Z a b m/x n; validation = the last 100 (file n), training the first 400. */
    assert_int_equal(mp_text_load(&tr, &te, dir, 4, 0.2, 0, 0), MP_OK);
    assert_int_equal(tr.count, 400 / 4 - 1);
    assert_int_equal(te.count, 99 / 4);
    const char order[] = "Zabx";
    for (int64_t i = 0; i < tr.text_len; i++)
        assert_int_equal(tr.text[i], order[i / 100]);
    for (int64_t i = 0; i < te.text_len; i++)
        assert_int_equal(te.text[i], 'n');
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* A limit keeps the first windows of its split and only the bytes they reach. */
static void test_limits(void **state)
{
    (void)state;
    const char *path = write_corpus(mp_test_dir("text_limits"), "c", LEN);
    mp_dataset tr, te;
    assert_int_equal(mp_text_load(&tr, &te, path, T, 0.1, 5, 3), MP_OK);
    assert_int_equal(tr.count, 5);
    assert_int_equal(te.count, 3);
    assert_int_equal(tr.text_len, 6 * T);
    assert_int_equal(te.text_len, 3 * T + 1);
    uint8_t want[LEN];
    corpus(want, LEN, 0);
    assert_memory_equal(tr.text, want, (size_t)tr.text_len);
    assert_memory_equal(te.text, want + 900, (size_t)te.text_len);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    /* Limits above what the splits hold keep everything. */
    assert_int_equal(mp_text_load(&tr, &te, path, T, 0.1, 1000000, 13), MP_OK);
    assert_int_equal(tr.count, 900 / T - 1);
    assert_int_equal(te.count, 12);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* Loads that must fail with `code`, a one-line message holding `want` (and the path when
 * `named`), both datasets zeroed and no data memory left held. */
static void expect_refused(const char *path, int context, double frac, mp_status code,
                           const char *want, bool named)
{
    int64_t base = mp_mem_current(MP_MEM_DATA);
    mp_dataset tr, te;
    memset(&tr, 0xab, sizeof tr);
    memset(&te, 0xab, sizeof te);
    mp_error_clear();
    assert_int_equal(mp_text_load(&tr, &te, path, context, frac, 0, 0), code);
    const char *msg = mp_error_message();
    if (!strstr(msg, want) || (named && !strstr(msg, path)))
        fail_msg("message \"%s\" lacks \"%s\"%s", msg, want, named ? " or the path" : "");
    assert_null(strchr(msg, '\n'));
    assert_zeroed(&tr);
    assert_zeroed(&te);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
}

static void test_refusals(void **state)
{
    (void)state;
    char dir[1024], path[1100], empty_dir[1100], dat_dir[1100];
    snprintf(dir, sizeof dir, "%s", mp_test_dir("text_refusals"));
    snprintf(path, sizeof path, "%s/missing", dir);
    expect_refused(path, T, 0.1, MP_EDATA, "no such file or directory", true);
    snprintf(path, sizeof path, "%s/empty", dir);
    mp_test_write_file(path, "", 0, 0);
    expect_refused(path, T, 0.1, MP_EDATA, "no text: 1 file, all empty", true);
    /* 2T training bytes and T + 1 validation bytes are the least that hold one window each. */
    const char *ok = write_corpus(dir, "least_train", 32); /* T = 8: 16 training, 16 validation */
    mp_dataset tr, te;
    assert_int_equal(mp_text_load(&tr, &te, ok, 8, 0.5, 0, 0), MP_OK);
    assert_int_equal(tr.count, 1);
    assert_int_equal(te.count, 1);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    const char *small = write_corpus(dir, "short_train", 30); /* 15 training bytes */
    expect_refused(small, 8, 0.5, MP_EDATA, "too few for windows of data.context = 8", true);
    ok = write_corpus(dir, "least_val", 20); /* T = 4: 15 training, 5 validation */
    assert_int_equal(mp_text_load(&tr, &te, ok, 4, 0.25, 0, 0), MP_OK);
    assert_int_equal(tr.count, 2);
    assert_int_equal(te.count, 1);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    small = write_corpus(dir, "short_val", 16); /* 12 training, 4 validation */
    expect_refused(small, 4, 0.25, MP_EDATA, "validation split (4 bytes", true);
    snprintf(empty_dir, sizeof empty_dir, "%s/emptydir", dir);
    assert_int_equal(mkdir(empty_dir, 0755), 0);
    expect_refused(empty_dir, T, 0.1, MP_EDATA, "no text files in the directory", true);
    snprintf(dat_dir, sizeof dat_dir, "%s/datdir", dir);
    assert_int_equal(mkdir(dat_dir, 0755), 0);
    write_bytes(dat_dir, "cookie.dat", 'x', 100);
    write_bytes(dat_dir, ".hidden", 'x', 100);
    expect_refused(dat_dir, T, 0.1, MP_EDATA, "no text files in the directory", true);
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_refused(path, T, 0.1, MP_EDATA, "neither a regular file nor a directory", true);
    ok = write_corpus(dir, "fine", LEN);
    expect_refused(ok, 1, 0.1, MP_EUSAGE, "context 1", false);
    expect_refused(ok, 4097, 0.1, MP_EUSAGE, "context 4097", false);
    expect_refused(ok, T, 0.0, MP_EUSAGE, "val_fraction", false);
    expect_refused(ok, T, 1.0, MP_EUSAGE, "val_fraction", false);
}

/* The loader over text: x (n, 1, T, 1) and n * T labels per batch, bitwise what mp_text_batch
 * gives for (its seed, the epoch, the batch's indices), with 0 and 3 threads, the short last
 * batch included; the label buffers hold n * T labels. */
static void test_loader_labels(void **state)
{
    (void)state;
    const char *path = write_corpus(mp_test_dir("text_loader"), "c", LEN);
    mp_dataset tr, te;
    assert_int_equal(mp_text_load(&tr, &te, path, T, 0.1, 0, 0), MP_OK);
    int64_t *idx = malloc((size_t)tr.count * sizeof *idx);
    assert_non_null(idx);
    for (int64_t i = 0; i < tr.count; i++)
        idx[i] = (i * 17) % tr.count; /* 17 is prime to 111: a permutation */
    const double mean[1] = {0.0}, stdv[1] = {1.0};
    const int threads[2] = {0, 3};
    for (int ti = 0; ti < 2; ti++) {
        mp_loader_config c = {.data = &tr, .threads = threads[ti], .depth = 2, .batch = 10,
                              .dtype = MP_F32, .mean = mean, .std = stdv, .seed = 99};
        mp_loader *l;
        assert_int_equal(mp_loader_open(&l, &c), MP_OK);
        for (int64_t epoch = 0; epoch < 2; epoch++) {
            mp_loader_start_epoch(l, idx, tr.count, epoch);
            int64_t seen = 0;
            for (int64_t b = 0; b < (tr.count + 9) / 10; b++) {
                const void *x;
                const int32_t *y;
                int64_t n;
                assert_int_equal(mp_loader_next(l, &x, &y, &n), MP_OK);
                assert_int_equal(n, tr.count - seen < 10 ? tr.count - seen : 10);
                float rx[10 * T];
                int32_t ry[10 * T];
                mp_text_batch(&tr, idx + seen, n, 99, epoch, MP_F32, rx, ry);
                assert_memory_equal(x, rx, (size_t)(n * T) * sizeof *rx);
                assert_memory_equal(y, ry, (size_t)(n * T) * sizeof *ry);
                int64_t off = mp_text_offset(&tr, 99, epoch);
                assert_int_equal(y[n * T - 1], byte_at(idx[seen + n - 1] * T + off + T));
                seen += n;
            }
            assert_int_equal(seen, tr.count);
        }
        mp_loader_close(l);
    }
    free(idx);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* Debian's fortunes (launch/deps.sh installs it): the corpus the shipped config trains on loads
 * as text, starting with its first file in name order; the ".u8" links are not read again. */
static void test_fortunes(void **state)
{
    (void)state;
    const char *dir = "/usr/share/games/fortunes";
    char first[256];
    snprintf(first, sizeof first, "%s/art", dir);
    struct stat sb;
    if (stat(first, &sb) != 0 || sb.st_size < 64)
        skip();
    mp_dataset tr, te;
    assert_int_equal(mp_text_load(&tr, &te, dir, 128, 0.1, 0, 0), MP_OK);
    assert_true(tr.count > 1000);
    assert_true(te.count > 100);
    uint8_t head[64];
    FILE *f = fopen(first, "rb");
    assert_non_null(f);
    assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    assert_memory_equal(tr.text, head, sizeof head);
    char u8[256];
    snprintf(u8, sizeof u8, "%s/art.u8", dir);
    if (lstat(u8, &sb) == 0 && S_ISLNK(sb.st_mode)) { /* read twice, art would come again */
        int64_t total = 0;
        struct stat fs;
        if (stat(first, &fs) == 0)
            total = (int64_t)fs.st_size;
        assert_true(memcmp(tr.text + total, head, sizeof head) != 0);
    }
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* Loads defaults and `sets`; expects `want` and, on failure, a one-line message holding
 * `fragment`. */
static void config_case(const char *const *sets, int nsets, mp_status want, const char *fragment,
                        mp_config *c)
{
    mp_error_clear();
    mp_status st = mp_config_load(c, NULL, sets, nsets);
    if (st != want || (fragment && (!strstr(mp_error_message(), fragment) ||
                                    strchr(mp_error_message(), '\n'))))
        fail_msg("status %d, message \"%s\"; want %d with \"%s\"", (int)st,
                 mp_error_message(), (int)want, fragment ? fragment : "");
}

static void test_config(void **state)
{
    (void)state;
    mp_config c;
    const char *text[] = {"data.format=text"};
    config_case(text, 1, MP_OK, NULL, &c);
    assert_string_equal(c.data.path, "/usr/share/games/fortunes");
    assert_int_equal(c.data.num_classes, 256);
    assert_int_equal(c.data.context, 128);
    assert_true(c.data.val_fraction == 0.1);
    assert_non_null(strstr(c.text, "/usr/share/games/fortunes")); /* resolved, read back */
    mp_config_free(&c);
    const char *given[] = {"data.format=text", "data.path=/tmp/corpus.txt", "data.context=64",
                           "data.val_fraction=0.25", "data.num_classes=256"};
    config_case(given, 5, MP_OK, NULL, &c);
    assert_string_equal(c.data.path, "/tmp/corpus.txt");
    assert_int_equal(c.data.context, 64);
    assert_true(c.data.val_fraction == 0.25);
    mp_config_free(&c);
    config_case(NULL, 0, MP_OK, NULL, &c); /* images keep their defaults */
    assert_string_equal(c.data.path, "/usr/share/datasets/fashion-mnist");
    assert_int_equal(c.data.num_classes, 10);
    mp_config_free(&c);
    const char *classes[] = {"data.format=text", "data.num_classes=10"};
    config_case(classes, 2, MP_EUSAGE, "--set data.num_classes: text data has 256 classes", &c);
    const char *augment[] = {"data.format=text", "data.augment=true"};
    config_case(augment, 2, MP_EUSAGE, "--set data.augment: text data is not augmented", &c);
    const char *ctx[] = {"data.format=text", "data.context=1"};
    config_case(ctx, 2, MP_EUSAGE, "data.context", &c);
    const char *frac[] = {"data.format=text", "data.val_fraction=0.6"};
    config_case(frac, 2, MP_EUSAGE, "data.val_fraction", &c);
    const char *zero[] = {"data.val_fraction=0"};
    config_case(zero, 1, MP_EUSAGE, "data.val_fraction", &c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_file),      cmocka_unit_test(test_windows_shift_by_one),
        cmocka_unit_test(test_epoch_offset),    cmocka_unit_test(test_directory_order),
        cmocka_unit_test(test_limits),          cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_loader_labels),   cmocka_unit_test(test_fortunes),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
