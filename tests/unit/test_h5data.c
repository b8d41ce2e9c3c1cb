/* Images in HDF5 files (data.format = "hdf5", io/h5data.c), files written here with HDF5's C
 * API as h5py writes them: uint8 (N, H, W, C) batches, plain and augmented, have the bytes of
 * the same pixels held in memory (the IDX path), in every dtype; (N, C, H, W) with layout nchw
 * and (N, H, W) (with either layout) give the same, also chunked with shuffle, deflate and
 * Fletcher32 in h5py's and in PyTables' order; float images are normalised as
 * (v - mean) / std; limits; the loader with 0 and 3 threads hands out the direct batches;
 * refusals, each one line naming the file and the dataset with both datasets zeroed and the
 * data memory back: a missing file, a file that is not HDF5, a missing dataset, a group where a
 * dataset should be, labels of the wrong length, type or rank, a label out of range (with its
 * index), int16 images, images of 2 or 5 dimensions or 5 channels, no image, a damaged object
 * header (HDF5's reason), values in other files or never written; a damaged chunk, refused
 * by the reads of its images and only theirs; and a file cut after loading, refused by the
 * batch. */
#include "tests/util/test_util.h"
#include "tests/util/test_h5.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "io/augment.h"
#include "io/dataset.h"
#include "io/h5data.h"
#include "io/loader.h"

enum { N = 10, H = 5, W = 4, C = 3, PER = H * W * C };

static const mp_h5data_keys KEYS[2] = {{"train/images", "train/labels"},
                                       {"test/images", "test/labels"}};

/* Pixel (i, y, x, c) of the fixture. */
static uint8_t pixel(int i, int y, int x, int c)
{
    return (uint8_t)((i * 53 + y * 17 + x * 5 + c * 101) % 256);
}

/* Writes dataset `name` (intermediate groups made) of `rank` dims and memory type mt. */
static void put(hid_t f, const char *name, hid_t mt, int rank, const hsize_t *dims,
                const void *data)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t s = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, mt, s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    assert_true(H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(s);
    H5Pclose(lcpl);
}

typedef enum { NHWC, NCHW, GRAY, FLOATS } layout;

/* A file with both splits (N images each, labels i % 7) in layout `how`; returns its path. */
static const char *write_file(const char *dir, const char *name, layout how)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    uint8_t px[N * PER];
    float fl[N * PER];
    int64_t labels[N];
    int c = how == GRAY ? 1 : C;
    for (int i = 0; i < N; i++) {
        labels[i] = i % 7;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int ch = 0; ch < c; ch++) {
                    size_t k = how == NCHW ? (((size_t)i * C + ch) * H + y) * W + x
                                           : (((size_t)i * H + y) * W + x) * c + ch;
                    px[k] = pixel(i, y, x, ch);
                    fl[k] = (float)pixel(i, y, x, ch) / 8.0f - 3.0f;
                }
    }
    hsize_t nhwc[4] = {N, H, W, C}, nchw[4] = {N, C, H, W}, gray[3] = {N, H, W}, nl[1] = {N};
    const hsize_t *dims = how == NCHW ? nchw : how == GRAY ? gray : nhwc;
    int rank = how == GRAY ? 3 : 4;
    hid_t mt = how == FLOATS ? H5T_NATIVE_FLOAT : H5T_NATIVE_UINT8;
    const void *data = how == FLOATS ? (const void *)fl : px;
    put(f, "train/images", mt, rank, dims, data);
    put(f, "test/images", mt, rank, dims, data);
    put(f, "train/labels", H5T_NATIVE_INT64, 1, nl, labels);
    put(f, "test/labels", H5T_NATIVE_INT64, 1, nl, labels);
    H5Fclose(f);
    return path;
}

/* The fixture's pixels in memory, as an IDX file would give them (N, H, W, c). */
static mp_dataset in_memory(int c)
{
    mp_dataset d;
    memset(&d, 0, sizeof d);
    d.count = N;
    d.h = H;
    d.w = W;
    d.c = c;
    d.num_classes = 7;
    d.images = mp_alloc((size_t)N * H * W * (size_t)c, MP_MEM_DATA);
    d.labels = mp_alloc(N * sizeof *d.labels, MP_MEM_DATA);
    for (int i = 0; i < N; i++) {
        d.labels[i] = i % 7;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int ch = 0; ch < c; ch++)
                    d.images[(((size_t)i * H + y) * W + x) * (size_t)c + ch] =
                        pixel(i, y, x, ch);
    }
    return d;
}

static const double MEAN[4] = {0.2, 0.5, 0.7, 0}, STD[4] = {0.3, 0.25, 0.4, 1};

/* a and b give the same batch bytes for idx, plain and augmented, in fp32, fp16 and bf16. */
static void same_batches(const mp_dataset *a, const mp_dataset *b)
{
    int64_t idx[4] = {3, 0, 9, 3};
    const mp_dtype dts[3] = {MP_F32, MP_F16, MP_BF16};
    for (int k = 0; k < 3; k++)
        for (int aug = 0; aug < 2; aug++) {
            float xa[4 * PER], xb[4 * PER];
            int32_t ya[4], yb[4];
            assert_int_equal(mp_dataset_batch_augmented(a, idx, 4, MEAN, STD, 5, 2, 2 * aug,
                                                        aug, dts[k], xa, ya), MP_OK);
            assert_int_equal(mp_dataset_batch_augmented(b, idx, 4, MEAN, STD, 5, 2, 2 * aug,
                                                        aug, dts[k], xb, yb), MP_OK);
            assert_memory_equal(xa, xb, 4 * (size_t)(a->h * a->w * a->c) *
                                            mp_dtype_size(dts[k]));
            assert_memory_equal(ya, yb, sizeof ya);
        }
}

static void test_pixels_as_idx(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5data-pixels");
    mp_dataset mem = in_memory(C), gray_mem = in_memory(1);
    const layout hows[3] = {NHWC, NCHW, GRAY};
    const char *names[3] = {"nhwc.h5", "nchw.h5", "gray.h5"};
    for (int k = 0; k < 3; k++) {
        const char *path = write_file(dir, names[k], hows[k]);
        mp_dataset tr, te;
        bool nchw = hows[k] != NHWC; /* (N, H, W) is one channel whatever the layout */
        assert_int_equal(mp_h5data_load(&tr, &te, path, KEYS, nchw, 7, 1, 0, 0), MP_OK);
        assert_int_equal(tr.count, N);
        assert_int_equal(te.count, N);
        assert_int_equal(tr.h, H);
        assert_int_equal(tr.w, W);
        assert_int_equal(tr.c, hows[k] == GRAY ? 1 : C);
        assert_null(tr.images);
        assert_false(mp_h5data_float(&tr));
        same_batches(hows[k] == GRAY ? &gray_mem : &mem, &tr);
        same_batches(hows[k] == GRAY ? &gray_mem : &mem, &te);
        mp_dataset_free(&tr);
        mp_dataset_free(&te);
    }
    const char *path = write_file(dir, "limits.h5", NHWC);
    mp_dataset tr, te;
    assert_int_equal(mp_h5data_load(&tr, &te, path, KEYS, false, 7, 0, 4, 2), MP_OK);
    assert_int_equal(tr.count, 4);
    assert_int_equal(te.count, 2);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    mp_dataset_free(&mem);
    mp_dataset_free(&gray_mem);
}

/* Chunked and compressed as h5py and PyTables write them: shuffle, deflate, Fletcher32 (h5py's
 * order) and Fletcher32 first (PyTables' order): the batches of the plain file. */
static void test_filtered_chunks(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5data-filtered");
    mp_dataset mem = in_memory(C);
    for (int order = 0; order < 2; order++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/f%d.h5", dir, order);
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        hsize_t chunk[4] = {3, H, W, C}, dims[4] = {N, H, W, C}, nl = N;
        H5Pset_chunk(dcpl, 4, chunk);
        if (order == 1)
            H5Pset_fletcher32(dcpl);
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 6);
        if (order == 0)
            H5Pset_fletcher32(dcpl);
        uint8_t px[N * PER];
        int64_t labels[N];
        for (int i = 0; i < N; i++) {
            labels[i] = i % 7;
            for (int k = 0; k < PER; k++)
                px[i * PER + k] = pixel(i, k / C / W, k / C % W, k % C);
        }
        hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5Pset_create_intermediate_group(lcpl, 1);
        const char *names[2] = {"train/images", "test/images"};
        for (int s = 0; s < 2; s++) {
            hid_t sp = H5Screate_simple(4, dims, NULL);
            hid_t d = H5Dcreate2(f, names[s], H5T_NATIVE_UINT8, sp, lcpl, dcpl, H5P_DEFAULT);
            assert_true(d >= 0);
            assert_true(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, px) >= 0);
            H5Dclose(d);
            H5Sclose(sp);
        }
        put(f, "train/labels", H5T_NATIVE_INT64, 1, &nl, labels);
        put(f, "test/labels", H5T_NATIVE_INT64, 1, &nl, labels);
        H5Pclose(lcpl);
        H5Pclose(dcpl);
        H5Fclose(f);
        mp_dataset tr, te;
        assert_int_equal(mp_h5data_load(&tr, &te, path, KEYS, false, 7, 1, 0, 0), MP_OK);
        same_batches(&mem, &tr);
        mp_dataset_free(&tr);
        mp_dataset_free(&te);
    }
    mp_dataset_free(&mem);
}

static void test_float_values(void **state)
{
    (void)state;
    const char *path = write_file(mp_test_dir("h5data-float"), "f.h5", FLOATS);
    mp_dataset tr, te;
    assert_int_equal(mp_h5data_load(&tr, &te, path, KEYS, false, 7, 1, 0, 0), MP_OK);
    assert_true(mp_h5data_float(&tr));
    int64_t idx[2] = {6, 1};
    float x[2 * PER];
    int32_t y[2];
    assert_int_equal(mp_dataset_batch_augmented(&tr, idx, 2, MEAN, STD, 1, 0, 0, false, MP_F32,
                                                x, y), MP_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(y[i], idx[i] % 7);
        for (int k = 0; k < PER; k++) {
            int ch = k % C, px = k / C, yy = px / W, xx = px % W;
            double v = (double)((float)pixel((int)idx[i], yy, xx, ch) / 8.0f - 3.0f);
            assert_true(x[i * PER + k] == (float)((v - MEAN[ch]) / STD[ch]));
        }
    }
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

static void test_loader(void **state)
{
    (void)state;
    const char *path = write_file(mp_test_dir("h5data-loader"), "l.h5", NHWC);
    mp_dataset tr, te;
    assert_int_equal(mp_h5data_load(&tr, &te, path, KEYS, false, 7, 1, 0, 0), MP_OK);
    for (int threads = 0; threads <= 3; threads += 3) {
        mp_loader_config c = {.data = &tr, .threads = threads, .depth = 2, .batch = 3,
                              .dtype = MP_F16, .mean = MEAN, .std = STD, .pad = 1,
                              .flip = true, .seed = 11};
        mp_loader *l;
        assert_int_equal(mp_loader_open(&l, &c), MP_OK);
        int64_t order[N] = {9, 2, 4, 4, 0, 1, 8, 3, 5, 7};
        mp_loader_start_epoch(l, order, N, 3);
        for (int b = 0; b < 4; b++) {
            const void *x;
            const int32_t *y;
            int64_t n;
            uint16_t want[3 * PER];
            int32_t want_y[3];
            assert_int_equal(mp_loader_next(l, &x, &y, &n), MP_OK);
            assert_int_equal(n, b < 3 ? 3 : 1);
            assert_int_equal(mp_dataset_batch_augmented(&tr, order + 3 * b, n, MEAN, STD, 11,
                                                        3, 1, true, MP_F16, want, want_y),
                             MP_OK);
            assert_memory_equal(x, want, (size_t)n * PER * 2);
            assert_memory_equal(y, want_y, (size_t)n * sizeof *y);
        }
        mp_loader_close(l);
    }
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* A file with train/images of memory type mt and dims (rank), train/labels as given, and a
 * valid test split. */
static const char *odd_file(const char *name, hid_t mt, int rank, const hsize_t *dims,
                            hid_t lt, hsize_t nlabels, int64_t bad_label)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", mp_test_dir("h5data-bad"), name);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    static uint8_t zeros[64 * 1024];
    int64_t labels[2 * N] = {0}; /* room for 16-byte integers */
    labels[N - 1] = bad_label;
    put(f, "train/images", mt, rank, dims, zeros);
    put(f, "train/labels", lt, 1, &nlabels, labels);
    hsize_t ok[4] = {N, H, W, C}, nl = N;
    put(f, "test/images", H5T_NATIVE_UINT8, 4, ok, zeros);
    put(f, "test/labels", H5T_NATIVE_INT64, 1, &nl, labels);
    H5Fclose(f);
    return path;
}

static void expect_refused(const char *path, const mp_h5data_keys *keys, const char *w1,
                           const char *w2)
{
    mp_dataset tr, te;
    int64_t before = mp_mem_current(MP_MEM_DATA);
    mp_status st = mp_h5data_load(&tr, &te, path, keys, false, 7, 1, 0, 0);
    const char *want[3] = {path, w1, w2};
    mp_test_expect_load_fail(st, MP_EDATA, &tr, before, want, 3);
    mp_dataset zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&te, &zero, sizeof zero);
}

static void test_refusals(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5data-refused");
    char missing[4096], text[4096];
    snprintf(missing, sizeof missing, "%s/none.h5", dir);
    expect_refused(missing, KEYS, "No such file", NULL);
    snprintf(text, sizeof text, "%s/text.h5", dir);
    mp_test_write_file(text, "not hdf5\n", 9, 0);
    expect_refused(text, KEYS, "not a readable HDF5 file", NULL);
    const char *good = write_file(dir, "good.h5", NHWC);
    const mp_h5data_keys nokey[2] = {{"train/pixels", "train/labels"}, KEYS[1]};
    expect_refused(good, nokey, "no dataset train/pixels", NULL);
    const mp_h5data_keys group[2] = {{"train", "train/labels"}, KEYS[1]};
    expect_refused(good, group, "train is not a dataset", NULL);
    hsize_t img[4] = {N, H, W, C}, flat[2] = {N, PER}, five[4] = {N, H, W, 5};
    hsize_t none[4] = {0, H, W, C};
    expect_refused(odd_file("short.h5", H5T_NATIVE_UINT8, 4, img, H5T_NATIVE_INT64, N - 1, 0),
                   KEYS, "train/labels must be (N) integers", "N = 10");
    expect_refused(odd_file("flabels.h5", H5T_NATIVE_UINT8, 4, img, H5T_NATIVE_FLOAT, N, 0),
                   KEYS, "train/labels must be (N) integers", NULL);
    hid_t wide = H5Tcopy(H5T_NATIVE_INT64); /* 16-byte integers: HDF5 would convert them */
    assert_true(wide >= 0 && H5Tset_size(wide, 16) >= 0);
    expect_refused(odd_file("wide.h5", H5T_NATIVE_UINT8, 4, img, wide, N, 0), KEYS,
                   "train/labels must be (N) integers of at most 8 bytes", NULL);
    hid_t quad = H5Tcopy(H5T_NATIVE_DOUBLE); /* 32-byte floats: wider than any float type */
    assert_true(quad >= 0 && H5Tset_size(quad, 32) >= 0);
    expect_refused(odd_file("quad.h5", quad, 4, img, H5T_NATIVE_INT64, N, 0), KEYS,
                   "train/images: images must be uint8 (pixels) or floats of at most 16", NULL);
    H5Tclose(wide);
    H5Tclose(quad);
    expect_refused(odd_file("range.h5", H5T_NATIVE_UINT8, 4, img, H5T_NATIVE_INT64, N, 7), KEYS,
                   "train/labels[9] is 7, not a class in [0, 7)", NULL);
    expect_refused(odd_file("neg.h5", H5T_NATIVE_UINT8, 4, img, H5T_NATIVE_INT64, N, -1), KEYS,
                   "train/labels[9] is -1", NULL);
    expect_refused(odd_file("i16.h5", H5T_NATIVE_INT16, 4, img, H5T_NATIVE_INT64, N, 0), KEYS,
                   "train/images: images must be uint8", NULL);
    expect_refused(odd_file("flat.h5", H5T_NATIVE_UINT8, 2, flat, H5T_NATIVE_INT64, N, 0), KEYS,
                   "train/images has 2 dimensions: images are (N, H, W), (N, H, W, C) or", NULL);
    hsize_t img5[5] = {N, H, W, C, 1};
    expect_refused(odd_file("rank5.h5", H5T_NATIVE_UINT8, 5, img5, H5T_NATIVE_INT64, N, 0), KEYS,
                   "train/images has 5 dimensions: images are (N, H, W)", NULL);
    const mp_h5data_keys img_labels[2] = {{"train/images", "train/images"}, KEYS[1]};
    expect_refused(good, img_labels, "train/images has 4 dimensions: labels are (N) integers",
                   NULL);
    expect_refused(odd_file("five.h5", H5T_NATIVE_UINT8, 4, five, H5T_NATIVE_INT64, N, 0), KEYS,
                   "4 x 5 (H x W x C", "C 1..4");
    expect_refused(odd_file("none.h5", H5T_NATIVE_UINT8, 4, none, H5T_NATIVE_INT64, 0, 0), KEYS,
                   "train/images holds no image", NULL);
}

/* A file cut short after loading: the batch fails naming it (no crash, no old bytes). */
static void test_file_cut(void **state)
{
    (void)state;
    const char *path = write_file(mp_test_dir("h5data-cut"), "cut.h5", NHWC);
    mp_dataset tr, te;
    assert_int_equal(mp_h5data_load(&tr, &te, path, KEYS, false, 7, 0, 0, 0), MP_OK);
    assert_int_equal(truncate(path, 2048), 0);
    int64_t idx = N - 1;
    float x[PER];
    int32_t y;
    assert_int_equal(mp_dataset_batch_augmented(&tr, &idx, 1, MEAN, STD, 0, 0, 0, false, MP_F32,
                                                x, &y), MP_EDATA);
    assert_non_null(strstr(mp_error_message(), path));
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* A damaged object header on the way to a dataset (the train group's version byte) is refused
 * with HDF5's reason, not as a dataset that is missing. */
static void test_damaged_header(void **state)
{
    (void)state;
    const char *path = write_file(mp_test_dir("h5data-header"), "header.h5", NHWC);
    mp_test_h5_damage_header(path, "train");
    expect_refused(path, KEYS, "cannot look up train/images (bad object header version",
                   NULL);
    assert_null(strstr(mp_error_message(), "no dataset"));
}

/* A file whose train/images is made by `how` (0 an external link, 1 external raw storage, 2 a
 * virtual dataset, 3 never written, 4 chunked with one chunk of four written, 5 a soft link to
 * an external link, 6 chunked and deflated with the chunk at element 3 one byte short once
 * inflated), the rest as write_file's; the source and raw files are whole beside it. */
static const char *other_file(const char *dir, int how)
{
    static char path[4096];
    char src[4096], raw[4096];
    snprintf(path, sizeof path, "%s/other%d.h5", dir, how);
    snprintf(src, sizeof src, "%s/src.h5", dir);
    snprintf(raw, sizeof raw, "%s/raw.bin", dir);
    static uint8_t zeros[N * PER];
    hsize_t dims[4] = {N, H, W, C}, nl = N, chunk[4] = {3, H, W, C};
    int64_t labels[N] = {0};
    hid_t g = H5Fcreate(src, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    put(g, "images", H5T_NATIVE_UINT8, 4, dims, zeros);
    H5Fclose(g);
    mp_test_write_file(raw, zeros, sizeof zeros, 0);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t sp = H5Screate_simple(4, dims, NULL);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (how == 0)
        assert_true(H5Lcreate_external(src, "/images", f, "train/images", lcpl, H5P_DEFAULT) >= 0);
    if (how == 5) { /* a soft link to an external one */
        assert_true(H5Lcreate_external(src, "/images", f, "elink", lcpl, H5P_DEFAULT) >= 0);
        assert_true(H5Lcreate_soft("/elink", f, "train/images", lcpl, H5P_DEFAULT) >= 0);
    }
    if (how == 1)
        assert_true(H5Pset_external(dcpl, raw, 0, sizeof zeros) >= 0);
    if (how == 2)
        assert_true(H5Pset_virtual(dcpl, sp, src, "/images", sp) >= 0);
    if (how == 4 || how == 6)
        assert_true(H5Pset_chunk(dcpl, 4, chunk) >= 0);
    if (how == 6)
        assert_true(H5Pset_deflate(dcpl, 6) >= 0);
    if (how > 0 && how != 5) {
        hid_t d = H5Dcreate2(f, "train/images", H5T_NATIVE_UINT8, sp, lcpl, dcpl, H5P_DEFAULT);
        assert_true(d >= 0);
        hsize_t start[4] = {0}, count[4] = {3, H, W, C};
        hid_t ms = H5Screate_simple(4, count, NULL);
        H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL);
        if (how == 1 || how == 4 || how == 6) /* in full; one chunk written; in full */
            assert_true(H5Dwrite(d, H5T_NATIVE_UINT8, how == 4 ? ms : H5S_ALL,
                                 how == 4 ? sp : H5S_ALL, H5P_DEFAULT, zeros) >= 0);
        if (how == 6) { /* the second chunk replaced by a stream a byte short of 3 images */
            uLongf len = compressBound(3 * PER);
            Bytef *z = malloc(len);
            assert_non_null(z);
            assert_int_equal(compress2(z, &len, zeros, 3 * PER - 1, 6), Z_OK);
            hsize_t off[4] = {3, 0, 0, 0};
            assert_true(H5Dwrite_chunk(d, H5P_DEFAULT, 0, off, len, z) >= 0);
            free(z);
        }
        H5Sclose(ms);
        H5Dclose(d);
    }
    put(f, "train/labels", H5T_NATIVE_INT64, 1, &nl, labels);
    put(f, "test/images", H5T_NATIVE_UINT8, 4, dims, zeros);
    put(f, "test/labels", H5T_NATIVE_INT64, 1, &nl, labels);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Fclose(f);
    return path;
}

/* Values kept in other files (an external link, external raw storage, a virtual dataset: a
 * missing or short one read as fill values, a FIFO blocked the loader for ever) and values never
 * written (read as the fill value) are refused at load, naming the dataset. */
static void test_other_files_and_unwritten(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5data-other");
    expect_refused(other_file(dir, 0), KEYS, "train/images is a link to another file", NULL);
    expect_refused(other_file(dir, 1), KEYS, "train/images keeps its values in other files "
                   "(external raw files)", NULL);
    expect_refused(other_file(dir, 2), KEYS, "(a virtual dataset)", NULL);
    expect_refused(other_file(dir, 3), KEYS, "train/images holds values never written", NULL);
    expect_refused(other_file(dir, 4), KEYS, "train/images holds values never written", NULL);
    expect_refused(other_file(dir, 5), KEYS, "train/images leads to another file", NULL);
}

/* An image's chunks are checked when it is first read, not at load (a large file is not read
 * whole at start-up): a chunk that inflates a byte short (HDF5 1.10 would read past its buffer)
 * loads, refuses the images it holds, naming the chunk, and leaves the others readable. */
static void test_chunks_checked_when_read(void **state)
{
    (void)state;
    const char *path = other_file(mp_test_dir("h5data-lazy"), 6);
    mp_dataset tr, te;
    assert_int_equal(mp_h5data_load(&tr, &te, path, KEYS, false, 7, 1, 0, 0), MP_OK);
    uint8_t px[PER];
    assert_int_equal(mp_h5data_read(&tr, 0, px), MP_OK);
    for (int i = 3; i < 6; i++) {
        assert_int_equal(mp_h5data_read(&tr, i, px), MP_EDATA);
        assert_non_null(strstr(mp_error_message(), "train/images: the chunk at [3, 0, 0, 0] "));
        assert_non_null(strstr(mp_error_message(), "do not unpack"));
    }
    assert_int_equal(mp_h5data_read(&tr, 2, px), MP_OK);
    assert_int_equal(mp_h5data_read(&tr, 9, px), MP_OK);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pixels_as_idx), cmocka_unit_test(test_filtered_chunks),
        cmocka_unit_test(test_float_values),
        cmocka_unit_test(test_loader),        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_file_cut),      cmocka_unit_test(test_damaged_header),
        cmocka_unit_test(test_other_files_and_unwritten),
        cmocka_unit_test(test_chunks_checked_when_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
