/* HDF5 reading for checkpoints; see h5file.h. Every dataset read is checked against its digest
 * (io/h5_digest.h) where it has one, and files with variable-length strings have their global
 * heaps checked before any string is read (io/h5_gheap.h). */
#include "io/h5_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "io/fsutil.h"
#include "io/h5_digest.h"
#include "io/h5_gheap.h"

struct mp_h5r {
    hid_t file;
    bool heaps_checked; /* mp_h5_check_global_heaps passed (files with variable strings) */
    bool need_digests;  /* every dataset must carry its digest (mp_h5r_require_digests) */
    char path[1024];
};

mp_status mp_h5r_open(mp_h5r **out, const char *path)
{
    mp_h5_quiet();
    *out = NULL;
    const char *why; /* checked without blocking: a FIFO must never reach H5Fopen */
    int fd = mp_open_regular(path, NULL, &why);
    if (fd < 0 && errno == EINVAL)
        return mp_fail(MP_ECKPT, "%s: not a checkpoint file (%s)", path, why);
    if (fd < 0)
        return mp_fail(MP_ECKPT, "%s: cannot open the checkpoint (%s)", path, why);
    close(fd);
    mp_h5_forget();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return mp_fail(MP_ECKPT, "%s: not a readable HDF5 file, truncated or damaged (%s)", path,
                       mp_h5_message());
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

/* 1 when group or dataset `path` exists, 0 when it does not, -1 when HDF5 cannot tell (a
 * damaged object header on the way: its reason kept for mp_h5_message). */
static int h5r_lookup(mp_h5r *r, const char *path)
{
    /* H5Lexists needs every parent to exist: check each prefix. */
    char buf[512];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return 0;
    for (size_t i = 1; i <= n; i++)
        if (path[i] == '/' || path[i] == '\0') {
            memcpy(buf, path, i);
            buf[i] = '\0';
            htri_t there = H5Lexists(r->file, buf, H5P_DEFAULT);
            if (there < 0)
                mp_h5_grab();
            if (there <= 0)
                return there < 0 ? -1 : 0;
        }
    return 1;
}

bool mp_h5r_exists(mp_h5r *r, const char *path) { return h5r_lookup(r, path) == 1; }

int mp_h5r_find(mp_h5r *r, const char *path)
{
    int found = h5r_lookup(r, path);
    if (found < 0)
        mp_fail(MP_ECKPT, "%s: cannot look up %s (%s)", r->path, path, mp_h5_message());
    return found;
}

/* MP_OK when `path` exists; else MP_ECKPT: "has no `what`" when it does not, HDF5's reason
 * when the lookup fails. */
static mp_status h5r_need(mp_h5r *r, const char *path, const char *what)
{
    int found = mp_h5r_find(r, path);
    if (found < 0)
        return MP_ECKPT;
    if (found == 0)
        return mp_fail(MP_ECKPT, "%s: has no %s %s", r->path, what, path);
    return MP_OK;
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
    int found = mp_h5r_find(r, obj);
    htri_t has = found == 1 ? H5Aexists_by_name(r->file, obj, name, H5P_DEFAULT) : 0;
    if (found < 0)
        return MP_ECKPT;
    if (has < 0) {
        mp_h5_grab();
        return mp_fail(MP_ECKPT, "%s: cannot look up the attributes of %s (%s)", r->path, obj,
                       mp_h5_message());
    }
    if (has == 0) {
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
    mp_h5_forget();
    hid_t a = H5Aopen_by_name(r->file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    bool ok = t >= 0 && H5Tget_class(t) == cls && H5Aread(a, mem, v) >= 0;
    if (!ok)
        mp_h5_grab();
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    if (!ok)
        return mp_fail(MP_ECKPT, "%s: attribute %s of %s cannot be read as a %s (%s)", r->path,
                       name, obj, cls == H5T_STRING ? "string" : "number", mp_h5_message());
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
    MP_TRY(h5r_need(r, path, "dataset"));
    mp_h5_forget();
    hid_t d = H5Dopen2(r->file, path, H5P_DEFAULT);
    if (d < 0)
        return mp_fail(MP_ECKPT, "%s: %s is not a readable dataset (%s)", r->path, path,
                       mp_h5_message());
    hid_t s = H5Dget_space(d), t = H5Dget_type(d);
    hsize_t dims[MP_H5_MAX_DIMS];
    int nd = H5Sget_simple_extent_ndims(s);
    int dt = mp_h5_stored_dtype(t);
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
    MP_H5_CLOSE(t, sp, a);
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
    hid_t mem = mp_h5_file_type(stored); /* little-endian hosts: the stored bytes as they are */
    size_t elem = H5Tget_size(mem);
    void *raw = stored == dst ? data : mp_alloc((size_t)numel * elem, MP_MEM_WORKSPACE);
    mp_h5_forget();
    hid_t d = H5Dopen2(r->file, path, H5P_DEFAULT);
    herr_t rc = d >= 0 ? H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) : -1;
    if (rc < 0)
        mp_h5_grab();
    H5Tclose(mem);
    mp_status st = MP_OK;
    if (rc < 0)
        st = mp_fail(MP_ECKPT, "%s: dataset %s is corrupt (%s)", r->path, path, mp_h5_message());
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
    MP_TRY(h5r_need(r, group, "group"));
    mp_h5_forget();
    hid_t g = H5Gopen2(r->file, group, H5P_DEFAULT);
    if (g < 0)
        return mp_fail(MP_ECKPT, "%s: %s is not a group (%s)", r->path, group, mp_h5_message());
    member_walk mw = {fn, arg, MP_OK};
    mp_h5_forget();
    herr_t rc = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, member, &mw);
    if (rc < 0)
        mp_h5_grab();
    H5Gclose(g);
    if (mw.st != MP_OK)
        return mw.st;
    if (rc < 0)
        return mp_fail(MP_ECKPT, "%s: cannot list group %s (%s)", r->path, group, mp_h5_message());
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
