/* HDF5 writing for checkpoints (the reader is io/h5_read.c); see h5file.h. Without deflate,
 * chunks are written directly with the Fletcher32 value computed here (io/fletcher32), which
 * makes the same file as HDF5's filter at a quarter of the CPU time. Test hook:
 * MPDIST_TEST_CKPT_KILL_AFTER=N makes the process send itself SIGKILL (or the signal numbered
 * MPDIST_TEST_CKPT_KILL_SIGNAL) once it has written N datasets in all (counting over every file
 * it wrote): a crash, or a signal, between the datasets of a file. */
#include "io/h5_internal.h"
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
#include "io/temp_guard.h"

#define MP_H5_CHUNK_BYTES ((int64_t)4 << 20)

struct mp_h5w {
    hid_t file, lcpl;
    int deflate;
    int guard; /* the temporary's slot in io/temp_guard.h, or -1 */
    char path[1024], tmp[1060];
};


mp_status mp_h5w_open(mp_h5w **out, const char *path, int deflate)
{
    mp_h5_quiet();
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
        mp_h5_forget();
        errno = 0;
        w->file = H5Fcreate(w->tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
        err = errno;
        if (w->file < 0)
            mp_h5_grab();
        if (w->file < 0 && err != EEXIST)
            break;
    }
    H5Pclose(fapl);
    if (w->file < 0) {
        mp_status st = err ? mp_fail(MP_ECKPT, "%s: cannot create the checkpoint file (its "
                                     "temporary %s: %s)", path, w->tmp, strerror(err))
                           : mp_fail(MP_ECKPT, "%s: cannot create the checkpoint file (its "
                                     "temporary %s: %s)", path, w->tmp, mp_h5_message());
        free(w);
        return st;
    }
    w->guard = mp_temp_guard_add(w->tmp);
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
    mp_h5_forget();
    hid_t g = open_group(w, obj), space = H5Screate(H5S_SCALAR), a = -1;
    if (g >= 0)
        a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a >= 0 ? H5Awrite(a, type, v) : -1;
    if (rc < 0)
        mp_h5_grab();
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    if (g >= 0)
        H5Gclose(g);
    if (rc < 0)
        return mp_fail(MP_ECKPT, "%s: cannot write attribute %s of %s (%s)", w->tmp, name, obj,
                       mp_h5_message());
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
    mp_h5_forget();
    hid_t d = H5Dcreate2(w->file, path, type, space, w->lcpl, dcpl, H5P_DEFAULT);
    herr_t rc = d >= 0 ? 0 : -1;
    if (d >= 0 && numel > 0)
        rc = w->deflate > 0 ? H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes)
                            : write_chunks(d, ndim, dims, chunk, elem, bytes);
    if (rc >= 0)
        rc = put_digest(d, mp_h5_digest(path, elem, ndim, shape, bytes, (size_t)numel * elem));
    if (rc < 0)
        mp_h5_grab();
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (rc < 0)
        return mp_fail(MP_ECKPT, "%s: cannot write dataset %s (%s)", w->tmp, path, mp_h5_message());
    return MP_OK;
}

mp_status mp_h5w_array(mp_h5w *w, const char *path, mp_dtype dtype, int ndim,
                       const int64_t *shape, const void *data, mp_dtype src)
{
    if (ndim < 1 || ndim > MP_H5_MAX_DIMS || (dtype == MP_H5_I64) != (src == MP_H5_I64))
        return mp_fail(MP_EINTERNAL, "h5file: dataset %s: bad rank or dtype", path);
    hid_t type = mp_h5_file_type(dtype);
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
        const char *sig = getenv("MPDIST_TEST_CKPT_KILL_SIGNAL");
        raise(sig ? atoi(sig) : SIGKILL);
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
    mp_h5_forget();
    herr_t rc = H5Fflush(w->file, H5F_SCOPE_GLOBAL);
    if (rc < 0)
        mp_h5_grab();
    if (H5Fclose(w->file) < 0 || rc < 0) {
        mp_status st = mp_fail(MP_ECKPT, "%s: cannot flush the checkpoint (%s)", w->tmp,
                               mp_h5_message());
        unlink(w->tmp);
        mp_temp_guard_drop(w->guard);
        free(w);
        return st;
    }
    mp_status st = sync_path(w->tmp, "checkpoint");
    if (st == MP_OK && rename(w->tmp, w->path) != 0)
        st = mp_fail(MP_ECKPT, "%s: cannot rename the temporary %s to it (%s)", w->path, w->tmp,
                     strerror(errno));
    if (st != MP_OK)
        unlink(w->tmp);
    mp_temp_guard_drop(w->guard); /* its name is no longer ours: before the slow fsync below */
    if (st == MP_OK) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", w->path);
        st = sync_path(dirname(dir), "checkpoint directory");
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
    mp_temp_guard_drop(w->guard);
    free(w);
}

