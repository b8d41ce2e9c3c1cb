/* Fuzz target: checkpoints changed at the HDF5 object level, where byte flips rarely reach
 * (issue 45): a valid checkpoint of today's format (tests/fuzz/ckpt_base.h5, a 784-3-10 MLP at
 * O2 with SGD momentum) gets a list of edits made through HDF5's own API, so every checksum of
 * the file holds and only mpdist's checks stand between the edit and the loaded values. The
 * input is a sequence of 8-byte records:
 *   byte 0    which object: an attribute mpdist reads (ATTRS[b0 % n]) or, from NATTRS on, a
 *             dataset of DSETS
 *   byte 1    the edit (b1 % 7): 0 the value repeated COUNTS[b2 % 5] times (0, 1, 2, 64 or 1000;
 *             0 values: an empty dataspace), 1 a string of bytes 2-7, 2 a double from LIMITS[b2], 3 an int64 from
 *             LIMITS[b2], 4 removed, 5 an 8-bit unsigned of b2, 6 for a dataset: its values all
 *             set to LIMITS[b2] (zeros among them) with the digest left as it was, for an
 *             attribute: two strings
 * Then the file is inspected and exported as `mpdist inspect` and `mpdist export` do: each must
 * succeed or fail with MP_ECKPT (export also with MP_EUSAGE for a value beyond fp16's range, as
 * `mpdist export` says "export it with --dtype bf16 or fp32": an older format's file has no
 * digests to refuse an edited value), never crash, hang, leak or read out of bounds
 * (MPDIST_FUZZ_VERBOSE=1 prints what inspect said of each input). Seeds
 * (corpus/ckpt_objects/, made by make_ckpt_seeds.sh; the base file by the same script) hold the reproducers: /meta step as
 * two values, /scaler scale as 64, /data position and /meta step as 1000, a two-string kind,
 * zeroed parameters, and counters at their limits. */
#include <float.h>
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/checkpoint.h"

#ifndef MP_FUZZ_DIR
#define MP_FUZZ_DIR "tests/fuzz"
#endif

typedef struct attr_ref {
    const char *obj, *name;
} attr_ref;

static const attr_ref ATTRS[] = {
    {"/meta", "format_version"}, {"/meta", "kind"}, {"/meta", "step"}, {"/meta", "epoch"},
    {"/meta", "opt_level"}, {"/meta", "half"}, {"/meta", "world_size"},
    {"/meta", "global_batch"}, {"/meta", "mpdist_version"}, {"/meta", "model"},
    {"/meta", "config"}, {"/optim", "name"}, {"/optim", "steps"}, {"/optim", "slots"},
    {"/scaler", "scale"}, {"/scaler", "growth_tracker"}, {"/scaler", "hysteresis_left"},
    {"/scaler", "skipped_steps"}, {"/scaler", "consecutive_skips"}, {"/scaler", "dynamic"},
    {"/rng", "seed"}, {"/data", "epoch"}, {"/data", "position"}, {"/data", "batch_size"},
    {"/data", "accum_steps"}, {"/data", "world_size"}, {"/data", "dataset_size"},
    {"/params/fc1.weight", "mpdist_crc32"},
};
#define NATTRS ((int)(sizeof ATTRS / sizeof ATTRS[0]))
static const char *const DSETS[] = {"/params/fc1.weight", "/params/fc1.bias", "/params/fc2.bias",
                                    "/optim/fc1.weight/momentum_buffer", "/rng/state"};
#define NDSETS ((int)(sizeof DSETS / sizeof DSETS[0]))

static double limit(uint8_t k)
{
    static const double v[] = {0.0, -1.0, 1.0, 2.0, 1e-300, 1e300, 65536.0, 4294967296.0,
                               9.2233720368547758e18, -9.2233720368547758e18, FLT_MAX, FLT_MIN};
    if (k % 16 == 12)
        return NAN;
    if (k % 16 == 13)
        return INFINITY;
    if (k % 16 == 14)
        return -INFINITY;
    return v[k % 16 % 12];
}

static int64_t ilimit(uint8_t k)
{
    static const int64_t v[] = {0, -1, 1, 2, 3, 1000, 1001, 65536, INT32_MAX, INT64_MAX,
                                INT64_MIN, (int64_t)1 << 53, ((int64_t)1 << 53) + 1, 1 << 24};
    return v[k % 14];
}

/* Replaces attribute `name` of `obj` with n copies of a value of type t (from `v`). */
static void put(hid_t f, const char *obj, const char *name, hid_t t, const void *v, int n)
{
    H5Adelete_by_name(f, obj, name, H5P_DEFAULT);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = n == 1 ? H5Screate(H5S_SCALAR) : n == 0 ? H5Screate(H5S_NULL)
                                                          : H5Screate_simple(1, dims, NULL);
    hid_t a = H5Acreate_by_name(f, obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0 && n > 0) {
        size_t sz = H5Tget_size(t);
        unsigned char *buf = malloc(sz * (size_t)n);
        for (int i = 0; buf && i < n; i++)
            memcpy(buf + sz * (size_t)i, v, sz);
        if (buf)
            H5Awrite(a, t, buf);
        free(buf);
    }
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
}

static void edit_attr(hid_t f, const attr_ref *r, const uint8_t *p)
{
    int64_t i = ilimit(p[2]);
    double d = limit(p[2]);
    uint8_t u = p[2];
    hid_t s = H5Tcopy(H5T_C_S1);
    H5Tset_size(s, 7);
    switch (p[1] % 7) {
    case 0: { /* its first value, repeated: read it (every element, an earlier edit may have
               * made many) as raw bytes of its own type */
        hid_t a = H5Aopen_by_name(f, r->obj, r->name, H5P_DEFAULT, H5P_DEFAULT);
        hid_t t = a >= 0 ? H5Aget_type(a) : -1;
        hid_t sp = a >= 0 ? H5Aget_space(a) : -1;
        hssize_t nv = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
        if (sp >= 0)
            H5Sclose(sp);
        size_t sz = t >= 0 ? H5Tget_size(t) : 0;
        unsigned char *v = sz && sz < 65536 && nv >= 0 && nv <= 4096 &&
                                   !(t >= 0 && H5Tis_variable_str(t) > 0)
                               ? calloc(nv > 0 ? (size_t)nv : 1, sz)
                               : NULL;
        if (v && H5Aread(a, t, v) >= 0) {
            H5Aclose(a);
            a = -1;
            static const int counts[] = {0, 1, 2, 64, 1000};
            put(f, r->obj, r->name, t, v, counts[p[2] % 5]);
        }
        free(v);
        if (t >= 0)
            H5Tclose(t);
        if (a >= 0)
            H5Aclose(a);
        break;
    }
    case 1: {
        char text[8] = {0};
        memcpy(text, p + 2, 6);
        put(f, r->obj, r->name, s, text, 1);
        break;
    }
    case 2: put(f, r->obj, r->name, H5T_NATIVE_DOUBLE, &d, 1); break;
    case 3: put(f, r->obj, r->name, H5T_NATIVE_INT64, &i, 1); break;
    case 4: H5Adelete_by_name(f, r->obj, r->name, H5P_DEFAULT); break;
    case 5: put(f, r->obj, r->name, H5T_NATIVE_UINT8, &u, 1); break;
    default: put(f, r->obj, r->name, s, "fp8\0\0\0\0", 2); break;
    }
    H5Tclose(s);
}

/* Sets every value of dataset `path` to limit(k), leaving its digest as it was. */
static void fill_dataset(hid_t f, const char *path, uint8_t k)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0)
        return;
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (n > 0 && n < (1 << 20)) {
        double *v = malloc((size_t)n * sizeof *v);
        for (hssize_t j = 0; v && j < n; j++)
            v[j] = limit(k);
        if (v)
            H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        free(v);
    }
    H5Sclose(sp);
    H5Dclose(d);
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int ok = a && b;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0)
        ok = fwrite(buf, 1, n, b) == n;
    if (a)
        fclose(a);
    if (b && fclose(b) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[] = "/tmp/mpdist-fuzz-objs-XXXXXX", out[64];
    int fd = mkstemp(in);
    if (fd < 0)
        return 0;
    close(fd);
    snprintf(out, sizeof out, "%s.out.h5", in);
    if (copy_file(MP_FUZZ_DIR "/ckpt_base.h5", in) != 0) {
        fprintf(stderr, "fuzz_ckpt_objects: cannot copy %s\n", MP_FUZZ_DIR "/ckpt_base.h5");
        abort();
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(in, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        abort(); /* the base file must open */
    for (size_t off = 0; off + 8 <= size && off < 8 * 16; off += 8) {
        const uint8_t *p = data + off;
        int which = p[0] % (NATTRS + NDSETS);
        if (which < NATTRS)
            edit_attr(f, &ATTRS[which], p);
        else
            fill_dataset(f, DSETS[which - NATTRS], p[2]);
    }
    H5Fclose(f);
    FILE *sink = fopen("/dev/null", "w");
    if (sink) {
        mp_status st = mp_checkpoint_inspect(in, sink);
        if (st != MP_OK && st != MP_ECKPT)
            abort(); /* a checkpoint is refused as a checkpoint error, nothing else */
        if (getenv("MPDIST_FUZZ_VERBOSE")) /* what inspect said of each input */
            fprintf(stderr, "inspect: %s\n", st == MP_OK ? "ok" : mp_error_message());
        st = mp_checkpoint_export(in, out, MP_F16, (size & 1) != 0, NULL);
        bool too_wide = st == MP_EUSAGE && strstr(mp_error_message(), "beyond fp16's range");
        if (st != MP_OK && st != MP_ECKPT && !too_wide) {
            fprintf(stderr, "fuzz_ckpt_objects: export: status %d: %s\n", (int)st,
                    mp_error_message());
            abort();
        }
        fclose(sink);
    }
    unlink(out);
    unlink(in);
    return 0;
}
