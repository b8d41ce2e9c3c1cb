/* HDF5 checkpoint files (io/h5file, io/ckpt_dir, the format checks of src/checkpoint): values of
 * every dtype round-trip bit for bit, a flipped byte inside a dataset's chunk fails the read with
 * the dataset named (Fletcher32, with and without deflate), an aborted writer leaves the target
 * untouched, a truncated file, a newer format version and a damaged object header (HDF5's
 * reason, not "missing") are refused, the directory lists newest first and prunes. Arrays of
 * many chunks, edge chunks included, are stored byte for byte as HDF5's own H5Dwrite stores
 * them (the writer computes Fletcher32 itself). */
#include "tests/util/test_util.h"
#include "tests/util/test_h5.h"

#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/rng.h"
#include "io/ckpt_dir.h"
#include "io/h5file.h"
#include "src/checkpoint.h"

static char path[1024];

static void fill(float *x, int64_t n, uint64_t seed)
{
    mp_rng r;
    mp_rng_seed(&r, seed, 1);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(4.0 * mp_rng_uniform(&r) - 2.0);
}

/* Writes /a (3, 5, 7) FP32 values at `dt`, /n int64 and attributes, committed to `p`. */
static void write_file(const char *p, mp_dtype dt, int deflate, const float *x)
{
    mp_h5w *w;
    int64_t shape[3] = {3, 5, 7}, n[1] = {4}, ints[4] = {-1, 0, 1LL << 40, 7};
    assert_int_equal(mp_h5w_open(&w, p, deflate), MP_OK);
    assert_int_equal(mp_h5w_attr_int(w, "/meta", "format_version", 1), MP_OK);
    assert_int_equal(mp_h5w_attr_string(w, "/meta", "kind", "full"), MP_OK);
    assert_int_equal(mp_h5w_attr_double(w, "/scaler", "scale", 32768.5), MP_OK);
    assert_int_equal(mp_h5w_array(w, "/params/a.weight", dt, 3, shape, x, MP_F32), MP_OK);
    assert_int_equal(mp_h5w_array(w, "/rng/n", MP_H5_I64, 1, n, ints, MP_H5_I64), MP_OK);
    assert_int_equal(mp_h5w_commit(w), MP_OK);
}

static void test_roundtrip(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "%s/rt.h5", mp_test_dir("h5_roundtrip"));
    float x[105], back[105], want[105];
    uint16_t half[105];
    fill(x, 105, 1);
    mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        for (int deflate = 0; deflate <= 6; deflate += 6) {
            write_file(path, dts[k], deflate, x);
            mp_h5r *r;
            assert_int_equal(mp_h5r_open(&r, path), MP_OK);
            int ndim;
            int64_t shape[MP_H5_MAX_DIMS], s3[3] = {3, 5, 7};
            mp_dtype stored;
            assert_int_equal(mp_h5r_info(r, "/params/a.weight", &ndim, shape, &stored), MP_OK);
            assert_int_equal(ndim, 3);
            assert_int_equal(shape[2], 7);
            assert_int_equal(stored, dts[k]);
            memset(back, 0xff, sizeof back);
            assert_int_equal(mp_h5r_array(r, "/params/a.weight", 3, s3, back, MP_F32), MP_OK);
            if (dts[k] == MP_F16 || dts[k] == MP_BF16) { /* exactly the engine's rounding */
                mp_convert(half, dts[k], x, MP_F32, 105);
                mp_convert(want, MP_F32, half, dts[k], 105);
                uint16_t back16[105];
                assert_int_equal(mp_h5r_array(r, "/params/a.weight", 3, s3, back16, dts[k]),
                                 MP_OK);
                assert_memory_equal(back16, half, sizeof half);
            } else {
                memcpy(want, x, sizeof x);
            }
            assert_memory_equal(back, want, sizeof want);
            int64_t ints[4], n[1] = {4}, v = 0;
            assert_int_equal(mp_h5r_array(r, "/rng/n", 1, n, ints, MP_H5_I64), MP_OK);
            assert_true(ints[2] == 1LL << 40 && ints[0] == -1);
            double scale = 0.0;
            assert_int_equal(mp_h5r_attr_double(r, "/scaler", "scale", &scale), MP_OK);
            assert_true(scale == 32768.5);
            assert_int_equal(mp_h5r_attr_int(r, "/meta", "format_version", &v), MP_OK);
            assert_int_equal(v, 1);
            char *kind = NULL;
            assert_int_equal(mp_h5r_attr_string(r, "/meta", "kind", &kind), MP_OK);
            assert_string_equal(kind, "full");
            free(kind);
            /* Wrong shape, missing dataset, missing attribute: named. */
            int64_t bad[3] = {3, 5, 8};
            assert_int_equal(mp_h5r_array(r, "/params/a.weight", 3, bad, back, MP_F32), MP_ECKPT);
            assert_non_null(strstr(mp_error_message(), "has shape [3, 5, 7], expected [3, 5, 8]"));
            assert_int_equal(mp_h5r_array(r, "/params/b", 3, s3, back, MP_F32), MP_ECKPT);
            assert_non_null(strstr(mp_error_message(), "has no dataset /params/b"));
            assert_int_equal(mp_h5r_attr_int(r, "/meta", "step", &v), MP_ECKPT);
            assert_non_null(strstr(mp_error_message(), "/meta has no attribute 'step'"));
            assert_int_equal(mp_h5r_attr_int(r, "/meta", "kind", &v), MP_ECKPT);
            mp_h5r_close(r);
        }
    assert_int_equal(mp_mem_current(MP_MEM_WORKSPACE), 0);
}

/* Flips one byte inside stored chunk `index` of dataset `name`. */
static void flip_chunk_byte(const char *p, const char *name, hsize_t index, int64_t at)
{
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), s = H5Dget_space(d);
    haddr_t addr = 0;
    hsize_t size = 0, offset[3];
    unsigned mask = 0;
    assert_true(H5Dget_chunk_info(d, s, index, offset, &mask, &addr, &size) >= 0);
    H5Sclose(s);
    H5Dclose(d);
    H5Fclose(f);
    assert_true((hsize_t)at < size);
    FILE *fp = fopen(p, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, (long)(addr + (haddr_t)at), SEEK_SET), 0);
    int c = fgetc(fp);
    assert_int_equal(fseek(fp, (long)(addr + (haddr_t)at), SEEK_SET), 0);
    fputc(c ^ 0x10, fp);
    fclose(fp);
}

static void test_flipped_byte(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "%s/flip.h5", mp_test_dir("h5_flip"));
    float x[105], back[105];
    int64_t s3[3] = {3, 5, 7};
    fill(x, 105, 2);
    for (int deflate = 0; deflate <= 1; deflate++) {
        write_file(path, MP_F32, deflate, x);
        flip_chunk_byte(path, "/params/a.weight", 0, 17);
        mp_h5r *r;
        assert_int_equal(mp_h5r_open(&r, path), MP_OK);
        assert_int_equal(mp_h5r_array(r, "/params/a.weight", 3, s3, back, MP_F32), MP_ECKPT);
        assert_non_null(strstr(mp_error_message(), "dataset /params/a.weight is corrupt"));
        mp_h5r_close(r);
        assert_int_equal(mp_checkpoint_inspect(path, stderr), MP_ECKPT);
    }
}

/* Raw stored chunk `i` of dataset d (H5Dread_chunk) into a new buffer; its size in *size. */
static uint8_t *raw_chunk(hid_t d, hsize_t i, hsize_t *size)
{
    hid_t s = H5Dget_space(d);
    haddr_t addr;
    hsize_t offset[MP_H5_MAX_DIMS];
    unsigned mask = 1;
    assert_true(H5Dget_chunk_info(d, s, i, offset, &mask, &addr, size) >= 0);
    H5Sclose(s);
    uint8_t *b = malloc(*size);
    assert_non_null(b);
    assert_true(H5Dread_chunk(d, H5P_DEFAULT, offset, &mask, b) >= 0);
    assert_int_equal(mask, 0);
    return b;
}

/* Dataset `name` of `p` written again by HDF5 itself (H5Dwrite, same creation properties) has
 * the same stored chunks, byte for byte; returns the number of chunks. */
static hsize_t same_chunks_as_hdf5(const char *p, const char *ref, const char *name)
{
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t type = H5Dget_type(d), space = H5Dget_space(d), dcpl = H5Dget_create_plist(d);
    size_t bytes = (size_t)H5Sget_simple_extent_npoints(space) * H5Tget_size(type);
    void *data = malloc(bytes);
    assert_non_null(data);
    assert_true(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    hid_t rf = H5Fcreate(ref, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t rd = H5Dcreate2(rf, "x", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(H5Dwrite(rd, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    hsize_t n = 0, rn = 0;
    assert_true(H5Dget_num_chunks(d, space, &n) >= 0 && H5Dget_num_chunks(rd, space, &rn) >= 0);
    assert_int_equal(n, rn);
    for (hsize_t i = 0; i < n; i++) {
        hsize_t size, rsize;
        uint8_t *ours = raw_chunk(d, i, &size), *theirs = raw_chunk(rd, i, &rsize);
        assert_int_equal(size, rsize);
        assert_memory_equal(ours, theirs, size);
        free(ours);
        free(theirs);
    }
    free(data);
    H5Dclose(rd);
    H5Fclose(rf);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(d);
    H5Fclose(f);
    return n;
}

/* Shapes that split into chunks along the middle and last dimensions with edge chunks (the
 * writer chunks up to 4 MiB by halving leading dimensions), at fp16, bf16 and FP32. */
static void test_many_chunks(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5_chunks");
    char ref[1100];
    snprintf(path, sizeof path, "%s/chunks.h5", dir);
    snprintf(ref, sizeof ref, "%s/ref.h5", dir);
    const char *names[] = {"/a", "/b", "/c"};
    int64_t shapes[3][3] = {{1, 5, 600000}, {2, 3000001, 1}, {5, 3, 100000}};
    int ndims[] = {3, 2, 3};
    mp_dtype dts[] = {MP_F16, MP_BF16, MP_F32};
    hsize_t want_chunks[] = {2, 4, 2}; /* (1, 3, 600000), (1, 1500001), (3, 3, 100000) */
    float *x = malloc(sizeof(float) * 6000002), *back = malloc(sizeof(float) * 6000002);
    assert_true(x && back);
    fill(x, 6000002, 5);
    for (int deflate = 0; deflate <= 1; deflate++) {
        mp_h5w *w;
        assert_int_equal(mp_h5w_open(&w, path, deflate), MP_OK);
        for (int k = 0; k < 3; k++)
            assert_int_equal(mp_h5w_array(w, names[k], dts[k], ndims[k], shapes[k], x, MP_F32),
                             MP_OK);
        assert_int_equal(mp_h5w_commit(w), MP_OK);
        mp_h5r *r;
        assert_int_equal(mp_h5r_open(&r, path), MP_OK);
        for (int k = 0; k < 3; k++) {
            int64_t n = shapes[k][0] * shapes[k][1] * (ndims[k] == 3 ? shapes[k][2] : 1);
            uint16_t *half = (uint16_t *)back;
            assert_int_equal(mp_h5r_array(r, names[k], ndims[k], shapes[k], back, dts[k]), MP_OK);
            if (dts[k] == MP_F32) {
                assert_memory_equal(back, x, (size_t)n * sizeof(float));
            } else {
                uint16_t *want = malloc((size_t)n * 2);
                mp_convert(want, dts[k], x, MP_F32, (size_t)n);
                assert_memory_equal(half, want, (size_t)n * 2);
                free(want);
            }
            if (deflate == 0)
                assert_int_equal(same_chunks_as_hdf5(path, ref, names[k]), want_chunks[k]);
        }
        mp_h5r_close(r);
        flip_chunk_byte(path, "/b", 3, 1000); /* the last, edge chunk */
        assert_int_equal(mp_h5r_open(&r, path), MP_OK);
        assert_int_equal(mp_h5r_array(r, "/b", 2, shapes[1], back, MP_BF16), MP_ECKPT);
        assert_non_null(strstr(mp_error_message(), "dataset /b is corrupt"));
        mp_h5r_close(r);
    }
    free(x);
    free(back);
    assert_int_equal(mp_mem_current(MP_MEM_WORKSPACE), 0);
}

static void test_abort_and_truncation(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5_abort");
    snprintf(path, sizeof path, "%s/keep.h5", dir);
    float x[105], y[105], back[105];
    int64_t s3[3] = {3, 5, 7};
    fill(x, 105, 3);
    fill(y, 105, 4);
    write_file(path, MP_F32, 0, x);
    mp_h5w *w;
    assert_int_equal(mp_h5w_open(&w, path, 0), MP_OK);
    assert_int_equal(mp_h5w_array(w, "/params/a.weight", MP_F32, 3, s3, y, MP_F32), MP_OK);
    char tmp[1100], named[1100];
    snprintf(tmp, sizeof tmp, "%s", mp_h5w_temp(w));
    mp_h5_temp_path(path, 0, named, sizeof named);
    assert_string_equal(tmp, named);
    assert_int_equal(access(tmp, F_OK), 0);
    mp_h5w_abort(w);
    assert_int_not_equal(access(tmp, F_OK), 0);
    mp_h5r *r;
    assert_int_equal(mp_h5r_open(&r, path), MP_OK);
    assert_int_equal(mp_h5r_array(r, "/params/a.weight", 3, s3, back, MP_F32), MP_OK);
    assert_memory_equal(back, x, sizeof x); /* the old contents, untouched */
    mp_h5r_close(r);
    assert_int_equal(truncate(path, 1500), 0);
    assert_int_equal(mp_h5r_open(&r, path), MP_ECKPT);
    assert_non_null(strstr(mp_error_message(), "not a readable HDF5 file, truncated"));
    assert_null(r);
    snprintf(path, sizeof path, "%s/no/such/dir/x.h5", dir);
    assert_int_equal(mp_h5w_open(&w, path, 0), MP_ECKPT);
    assert_non_null(strstr(mp_error_message(), "cannot create the checkpoint file"));
}

static void test_newer_format(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "%s/v2.h5", mp_test_dir("h5_version"));
    mp_h5w *w;
    assert_int_equal(mp_h5w_open(&w, path, 0), MP_OK);
    assert_int_equal(mp_h5w_attr_int(w, "/meta", "format_version", MP_CKPT_FORMAT + 1), MP_OK);
    assert_int_equal(mp_h5w_attr_string(w, "/meta", "kind", "full"), MP_OK);
    assert_int_equal(mp_h5w_commit(w), MP_OK);
    char want[64];
    snprintf(want, sizeof want, "format version %d is newer", MP_CKPT_FORMAT + 1);
    assert_int_equal(mp_checkpoint_inspect(path, stderr), MP_ECKPT);
    assert_non_null(strstr(mp_error_message(), want));
    assert_non_null(strstr(mp_error_message(), "is newer than this mpdist"));
    char out[1100];
    snprintf(out, sizeof out, "%s.out.h5", path); /* beside it */
    assert_int_equal(mp_checkpoint_export(path, out, MP_F16, false, NULL), MP_ECKPT);
    assert_non_null(strstr(mp_error_message(), want));
    assert_int_not_equal(access(out, F_OK), 0); /* nothing written */
}

/* A damaged object header (its version byte) is refused with HDF5's reason, naming the object
 * looked up, where it used to read as missing: under a dataset's path, and under attributes. */
static void test_damaged_header(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "%s/header.h5", mp_test_dir("h5_header"));
    float x[105];
    fill(x, 105, 5);
    write_file(path, MP_F32, 0, x);
    mp_test_h5_damage_header(path, "/rng");
    mp_test_h5_damage_header(path, "/scaler");
    mp_h5r *r;
    assert_int_equal(mp_h5r_open(&r, path), MP_OK);
    int64_t n[1] = {4}, ints[4];
    assert_int_equal(mp_h5r_array(r, "/rng/n", 1, n, ints, MP_H5_I64), MP_ECKPT);
    assert_non_null(strstr(mp_error_message(), "cannot look up /rng/n (bad object header "
                                                "version number)"));
    double scale;
    assert_int_equal(mp_h5r_attr_double(r, "/scaler", "scale", &scale), MP_ECKPT);
    assert_non_null(strstr(mp_error_message(), "cannot look up the attributes of /scaler (bad "
                                                "object header version number)"));
    assert_int_equal(mp_h5r_attr_int(r, "/scaler", "steps", &n[0]), MP_ECKPT);
    assert_non_null(strstr(mp_error_message(), "cannot look up the attributes of /scaler"));
    int64_t version;
    assert_int_equal(mp_h5r_attr_int(r, "/meta", "format_version", &version), MP_OK);
    assert_int_equal(version, 1);
    mp_h5r_close(r);
}

/* A file name of 250 bytes (legal: under 255) is written: its temporary keeps 200 of them. */
static void test_long_name(void **state)
{
    (void)state;
    char base[251];
    memset(base, 'a', 250);
    base[250] = '\0';
    snprintf(path, sizeof path, "%s/%s", mp_test_dir("h5_long"), base);
    char tmp[1100];
    mp_h5_temp_path(path, 7, tmp, sizeof tmp);
    const char *name = strrchr(tmp, '/') + 1;
    assert_true(strlen(name) <= 255);
    assert_int_equal(strncmp(name + 1, base, MP_H5_TEMP_BASE), 0);
    mp_h5w *w;
    assert_int_equal(mp_h5w_open(&w, path, 0), MP_OK);
    assert_int_equal(mp_h5w_attr_int(w, "/meta", "format_version", MP_CKPT_FORMAT), MP_OK);
    assert_int_equal(mp_h5w_commit(w), MP_OK);
    assert_int_equal(access(path, F_OK), 0);
}

static void test_directory(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5_dir");
    int64_t made[] = {300, 5, 1200, 40};
    for (size_t i = 0; i < 4; i++) {
        mp_ckpt_path(dir, made[i], path, sizeof path);
        mp_test_write_file(path, "x", 1, 0);
    }
    snprintf(path, sizeof path, "%s/.ckpt-00002000.h5.tmp", dir); /* a torn temporary */
    mp_test_write_file(path, "x", 1, 0);
    snprintf(path, sizeof path, "%s/ckpt-12.h5x", dir);
    mp_test_write_file(path, "x", 1, 0);
    int64_t steps[8];
    assert_int_equal(mp_ckpt_list(dir, steps, 8), 4);
    assert_true(steps[0] == 1200 && steps[1] == 300 && steps[2] == 40 && steps[3] == 5);
    /* 40 just written, by a run resumed from 5 past files of higher steps (another run's, or
     * damaged ones auto-resume skipped): those neither count nor go, so 5 stays */
    assert_int_equal(mp_ckpt_prune(dir, 3, 40), MP_OK);
    assert_int_equal(mp_ckpt_list(dir, steps, 8), 4);
    assert_true(steps[0] == 1200 && steps[1] == 300 && steps[2] == 40 && steps[3] == 5);
    assert_int_equal(mp_ckpt_prune(dir, 2, 1200), MP_OK);
    assert_int_equal(mp_ckpt_list(dir, steps, 8), 2);
    assert_true(steps[0] == 1200 && steps[1] == 300);
    assert_int_equal(mp_ckpt_prune(dir, 1, 300), MP_OK); /* 1200 is above: left */
    assert_int_equal(mp_ckpt_list(dir, steps, 8), 2);
    assert_true(steps[0] == 1200 && steps[1] == 300);
    mp_ckpt_path(dir, 40, path, sizeof path);
    mp_test_write_file(path, "x", 1, 0);
    assert_int_equal(mp_ckpt_prune(dir, 1, 300), MP_OK); /* keep 1: the lower 40 goes */
    assert_int_equal(mp_ckpt_list(dir, steps, 8), 2);
    assert_true(steps[0] == 1200 && steps[1] == 300);
    mp_ckpt_path(dir, 1200, path, sizeof path);
    assert_non_null(strstr(path, "/ckpt-00001200.h5"));
    assert_int_equal(mp_ckpt_list("/nonexistent/dir", steps, 8), 0);
    mp_ckpt_path(dir, 300, path, sizeof path); /* a file, not a directory: an error, not empty */
    assert_int_equal(mp_ckpt_list(path, steps, 8), -1);
    assert_non_null(strstr(mp_error_message(), "cannot read the checkpoint directory"));
    assert_int_equal(mp_ckpt_prune(path, 1, 300), MP_ECKPT);
}

/* A write the file system refuses (here a file size limit, EFBIG; a full disk, ENOSPC, comes the
 * same way) is one short line: HDF5's driver message cut to its reason ("file write failed: File
 * too large"), not its dump of time, descriptor, buffer and offsets cut mid-word. */
static void test_write_refused(void **state)
{
    (void)state;
    struct rlimit old, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of the signal */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    const char *dir = mp_test_dir("h5_fsize");
    mp_ckpt_path(dir, 1, path, sizeof path);
    int64_t shape[1] = {1 << 20};
    float *x = calloc((size_t)shape[0], sizeof *x);
    mp_h5w *w;
    mp_status st = mp_h5w_open(&w, path, 0);
    if (st == MP_OK && (st = mp_h5w_array(w, "/params/big", MP_F32, 1, shape, x, MP_F32)) == MP_OK)
        st = mp_h5w_commit(w);
    else if (st != MP_OK && w)
        mp_h5w_abort(w);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    free(x);
    assert_int_equal(st, MP_ECKPT);
    const char *msg = mp_error_message();
    if (!strstr(msg, "file write failed: File too large") || strstr(msg, "time =")) {
        print_error("message: %s\n", msg);
        fail();
    }
    assert_int_equal(access(path, F_OK), -1); /* no target, no half file */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_flipped_byte),
        cmocka_unit_test(test_many_chunks),
        cmocka_unit_test(test_abort_and_truncation),
        cmocka_unit_test(test_newer_format),
        cmocka_unit_test(test_damaged_header),
        cmocka_unit_test(test_long_name),
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_write_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
