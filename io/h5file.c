/* HDF5 reading and writing for checkpoints; see h5file.h. HDF5's own error printing is turned
 * off: a failed call is reported once, as one line, with the innermost message of HDF5's error
 * stack. Without deflate, chunks are written directly with the Fletcher32 value computed here
 * (io/fletcher32), which makes the same file as HDF5's filter at a quarter of the CPU time. Test hook: MPDIST_TEST_CKPT_KILL_AFTER=N makes the process kill itself (SIGKILL) once
 * it has written N datasets in all (counting over every file it wrote), a crash between the
 * datasets of a checkpoint. */
#include "io/h5file.h"
#include "io/h5_digest.h"
#include "io/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/check.h"
#include "io/fletcher32.h"
#include "io/h5_gheap.h"

#define MP_H5_CHUNK_BYTES ((int64_t)4 << 20)

struct mp_h5w {
    hid_t file, lcpl;
    int deflate;
    char path[1024], tmp[1060];
};

struct mp_h5r {
    hid_t file;
    bool heaps_checked; /* mp_h5_check_global_heaps passed (files with variable strings) */
    bool need_digests;  /* every dataset must carry its digest (mp_h5r_require_digests) */
    char path[1024];
};

static herr_t innermost(unsigned n, const H5E_error2_t *e, void *arg)
{
    char *buf = arg;
    if (n == 0 && e->desc)
        snprintf(buf, 256, "%s", e->desc);
    return 0;
}

static char mp_h5_last[256];

/* Keeps the innermost message of HDF5's error stack for h5_message (then clears the stack).
 * Call it right after the failing call: any later HDF5 call starts a new stack. */
static void grab(void)
{
    mp_h5_last[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, mp_h5_last);
    H5Eclear2(H5E_DEFAULT);
}

/* The message grab() kept, or the current stack's when nothing was kept. */
static const char *h5_message(void)
{
    if (!mp_h5_last[0])
        grab();
    return mp_h5_last[0] ? mp_h5_last : "unknown HDF5 error";
}

#define MP_H5_OK(rc) ((rc) >= 0)
#define H5_CHECK(stmt) \
    MP_LIB_CHECK("HDF5", MP_ECKPT, int64_t, (int64_t)(stmt), MP_H5_OK, checked_message)

/* For H5_CHECK: the message of the call that just failed. */
static const char *checked_message(int64_t rc)
{
    (void)rc;
    grab();
    return h5_message();
}

/* HDF5's own messages off; and, before the library first starts, its exit-time clean-up off
 * (mp_h5_no_atexit). */
static void quiet(void)
{
    mp_h5_no_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void mp_h5_no_atexit(void)
{
    static bool done;
    if (!done)
        H5dont_atexit(); /* refused, harmlessly, once the library has started */
    done = true;
}


/* The HDF5 file type of a dtype (a new id the caller closes), or -1. */
static hid_t file_type(mp_dtype dt)
{
    hid_t t = -1;
    switch ((int)dt) {
    case MP_F32: return H5Tcopy(H5T_IEEE_F32LE);
    case MP_F64: return H5Tcopy(H5T_IEEE_F64LE);
    case MP_H5_I64: return H5Tcopy(H5T_STD_I64LE);
    case MP_F16:
    case MP_BF16: /* IEEE binary16, or bfloat16: FP32's exponent with 7 mantissa bits */
        t = H5Tcopy(H5T_IEEE_F32LE);
        if (dt == MP_F16)
            H5Tset_fields(t, 15, 10, 5, 0, 10);
        else
            H5Tset_fields(t, 15, 7, 8, 0, 7);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, dt == MP_F16 ? 15 : 127);
        return t;
    default: return -1;
    }
}

/* The dtype a stored HDF5 type holds, or -1 when it is none of ours. */
static int stored_dtype(hid_t t)
{
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    if (cls == H5T_INTEGER && size == 8 && H5Tget_sign(t) == H5T_SGN_2)
        return MP_H5_I64;
    if (cls != H5T_FLOAT)
        return -1;
    if (size == 4)
        return MP_F32;
    if (size == 8)
        return MP_F64;
    size_t spos, epos, esize, mpos, msize;
    if (size != 2 || H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0)
        return -1;
    if (spos == 15 && esize == 5 && msize == 10 && H5Tget_ebias(t) == 15)
        return MP_F16;
    if (spos == 15 && esize == 8 && msize == 7 && H5Tget_ebias(t) == 127)
        return MP_BF16;
    return -1;
}

mp_status mp_h5w_open(mp_h5w **out, const char *path, int deflate)
{
    quiet();
    *out = NULL;
    mp_h5w *w = calloc(1, sizeof *w);
    if (!w)
        return mp_fail(MP_ECKPT, "%s: out of memory", path);
    snprintf(w->path, sizeof w->path, "%s", path);
    w->deflate = deflate;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    int err = 0;
    w->file = -1;
    for (unsigned attempt = 0; attempt < 100 && w->file < 0; attempt++) {
        mp_h5_temp_path(path, attempt, w->tmp, sizeof w->tmp);
        mp_h5_last[0] = '\0';
        errno = 0;
        w->file = H5Fcreate(w->tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
        err = errno;
        if (w->file < 0)
            grab();
        if (w->file < 0 && err != EEXIST)
            break;
    }
    H5Pclose(fapl);
    if (w->file < 0) {
        mp_status st = mp_fail(MP_ECKPT, "%s: cannot create the checkpoint file (%s: %s)",
                               w->tmp, h5_message(), strerror(err));
        free(w);
        return st;
    }
    w->lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(w->lcpl, 1);
    *out = w;
    return MP_OK;
}

const char *mp_h5w_temp(const mp_h5w *w) { return w->tmp; }

/* Opens group `obj`, creating it (and its parents) when missing. */
static hid_t open_group(mp_h5w *w, const char *obj)
{
    hid_t g = H5Gopen2(w->file, obj, H5P_DEFAULT);
    if (g < 0) {
        H5Eclear2(H5E_DEFAULT);
        g = H5Gcreate2(w->file, obj, w->lcpl, H5P_DEFAULT, H5P_DEFAULT);
    }
    return g;
}

static mp_status write_attr(mp_h5w *w, const char *obj, const char *name, hid_t type,
                            const void *v)
{
    mp_h5_last[0] = '\0';
    hid_t g = open_group(w, obj), space = H5Screate(H5S_SCALAR), a = -1;
    if (g >= 0)
        a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a >= 0 ? H5Awrite(a, type, v) : -1;
    if (rc < 0)
        grab();
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    if (g >= 0)
        H5Gclose(g);
    if (rc < 0)
        return mp_fail(MP_ECKPT, "%s: cannot write attribute %s of %s (%s)", w->tmp, name, obj,
                       h5_message());
    return MP_OK;
}

mp_status mp_h5w_attr_int(mp_h5w *w, const char *obj, const char *name, int64_t v)
{
    return write_attr(w, obj, name, H5T_NATIVE_INT64, &v);
}

mp_status mp_h5w_attr_double(mp_h5w *w, const char *obj, const char *name, double v)
{
    return write_attr(w, obj, name, H5T_NATIVE_DOUBLE, &v);
}

/* Strings are fixed-length (their bytes and a NUL): they live in the attribute message, under
 * the object header's checksum, where variable-length ones would live in a global heap that
 * has none (io/h5_gheap.h). */
mp_status mp_h5w_attr_string(mp_h5w *w, const char *obj, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    H5Tset_cset(t, H5T_CSET_UTF8);
    mp_status st = write_attr(w, obj, name, t, v);
    H5Tclose(t);
    return st;
}

/* Chunk shape: the whole array, halved along the leading dimensions until a chunk holds at
 * most MP_H5_CHUNK_BYTES. */
static void chunk_shape(int ndim, const int64_t *shape, size_t elem, hsize_t *chunk)
{
    int64_t bytes = (int64_t)elem;
    for (int d = 0; d < ndim; d++) {
        chunk[d] = (hsize_t)shape[d];
        bytes *= shape[d];
    }
    for (int d = 0; d < ndim; d++)
        while (bytes > MP_H5_CHUNK_BYTES && chunk[d] > 1) {
            bytes = bytes / (int64_t)chunk[d] * (int64_t)((chunk[d] + 1) / 2);
            chunk[d] = (chunk[d] + 1) / 2;
        }
}

/* Chunking, then deflate, then Fletcher32 (the checksum covers the stored, compressed bytes). */
static mp_status set_filters(hid_t dcpl, int ndim, const hsize_t *chunk, int deflate)
{
    H5_CHECK(H5Pset_chunk(dcpl, ndim, chunk));
    if (deflate > 0)
        H5_CHECK(H5Pset_deflate(dcpl, (unsigned)deflate));
    H5_CHECK(H5Pset_fletcher32(dcpl));
    return MP_OK;
}

/* Copies the chunk at `offset` of the row-major array `src` into buf, zeros where the chunk
 * reaches past the array (HDF5 stores edge chunks whole, padded with the fill value 0), and adds
 * buf's bytes to the checksum f in order, in the same pass. Trailing dimensions the chunk covers
 * whole are merged into the one before them first, so that each copied run is as long as the
 * layout allows (one run per chunk for a matrix chunked by rows). */
static void gather_chunk(int ndim, const hsize_t *dims, const hsize_t *chunk,
                         const hsize_t *offset, size_t elem, const uint8_t *src, uint8_t *buf,
                         mp_fletcher32 *f)
{
    hsize_t D[MP_H5_MAX_DIMS], C[MP_H5_MAX_DIMS], O[MP_H5_MAX_DIMS], stride[MP_H5_MAX_DIMS];
    hsize_t idx[MP_H5_MAX_DIMS] = {0}, inner = elem;
    int t = ndim - 1;
    for (; t > 0 && chunk[t] == dims[t]; t--)
        inner *= dims[t];
    for (int d = 0; d <= t; d++) {
        D[d] = dims[d];
        C[d] = chunk[d];
        O[d] = offset[d];
    }
    D[t] *= inner; /* the last merged dimension counts bytes */
    C[t] *= inner;
    O[t] *= inner;
    stride[t] = 1;
    for (int d = t - 1; d >= 0; d--)
        stride[d] = stride[d + 1] * D[d + 1];
    for (;;) {
        hsize_t at = O[t], n = C[t] < D[t] - O[t] ? C[t] : D[t] - O[t];
        for (int d = 0; d < t; d++) {
            if (O[d] + idx[d] >= D[d])
                n = 0;
            at += (O[d] + idx[d]) * stride[d];
        }
        if (n)
            mp_fletcher32_update(f, buf, src + at, n);
        memset(buf + n, 0, C[t] - n);
        mp_fletcher32_update(f, NULL, buf + n, C[t] - n);
        buf += C[t];
        int d = t - 1;
        while (d >= 0 && ++idx[d] == C[d])
            idx[d--] = 0;
        if (d < 0)
            return;
    }
}

/* Writes every chunk of dataset d with H5Dwrite_chunk, each followed by the Fletcher32 value
 * HDF5's filter would have appended (little-endian), so HDF5 neither copies nor checksums the
 * data again: one pass over memory, then the write. The file is the same as H5Dwrite makes. */
static herr_t write_chunks(hid_t d, int ndim, const hsize_t *dims, const hsize_t *chunk,
                           size_t elem, const void *src)
{
    size_t bytes = elem;
    for (int k = 0; k < ndim; k++)
        bytes *= chunk[k];
    uint8_t *buf = mp_alloc(bytes + 4, MP_MEM_WORKSPACE);
    hsize_t offset[MP_H5_MAX_DIMS] = {0};
    herr_t rc = 0;
    for (int k = 0; k >= 0 && rc >= 0;) {
        mp_fletcher32 f;
        mp_fletcher32_init(&f);
        gather_chunk(ndim, dims, chunk, offset, elem, src, buf, &f);
        uint32_t sum = mp_fletcher32_value(&f);
        for (int b = 0; b < 4; b++)
            buf[bytes + (size_t)b] = (uint8_t)(sum >> (8 * b));
        rc = H5Dwrite_chunk(d, H5P_DEFAULT, 0, offset, bytes + 4, buf);
        for (k = ndim - 1; k >= 0 && (offset[k] += chunk[k]) >= dims[k]; k--)
            offset[k] = 0;
    }
    mp_free(buf);
    return rc;
}

/* Stores digest v as the dataset's attribute MP_H5_DIGEST_ATTR. */
static herr_t put_digest(hid_t d, uint32_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(d, MP_H5_DIGEST_ATTR, H5T_STD_U32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a >= 0 ? H5Awrite(a, H5T_NATIVE_UINT32, &v) : -1;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

/* Creates dataset `path` and writes it: chunk by chunk directly without deflate, through HDF5's
 * filters (deflate, then Fletcher32) with it; then its digest (io/h5_digest.h), taken from the
 * bytes in memory. */
static mp_status write_dataset(mp_h5w *w, const char *path, hid_t type, int ndim,
                               const int64_t *shape, const void *bytes)
{
    hsize_t dims[MP_H5_MAX_DIMS], chunk[MP_H5_MAX_DIMS];
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        dims[d] = (hsize_t)shape[d];
        numel *= shape[d];
    }
    size_t elem = H5Tget_size(type);
    hid_t space = H5Screate_simple(ndim, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (numel > 0) {
        chunk_shape(ndim, shape, elem, chunk);
        mp_status st = set_filters(dcpl, ndim, chunk, w->deflate);
        if (st != MP_OK) {
            H5Pclose(dcpl);
            H5Sclose(space);
            return st;
        }
    }
    mp_h5_last[0] = '\0';
    hid_t d = H5Dcreate2(w->file, path, type, space, w->lcpl, dcpl, H5P_DEFAULT);
    herr_t rc = d >= 0 ? 0 : -1;
    if (d >= 0 && numel > 0)
        rc = w->deflate > 0 ? H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes)
                            : write_chunks(d, ndim, dims, chunk, elem, bytes);
    if (rc >= 0)
        rc = put_digest(d, mp_h5_digest(path, elem, ndim, shape, bytes, (size_t)numel * elem));
    if (rc < 0)
        grab();
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (rc < 0)
        return mp_fail(MP_ECKPT, "%s: cannot write dataset %s (%s)", w->tmp, path, h5_message());
    return MP_OK;
}

mp_status mp_h5w_array(mp_h5w *w, const char *path, mp_dtype dtype, int ndim,
                       const int64_t *shape, const void *data, mp_dtype src)
{
    if (ndim < 1 || ndim > MP_H5_MAX_DIMS || (dtype == MP_H5_I64) != (src == MP_H5_I64))
        return mp_fail(MP_EINTERNAL, "h5file: dataset %s: bad rank or dtype", path);
    hid_t type = file_type(dtype);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    const void *bytes = data;
    void *conv = NULL;
    if (dtype != src) {
        conv = mp_alloc((size_t)numel * mp_dtype_size(dtype) + 1, MP_MEM_WORKSPACE);
        mp_convert(conv, dtype, data, src, (size_t)numel);
        bytes = conv;
    }
    mp_status st = write_dataset(w, path, type, ndim, shape, bytes);
    mp_free(conv);
    H5Tclose(type);
    static int written; /* datasets this process wrote, for the test hook */
    const char *kill_after = getenv("MPDIST_TEST_CKPT_KILL_AFTER");
    if (st == MP_OK && kill_after && ++written >= atoi(kill_after)) {
        H5Fflush(w->file, H5F_SCOPE_GLOBAL);
        raise(SIGKILL);
    }
    return st;
}

static mp_status sync_path(const char *path, const char *what)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return mp_fail(MP_ECKPT, "%s: cannot fsync the %s (%s)", path, what, strerror(e));
    }
    close(fd);
    return MP_OK;
}

mp_status mp_h5w_commit(mp_h5w *w)
{
    H5Pclose(w->lcpl);
    mp_h5_last[0] = '\0';
    herr_t rc = H5Fflush(w->file, H5F_SCOPE_GLOBAL);
    if (rc < 0)
        grab();
    if (H5Fclose(w->file) < 0 || rc < 0) {
        mp_status st = mp_fail(MP_ECKPT, "%s: cannot flush the checkpoint (%s)", w->tmp,
                               h5_message());
        unlink(w->tmp);
        free(w);
        return st;
    }
    mp_status st = sync_path(w->tmp, "checkpoint");
    if (st == MP_OK && rename(w->tmp, w->path) != 0)
        st = mp_fail(MP_ECKPT, "%s: cannot rename it to %s (%s)", w->tmp, w->path,
                     strerror(errno));
    if (st == MP_OK) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", w->path);
        st = sync_path(dirname(dir), "checkpoint directory");
    } else {
        unlink(w->tmp);
    }
    free(w);
    return st;
}

void mp_h5w_abort(mp_h5w *w)
{
    if (!w)
        return;
    H5Pclose(w->lcpl);
    H5Fclose(w->file);
    H5Eclear2(H5E_DEFAULT);
    unlink(w->tmp);
    free(w);
}

mp_status mp_h5r_open(mp_h5r **out, const char *path)
{
    quiet();
    *out = NULL;
    const char *why; /* checked without blocking: a FIFO must never reach H5Fopen */
    int fd = mp_open_regular(path, NULL, &why);
    if (fd < 0 && errno == EINVAL)
        return mp_fail(MP_ECKPT, "%s: not a checkpoint file (%s)", path, why);
    if (fd < 0)
        return mp_fail(MP_ECKPT, "%s: cannot open the checkpoint (%s)", path, why);
    close(fd);
    mp_h5_last[0] = '\0';
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return mp_fail(MP_ECKPT, "%s: not a readable HDF5 file, truncated or damaged (%s)", path,
                       h5_message());
    mp_h5r *r = calloc(1, sizeof *r);
    if (!r) {
        H5Fclose(f);
        return mp_fail(MP_ECKPT, "%s: out of memory", path);
    }
    r->file = f;
    snprintf(r->path, sizeof r->path, "%s", path);
    *out = r;
    return MP_OK;
}

const char *mp_h5r_path(const mp_h5r *r) { return r->path; }

bool mp_h5r_exists(mp_h5r *r, const char *path)
{
    /* H5Lexists needs every parent to exist: check each prefix. */
    char buf[512];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return false;
    for (size_t i = 1; i <= n; i++)
        if (path[i] == '/' || path[i] == '\0') {
            memcpy(buf, path, i);
            buf[i] = '\0';
            if (H5Lexists(r->file, buf, H5P_DEFAULT) <= 0) {
                H5Eclear2(H5E_DEFAULT);
                return false;
            }
        }
    return true;
}

/* The number of values attribute `name` of `obj` holds (1 for a scalar), or -1 when it cannot
 * be opened. */
static long long attr_values(mp_h5r *r, const char *obj, const char *name)
{
    hid_t a = H5Aopen_by_name(r->file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = a >= 0 ? H5Aget_space(a) : -1;
    long long n = sp >= 0 ? (long long)H5Sget_simple_extent_npoints(sp) : -1;
    if (sp >= 0)
        H5Sclose(sp);
    if (a >= 0)
        H5Aclose(a);
    H5Eclear2(H5E_DEFAULT);
    return n;
}

bool mp_h5r_has_attr(mp_h5r *r, const char *obj, const char *name)
{
    bool has = mp_h5r_exists(r, obj) && H5Aexists_by_name(r->file, obj, name, H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    return has;
}

/* MP_OK when attribute `name` of `obj` exists and holds exactly one value (a scalar, as mpdist
 * writes them, or an array of one): an attribute of several values is never read into one. */
static mp_status attr_one(mp_h5r *r, const char *obj, const char *name)
{
    if (!mp_h5r_exists(r, obj) || H5Aexists_by_name(r->file, obj, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return mp_fail(MP_ECKPT, "%s: %s has no attribute '%s' (not an mpdist checkpoint, or a "
                       "damaged one)", r->path, obj, name);
    }
    long long n = attr_values(r, obj, name);
    if (n != 1)
        return mp_fail(MP_ECKPT, "%s: attribute %s of %s holds %lld values, expected one (not "
                       "an mpdist checkpoint, or a damaged one)", r->path, name, obj, n);
    return MP_OK;
}

/* Reads attribute `name` of `obj`, one value of class `cls`, as memory type `mem` into v. */
static mp_status read_attr(mp_h5r *r, const char *obj, const char *name, H5T_class_t cls,
                           hid_t mem, void *v)
{
    MP_TRY(attr_one(r, obj, name));
    mp_h5_last[0] = '\0';
    hid_t a = H5Aopen_by_name(r->file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    bool ok = t >= 0 && H5Tget_class(t) == cls && H5Aread(a, mem, v) >= 0;
    if (!ok)
        grab();
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    if (!ok)
        return mp_fail(MP_ECKPT, "%s: attribute %s of %s cannot be read as a %s (%s)", r->path,
                       name, obj, cls == H5T_STRING ? "string" : "number", h5_message());
    return MP_OK;
}

mp_status mp_h5r_attr_int(mp_h5r *r, const char *obj, const char *name, int64_t *v)
{
    return read_attr(r, obj, name, H5T_INTEGER, H5T_NATIVE_INT64, v);
}

mp_status mp_h5r_attr_double(mp_h5r *r, const char *obj, const char *name, double *v)
{
    return read_attr(r, obj, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, v);
}

/* The stored string type of attribute `name` of `obj`: *variable, or its fixed *size, and its
 * character set (ASCII, as other tools may write, or UTF-8, as mpdist does): read as stored,
 * since HDF5 converts neither into the other. */
static mp_status string_kind(mp_h5r *r, const char *obj, const char *name, bool *variable,
                             size_t *size, H5T_cset_t *cset)
{
    hid_t a = H5Aopen_by_name(r->file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    htri_t var = t >= 0 && H5Tget_class(t) == H5T_STRING ? H5Tis_variable_str(t) : -1;
    *size = t >= 0 ? H5Tget_size(t) : 0;
    *cset = var >= 0 ? H5Tget_cset(t) : H5T_CSET_UTF8;
    if (*cset != H5T_CSET_ASCII)
        *cset = H5T_CSET_UTF8;
    *variable = var > 0;
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    H5Eclear2(H5E_DEFAULT);
    if (var < 0 || (!*variable && (*size == 0 || *size > ((size_t)1 << 24))))
        return mp_fail(MP_ECKPT, "%s: attribute %s of %s is not a string (not an mpdist "
                       "checkpoint, or a damaged one)", r->path, name, obj);
    return MP_OK;
}

/* Today's files hold fixed-length strings; older ones variable-length strings, read only once
 * the file's global heaps are checked (mp_h5_check_global_heaps). */
mp_status mp_h5r_attr_string(mp_h5r *r, const char *obj, const char *name, char **v)
{
    *v = NULL;
    MP_TRY(attr_one(r, obj, name));
    bool variable;
    size_t size;
    H5T_cset_t cset;
    MP_TRY(string_kind(r, obj, name, &variable, &size, &cset));
    if (variable && !r->heaps_checked) {
        MP_TRY(mp_h5_check_global_heaps(r->path));
        r->heaps_checked = true;
    }
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, variable ? H5T_VARIABLE : size + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    H5Tset_cset(t, cset);
    char *s = NULL;
    mp_status st;
    if (variable) {
        st = read_attr(r, obj, name, H5T_STRING, t, &s);
        if (st == MP_OK)
            *v = strdup(s ? s : "");
        H5free_memory(s);
    } else {
        s = mp_alloc(size + 1, MP_MEM_WORKSPACE);
        st = read_attr(r, obj, name, H5T_STRING, t, s);
        s[size] = '\0';
        if (st == MP_OK)
            *v = strdup(s);
        mp_free(s);
    }
    H5Tclose(t);
    if (st == MP_OK && !*v)
        return mp_fail(MP_ECKPT, "%s: out of memory reading attribute %s", r->path, name);
    return st;
}

mp_status mp_h5r_info(mp_h5r *r, const char *path, int *ndim, int64_t shape[MP_H5_MAX_DIMS],
                      mp_dtype *dtype)
{
    if (!mp_h5r_exists(r, path))
        return mp_fail(MP_ECKPT, "%s: has no dataset %s", r->path, path);
    mp_h5_last[0] = '\0';
    hid_t d = H5Dopen2(r->file, path, H5P_DEFAULT);
    if (d < 0)
        return mp_fail(MP_ECKPT, "%s: %s is not a readable dataset (%s)", r->path, path,
                       h5_message());
    hid_t s = H5Dget_space(d), t = H5Dget_type(d);
    hsize_t dims[MP_H5_MAX_DIMS];
    int nd = H5Sget_simple_extent_ndims(s);
    int dt = stored_dtype(t);
    if (nd >= 1 && nd <= MP_H5_MAX_DIMS)
        H5Sget_simple_extent_dims(s, dims, NULL);
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(d);
    if (nd < 1 || nd > MP_H5_MAX_DIMS || dt < 0)
        return mp_fail(MP_ECKPT, "%s: dataset %s has a rank or element type mpdist does not "
                       "write", r->path, path);
    *ndim = nd;
    for (int k = 0; k < nd; k++)
        shape[k] = (int64_t)dims[k];
    *dtype = (mp_dtype)dt;
    return MP_OK;
}


void mp_h5r_require_digests(mp_h5r *r) { r->need_digests = true; }

/* Compares the digest stored beside open dataset d (path) with its bytes as read. A dataset
 * without one passes unless r requires digests. */
static mp_status check_digest(mp_h5r *r, hid_t d, const char *path, size_t elem, int ndim,
                              const int64_t *shape, const void *raw, size_t bytes)
{
    htri_t has = H5Aexists(d, MP_H5_DIGEST_ATTR);
    if (has <= 0) {
        H5Eclear2(H5E_DEFAULT);
        if (!r->need_digests)
            return MP_OK;
        return mp_fail(MP_ECKPT, "%s: dataset %s has no digest (%s): not written whole by "
                       "mpdist, or a damaged file", r->path, path, MP_H5_DIGEST_ATTR);
    }
    hid_t a = H5Aopen(d, MP_H5_DIGEST_ATTR, H5P_DEFAULT);
    hid_t sp = a >= 0 ? H5Aget_space(a) : -1, t = a >= 0 ? H5Aget_type(a) : -1;
    uint32_t want = 0;
    bool ok = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1 && t >= 0 &&
              H5Tget_class(t) == H5T_INTEGER && H5Aread(a, H5T_NATIVE_UINT32, &want) >= 0;
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (a >= 0)
        H5Aclose(a);
    H5Eclear2(H5E_DEFAULT);
    if (!ok)
        return mp_fail(MP_ECKPT, "%s: dataset %s: its digest %s is not one 32-bit integer (a "
                       "damaged file)", r->path, path, MP_H5_DIGEST_ATTR);
    uint32_t got = mp_h5_digest(path, elem, ndim, shape, raw, bytes);
    if (got != want)
        return mp_fail(MP_ECKPT, "%s: dataset %s does not match its digest (0x%08x, stored "
                       "0x%08x): its values are not the ones mpdist wrote (zeroed, overwritten "
                       "or damaged)", r->path, path, got, want);
    return MP_OK;
}

mp_status mp_h5r_array(mp_h5r *r, const char *path, int ndim, const int64_t *shape, void *data,
                       mp_dtype dst)
{
    int nd;
    int64_t have[MP_H5_MAX_DIMS];
    mp_dtype stored;
    MP_TRY(mp_h5r_info(r, path, &nd, have, &stored));
    bool same = nd == ndim;
    int64_t numel = 1;
    for (int k = 0; same && k < nd; k++) {
        same = have[k] == shape[k];
        numel *= have[k];
    }
    if (!same) {
        char a[96], b[96];
        mp_h5_shape_text(nd, have, a, sizeof a);
        mp_h5_shape_text(ndim, shape, b, sizeof b);
        return mp_fail(MP_ECKPT, "%s: dataset %s has shape %s, expected %s (a checkpoint of "
                       "another model?)", r->path, path, a, b);
    }
    if ((stored == MP_H5_I64) != (dst == MP_H5_I64))
        return mp_fail(MP_ECKPT, "%s: dataset %s holds %s, expected %s", r->path, path,
                       stored == MP_H5_I64 ? "integers" : "floats",
                       dst == MP_H5_I64 ? "integers" : "floats");
    if (numel == 0)
        return MP_OK;
    hid_t mem = file_type(stored); /* little-endian hosts: the stored bytes as they are */
    size_t elem = H5Tget_size(mem);
    void *raw = stored == dst ? data : mp_alloc((size_t)numel * elem, MP_MEM_WORKSPACE);
    mp_h5_last[0] = '\0';
    hid_t d = H5Dopen2(r->file, path, H5P_DEFAULT);
    herr_t rc = d >= 0 ? H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) : -1;
    if (rc < 0)
        grab();
    H5Tclose(mem);
    mp_status st = MP_OK;
    if (rc < 0)
        st = mp_fail(MP_ECKPT, "%s: dataset %s is corrupt (%s)", r->path, path, h5_message());
    else
        st = check_digest(r, d, path, elem, nd, have, raw, (size_t)numel * elem);
    if (d >= 0)
        H5Dclose(d);
    if (st == MP_OK && raw != data)
        mp_convert(data, dst, raw, stored, (size_t)numel);
    if (raw != data)
        mp_free(raw);
    return st;
}

typedef struct member_walk {
    mp_status (*fn)(const char *name, void *arg);
    void *arg;
    mp_status st;
} member_walk;

static herr_t member(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)g;
    (void)info;
    member_walk *mw = arg;
    mw->st = mw->fn(name, mw->arg);
    return mw->st == MP_OK ? 0 : 1;
}

mp_status mp_h5r_members(mp_h5r *r, const char *group,
                         mp_status (*fn)(const char *name, void *arg), void *arg)
{
    if (!mp_h5r_exists(r, group))
        return mp_fail(MP_ECKPT, "%s: has no group %s", r->path, group);
    mp_h5_last[0] = '\0';
    hid_t g = H5Gopen2(r->file, group, H5P_DEFAULT);
    if (g < 0)
        return mp_fail(MP_ECKPT, "%s: %s is not a group (%s)", r->path, group, h5_message());
    member_walk mw = {fn, arg, MP_OK};
    mp_h5_last[0] = '\0';
    herr_t rc = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, member, &mw);
    if (rc < 0)
        grab();
    H5Gclose(g);
    if (mw.st != MP_OK)
        return mw.st;
    if (rc < 0)
        return mp_fail(MP_ECKPT, "%s: cannot list group %s (%s)", r->path, group, h5_message());
    return MP_OK;
}

void mp_h5r_close(mp_h5r *r)
{
    if (!r)
        return;
    H5Fclose(r->file);
    H5Eclear2(H5E_DEFAULT);
    free(r);
}
