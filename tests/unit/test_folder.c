/* Image folders (data.format = "folder", io/folder.c, io/image_decode.c), on folders of PNG and
 * JPEG files written here: classes in name order, files in name order, hidden and other files
 * skipped, a validation split of fewer classes; PNG pixels decoded exactly and, at the image's own
 * size, batches equal to the same pixels in memory (the IDX path) in every dtype; gray files read
 * as RGB and RGB files as gray; a data.std that overflows fp16 refused; JPEG within a few levels;
 * CMYK JPEGs as RGB; the evaluation transform's resize and centre crop against values worked out
 * by hand; the training transform deterministic per (seed, epoch, index), different across epochs,
 * and its flip a mirror; the loader with 0 and 3 threads; limits; refusals, one line each with the
 * data memory back: no root, no train or val directory, no images, a validation class the training
 * split lacks, more classes than num_classes, and at batch time a truncated JPEG, a file that is
 * neither JPEG nor PNG, a PNG larger than the limits. */
#include "tests/util/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "io/augment.h"
#include "io/dataset.h"
#include "io/folder.h"
#include "io/image_decode.h"
#include "io/loader.h"
#include "tests/util/image_files.h"

enum { S = 12 }; /* the fixtures' side */

/* Pixel (y, x, c) of fixture image i: a smooth ramp (at most 200 for the sides used), so a
 * JPEG of it keeps every pixel within a level or two. */
static uint8_t pixel(int i, int y, int x, int c)
{
    return (uint8_t)(i * 7 + y * 4 + x * 3 + c * 30);
}

static void image(int i, int c, uint8_t *px)
{
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++)
            for (int ch = 0; ch < c; ch++)
                px[(y * S + x) * c + ch] = pixel(i, y, x, ch);
}

static void put(const char *dir, const char *rel, int i, int c, bool jpeg)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    for (char *p = path + strlen(dir) + 1; *p; p++) /* mkdir -p of the parents */
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    uint8_t px[S * S * 3];
    image(i, c, px);
    assert_int_equal(jpeg ? mp_test_write_jpeg(path, px, S, S, c, 100)
                          : mp_test_write_png(path, px, S, S, c), 0);
}

/* root/train: classes "b" (files 2, 0) and "a" (file 1, a JPEG), plus a hidden file and a text
 * file; root/val: class "b" (file 3). Image i's pixels are image(i). */
static const char *fixture(const char *name, int c)
{
    const char *root = mp_test_dir(name);
    put(root, "train/b/002.png", 2, c, false);
    put(root, "train/b/000.PNG", 0, c, false);
    put(root, "train/a/x1.jpg", 1, c, true);
    put(root, "train/a/.hidden.png", 9, c, false);
    put(root, "val/b/003.png", 3, c, false);
    char path[4096];
    snprintf(path, sizeof path, "%s/train/a/notes.txt", root);
    mp_test_write_file(path, "x", 1, 0);
    return root;
}

static const double MEAN[3] = {0.4, 0.5, 0.6}, STD[3] = {0.2, 0.3, 0.25};

static void test_listing_and_pixels(void **state)
{
    (void)state;
    const char *root = fixture("folder-list", 3);
    mp_dataset tr, te;
    assert_int_equal(mp_folder_load(&tr, &te, root, S, 3, S, 5, 0, 0), MP_OK);
    assert_int_equal(tr.count, 3);
    assert_int_equal(te.count, 1);
    assert_int_equal(tr.labels[0], 0); /* a/x1.jpg */
    assert_int_equal(tr.labels[1], 1); /* b/000.PNG */
    assert_int_equal(tr.labels[2], 1); /* b/002.png */
    assert_int_equal(te.labels[0], 1);
    assert_int_equal(tr.h, S);
    assert_int_equal(tr.c, 3);
    /* PNG at its own size (resize = S): the pixels in memory, in every dtype. */
    mp_dataset mem;
    memset(&mem, 0, sizeof mem);
    mem.count = 1;
    mem.h = mem.w = S;
    mem.c = 3;
    mem.images = mp_alloc(S * S * 3, MP_MEM_DATA);
    mem.labels = mp_alloc(sizeof *mem.labels, MP_MEM_DATA);
    image(2, 3, mem.images);
    mem.labels[0] = 1;
    const mp_dtype dts[3] = {MP_F32, MP_F16, MP_BF16};
    for (int k = 0; k < 3; k++) {
        float a[S * S * 3], b[S * S * 3];
        int32_t ya, yb;
        int64_t two = 2, zero = 0;
        assert_int_equal(mp_dataset_batch_augmented(&tr, &two, 1, MEAN, STD, 1, 0, 0, false,
                                                    dts[k], a, &ya), MP_OK);
        assert_int_equal(mp_dataset_batch_augmented(&mem, &zero, 1, MEAN, STD, 1, 0, 0, false,
                                                    dts[k], b, &yb), MP_OK);
        assert_memory_equal(a, b, S * S * 3 * mp_dtype_size(dts[k]));
        assert_int_equal(ya, yb);
    }
    /* The JPEG (quality 100) within a few levels of its pixels. */
    float j[S * S * 3];
    int32_t y;
    int64_t zero = 0;
    assert_int_equal(mp_folder_batch(&tr, &zero, 1, MEAN, STD, 1, 0, false, MP_F32, j, &y),
                     MP_OK);
    double worst = 0;
    for (int p = 0; p < S * S * 3; p++) {
        double v = (double)j[p] * STD[p % 3] + MEAN[p % 3];
        double e = fabs(v * 255.0 - pixel(1, p / 3 / S, p / 3 % S, p % 3));
        worst = e > worst ? e : worst;
    }
    print_message("JPEG (quality 100, 4:4:4): largest error %.1f levels\n", worst);
    assert_true(worst <= 3.0);
    mp_dataset *all[3] = {&tr, &te, &mem};
    for (int i = 0; i < 3; i++)
        mp_dataset_free(all[i]);
}

/* A CMYK JPEG as Photoshop writes it (Adobe's inverted values): read as RGB, R = C K / 255 of
 * the stored values and so on, and as its luminance. */
static void test_cmyk_jpeg(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/cmyk.jpg", mp_test_dir("folder-cmyk"));
    uint8_t px[8 * 8 * 4];
    for (int p = 0; p < 64; p++) {
        px[4 * p] = 200;
        px[4 * p + 1] = 100;
        px[4 * p + 2] = 50;
        px[4 * p + 3] = 255;
    }
    assert_int_equal(mp_test_write_jpeg(path, px, 8, 8, 4, 100), 0);
    FILE *f = fopen(path, "rb");
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    mp_image im;
    assert_int_equal(mp_image_decode(buf, n, path, 3, &im), MP_OK);
    const int want[3] = {200, 100, 50};
    for (int p = 0; p < 64; p++)
        for (int c = 0; c < 3; c++)
            assert_true(abs(im.px[3 * p + c] - want[c]) <= 2);
    free(im.px);
    assert_int_equal(mp_image_decode(buf, n, path, 1, &im), MP_OK);
    assert_int_equal(im.c, 1);
    assert_true(abs(im.px[0] - (299 * 200 + 587 * 100 + 114 * 50 + 500) / 1000) <= 2);
    free(im.px);
}

/* Reads up to cap bytes of file `path` into buf; returns how many. */
static size_t slurp(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* As PIL's convert("RGB") reads them (torchvision's ImageFolder): transparent pixels keep their
 * colour (RGBA, gray and alpha), and 16-bit samples without a gAMA chunk are their high byte. */
static void test_png_alpha_and_16bit(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/a.png", mp_test_dir("folder-png-kinds"));
    const uint8_t rgba[8] = {200, 100, 50, 0, 10, 20, 30, 128}, ga[4] = {77, 0, 150, 255};
    const uint16_t deep[6] = {64 * 257, 128 * 257, 192 * 257, 0, 65535, 300 * 1};
    const uint8_t want_rgba[6] = {200, 100, 50, 10, 20, 30}, want_deep[6] = {64, 128, 192, 0,
                                                                             255, 1};
    mp_image im;
    size_t n;
    uint8_t buf[4096];
    assert_int_equal(mp_test_write_png(path, rgba, 1, 2, 4), 0);
    n = slurp(path, buf, sizeof buf);
    assert_int_equal(mp_image_decode(buf, n, path, 3, &im), MP_OK);
    assert_memory_equal(im.px, want_rgba, 6);
    free(im.px);
    assert_int_equal(mp_test_write_png(path, ga, 1, 2, 2), 0);
    n = slurp(path, buf, sizeof buf);
    assert_int_equal(mp_image_decode(buf, n, path, 1, &im), MP_OK);
    assert_int_equal(im.px[0], 77);
    assert_int_equal(im.px[1], 150);
    free(im.px);
    assert_int_equal(mp_test_write_png16(path, deep, 1, 2, 3), 0);
    n = slurp(path, buf, sizeof buf);
    assert_int_equal(mp_image_decode(buf, n, path, 3, &im), MP_OK);
    assert_memory_equal(im.px, want_deep, 6);
    free(im.px);
}

/* Gray files read as RGB (equal channels) and RGB files as gray (one channel). */
static void test_channels(void **state)
{
    (void)state;
    const char *gray = fixture("folder-gray", 1);
    mp_dataset tr, te;
    assert_int_equal(mp_folder_load(&tr, &te, gray, S, 3, S, 2, 0, 0), MP_OK);
    const double m[3] = {0, 0, 0}, s[3] = {1, 1, 1};
    float x[S * S * 3];
    int32_t y;
    int64_t two = 2;
    assert_int_equal(mp_folder_batch(&tr, &two, 1, m, s, 0, 0, false, MP_F32, x, &y), MP_OK);
    for (int p = 0; p < S * S; p++) {
        assert_true(x[3 * p] == x[3 * p + 1] && x[3 * p] == x[3 * p + 2]);
        assert_true(x[3 * p] == (float)(pixel(2, p / S, p % S, 0) / 255.0));
    }
    /* A data.std that takes a pixel value beyond fp16's range fails the batch, naming it. */
    const double m2[3] = {0, 0, 1}, tiny[3] = {1, 1, 1e-6};
    uint16_t h[S * S * 3];
    assert_int_equal(mp_folder_batch(&tr, &two, 1, m2, tiny, 0, 0, false, MP_F16, h, &y),
                     MP_EDATA);
    assert_non_null(strstr(mp_error_message(), "data.mean and data.std take pixel value 0 of "
                                                "channel 2 to -1e+06, beyond fp16's range"));
    assert_int_equal(mp_folder_batch(&tr, &two, 1, m2, tiny, 0, 0, false, MP_F32, x, &y), MP_OK);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    const char *rgb = fixture("folder-rgb", 3);
    assert_int_equal(mp_folder_load(&tr, &te, rgb, S, 1, S, 2, 0, 0), MP_OK);
    assert_int_equal(tr.c, 1);
    assert_int_equal(mp_folder_batch(&tr, &two, 1, m, s, 0, 0, false, MP_F32, x, &y), MP_OK);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* A folder at root holding one gray PNG of side b (px) as train/a/0.png and val/a/0.png. */
static void one_image_folder(const char *root, const uint8_t *px, int b)
{
    char path[4096];
    const char *rel[4] = {"train", "train/a", "val", "val/a"};
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s", root, rel[k]);
        mkdir(path, 0755);
    }
    const char *files[2] = {"train/a/0.png", "val/a/0.png"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", root, files[k]);
        assert_int_equal(mp_test_write_png(path, px, b, b, 1), 0);
    }
}

/* The evaluation transform: a 24 x 24 image with resize 12 and size 8 is the image halved
 * (each pixel the mean of a 2 x 2 block, rounded half up: bilinear at the block's centre),
 * then the centre 8 x 8 of the 12 x 12: rows and columns 2..9. */
static void test_resize_and_centre_crop(void **state)
{
    (void)state;
    enum { B = 24 };
    const char *root = mp_test_dir("folder-resize");
    uint8_t px[B * B];
    for (int y = 0; y < B; y++)
        for (int x = 0; x < B; x++)
            px[y * B + x] = pixel(4, y, x, 0);
    one_image_folder(root, px, B);
    mp_dataset tr, te;
    assert_int_equal(mp_folder_load(&tr, &te, root, 8, 1, 12, 2, 0, 0), MP_OK);
    const double m[1] = {0}, s[1] = {1};
    float x[8 * 8];
    int32_t y;
    int64_t zero = 0;
    assert_int_equal(mp_folder_batch(&te, &zero, 1, m, s, 0, 0, false, MP_F32, x, &y), MP_OK);
    for (int oy = 0; oy < 8; oy++)
        for (int ox = 0; ox < 8; ox++) {
            int r = 2 * (oy + 2), c = 2 * (ox + 2);
            double sum = px[r * B + c] + px[r * B + c + 1] + px[(r + 1) * B + c] +
                         px[(r + 1) * B + c + 1];
            assert_true(x[oy * 8 + ox] == (float)(floor(sum / 4 + 0.5) / 255.0)); /* half up */
        }
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* The training transform: the same (seed, epoch, index), the same bytes; another epoch,
 * other bytes; the loader with 0 and 3 threads as the direct batches. */
static void test_random_crops(void **state)
{
    (void)state;
    const char *root = fixture("folder-random", 3);
    mp_dataset tr, te;
    assert_int_equal(mp_folder_load(&tr, &te, root, 8, 3, 0, 2, 0, 0), MP_OK);
    int64_t idx[3] = {2, 0, 1};
    float a[3 * 8 * 8 * 3], b[3 * 8 * 8 * 3];
    int32_t y[3];
    assert_int_equal(mp_folder_batch(&tr, idx, 3, MEAN, STD, 7, 1, true, MP_F32, a, y), MP_OK);
    assert_int_equal(mp_folder_batch(&tr, idx, 3, MEAN, STD, 7, 1, true, MP_F32, b, y), MP_OK);
    assert_memory_equal(a, b, sizeof a);
    bool differs = false;
    for (int64_t e = 2; e < 6 && !differs; e++) {
        assert_int_equal(mp_folder_batch(&tr, idx, 3, MEAN, STD, 7, e, true, MP_F32, b, y),
                         MP_OK);
        differs = memcmp(a, b, sizeof a) != 0;
    }
    assert_true(differs);
    for (int threads = 0; threads <= 3; threads += 3) {
        mp_loader_config c = {.data = &tr, .threads = threads, .depth = 2, .batch = 2,
                              .dtype = MP_F32, .mean = MEAN, .std = STD, .flip = true,
                              .seed = 7};
        mp_loader *l;
        assert_int_equal(mp_loader_open(&l, &c), MP_OK);
        int64_t order[4] = {2, 0, 1, 1};
        mp_loader_start_epoch(l, order, 4, 1);
        for (int k = 0; k < 2; k++) {
            const void *x;
            const int32_t *ly;
            int64_t n;
            assert_int_equal(mp_loader_next(l, &x, &ly, &n), MP_OK);
            assert_int_equal(mp_folder_batch(&tr, order + 2 * k, 2, MEAN, STD, 7, 1, true,
                                             MP_F32, b, y), MP_OK);
            assert_memory_equal(x, b, 2 * 8 * 8 * 3 * sizeof(float));
        }
        mp_loader_close(l);
    }
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* The flip: on an image that is a ramp along x, every training sample's rows run up (kept) or
 * down (mirrored), and over 24 epochs both happen. */
static void test_flip(void **state)
{
    (void)state;
    enum { B = 16 };
    const char *root = mp_test_dir("folder-flip");
    uint8_t px[B * B];
    for (int y = 0; y < B; y++)
        for (int x = 0; x < B; x++)
            px[y * B + x] = (uint8_t)(x * 15);
    one_image_folder(root, px, B);
    mp_dataset tr, te;
    assert_int_equal(mp_folder_load(&tr, &te, root, 8, 1, 0, 2, 0, 0), MP_OK);
    const double m[1] = {0}, s[1] = {1};
    int seen[2] = {0, 0};
    for (int64_t e = 0; e < 24; e++) {
        float x[64];
        int32_t y;
        int64_t zero = 0;
        assert_int_equal(mp_folder_batch(&tr, &zero, 1, m, s, 3, e, true, MP_F32, x, &y), MP_OK);
        bool up = true, down = true;
        for (int r = 0; r < 8; r++)
            for (int c = 0; c + 1 < 8; c++) {
                up = up && x[r * 8 + c] <= x[r * 8 + c + 1];
                down = down && x[r * 8 + c] >= x[r * 8 + c + 1];
            }
        assert_true(up || down);
        seen[up ? 0 : 1]++;
    }
    assert_true(seen[0] > 0 && seen[1] > 0);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

static void expect_refused(const char *root, int64_t classes, const char *w1, const char *w2)
{
    mp_dataset tr, te;
    int64_t before = mp_mem_current(MP_MEM_DATA);
    mp_status st = mp_folder_load(&tr, &te, root, S, 3, 0, classes, 0, 0);
    const char *want[2] = {w1, w2};
    mp_test_expect_load_fail(st, MP_EDATA, &tr, before, want, 2);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("/nonexistent/folder", 2, "/nonexistent/folder", "no such directory");
    const char *noval = mp_test_dir("folder-noval");
    put(noval, "train/a/0.png", 0, 3, false);
    expect_refused(noval, 2, "val: no such directory", NULL);
    const char *empty = mp_test_dir("folder-empty");
    put(empty, "val/a/0.png", 0, 3, false);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/train", empty);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/train/a", empty);
    mkdir(dir, 0755);
    expect_refused(empty, 2, "train/a: a class directory with no image", NULL);
    const char *noimage = mp_test_dir("folder-val-empty"); /* a test class may be empty */
    put(noimage, "train/a/0.png", 0, 3, false);
    snprintf(dir, sizeof dir, "%s/val", noimage);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/val/a", noimage);
    mkdir(dir, 0755);
    expect_refused(noimage, 2, "val: no image", NULL);
    const char *stray = mp_test_dir("folder-stray");
    put(stray, "train/a/0.png", 0, 3, false);
    put(stray, "val/z/0.png", 0, 3, false);
    expect_refused(stray, 2, "val/z: a class the training split does not have", NULL);
    const char *many = fixture("folder-many", 3);
    expect_refused(many, 1, "2 classes, more than data.num_classes = 1", NULL);
    /* A class folder's link that leads nowhere, or to itself, would drop the class and renumber
     * the later ones: refused, naming it; a plain file beside the classes is skipped. */
    const char *links[2] = {"nowhere", "zz"};
    const char *whys[2] = {"No such file or directory", "Too many levels of symbolic links"};
    for (int k = 0; k < 2; k++) {
        const char *broken = mp_test_dir(k ? "folder-loop" : "folder-dangling");
        put(broken, "train/a/0.png", 0, 3, false);
        put(broken, "val/a/0.png", 0, 3, false);
        snprintf(dir, sizeof dir, "%s/train/notes.txt", broken);
        mp_test_write_file(dir, "x", 1, 0);
        snprintf(dir, sizeof dir, "%s/train/zz", broken);
        assert_int_equal(symlink(links[k], dir), 0);
        expect_refused(broken, 2, "train/zz: a link to a class folder that cannot be reached",
                       whys[k]);
    }

    /* Damaged files fail the batch that reads them, naming them. */
    const char *bad = fixture("folder-bad", 3);
    char path[4096];
    snprintf(path, sizeof path, "%s/train/a/x1.jpg", bad);
    assert_int_equal(truncate(path, 200), 0);
    snprintf(path, sizeof path, "%s/train/b/000.PNG", bad);
    mp_test_write_file(path, "GIF89a not an image", 19, 0);
    mp_dataset tr, te;
    assert_int_equal(mp_folder_load(&tr, &te, bad, S, 3, 0, 2, 0, 0), MP_OK);
    float x[S * S * 3];
    int32_t y;
    const char *why[2] = {"x1.jpg: not a readable JPEG file", "000.PNG: neither a JPEG nor"};
    for (int64_t i = 0; i < 2; i++) {
        assert_int_equal(mp_folder_batch(&tr, &i, 1, MEAN, STD, 0, 0, false, MP_F32, x, &y),
                         MP_EDATA);
        assert_non_null(strstr(mp_error_message(), why[i]));
        assert_null(strchr(mp_error_message(), '\n'));
    }
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listing_and_pixels), cmocka_unit_test(test_channels),
        cmocka_unit_test(test_resize_and_centre_crop), cmocka_unit_test(test_random_crops),
        cmocka_unit_test(test_flip),          cmocka_unit_test(test_cmyk_jpeg),
        cmocka_unit_test(test_refusals),     cmocka_unit_test(test_png_alpha_and_16bit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
