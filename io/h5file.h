/* HDF5 files as checkpoints use them (docs/ARCHITECTURE.md §6): attributes on groups, and chunked
 * datasets of FP32, FP64, fp16, bf16 or int64 with Fletcher32 on every chunk (after deflate when
 * deflate is on), so a flipped bit fails the read of the dataset that holds it, and a digest beside
 * each dataset (io/h5_digest.h), so zeros or another process's data do not pass either.
 * Writing is crash-safe: a writer fills a temporary file beside the target and only
 * mp_h5w_commit flushes it, fsyncs it, renames it over the target and fsyncs the directory, so
 * the target path holds either its old contents or the complete new file, never a torn one.
 * Half types are stored as HDF5 floats of their own bit layout (h5py reads fp16 as float16);
 * values are converted by mp_convert, never by HDF5, so their bits are the engine's.
 * Every failure is MP_ECKPT with one line naming the file and the dataset or attribute. */
#ifndef MP_H5FILE_H
#define MP_H5FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/dtype.h"
#include "engine/status.h"
#include "engine/tensor.h"

#define MP_H5_MAX_DIMS 4
#define MP_H5_I64 ((mp_dtype)100) /* int64 datasets (e.g. the RNG table), beside the floats */

typedef struct mp_h5w mp_h5w;
typedef struct mp_h5r mp_h5r;

/* Keeps HDF5 from closing its open files when the process exits (H5dont_atexit; effective only
 * before the library's first use, so main calls it first). A file whose close failed (a disk
 * that filled during a save) stays open inside HDF5, and its clean-up at exit would flush it
 * again and crash; every file mpdist opens is closed by mpdist, and the system closes the rest.
 * Idempotent. */
void mp_h5_no_atexit(void);

/* Creates a writer whose datasets are chunked with Fletcher32 and, when deflate is 1..9,
 * compressed at that level. The file is written to a temporary name beside `path` (same
 * directory, so the rename is atomic), created exclusively. Returns MP_ECKPT when the directory
 * is not writable. */
mp_status mp_h5w_open(mp_h5w **w, const char *path, int deflate);

/* Writes an attribute on the group `obj` ("/meta"; created with its parents when missing):
 * a 64-bit integer, a double, or a NUL-terminated string. */
mp_status mp_h5w_attr_int(mp_h5w *w, const char *obj, const char *name, int64_t v);
mp_status mp_h5w_attr_double(mp_h5w *w, const char *obj, const char *name, double v);
mp_status mp_h5w_attr_string(mp_h5w *w, const char *obj, const char *name, const char *v);

/* Writes dataset `path` ("/params/fc1.weight"; parent groups created) of shape[0..ndim) in
 * `dtype` (MP_F32, MP_F64, MP_F16, MP_BF16 or MP_H5_I64), from `data` holding the values in
 * `src` (a float dtype converted with mp_convert, or MP_H5_I64 when dtype is MP_H5_I64). */
mp_status mp_h5w_array(mp_h5w *w, const char *path, mp_dtype dtype, int ndim,
                       const int64_t *shape, const void *data, mp_dtype src);

/* Closes the file, fsyncs it, renames it to the target and fsyncs the directory; frees w. On
 * failure the temporary file is removed and the target is untouched. */
mp_status mp_h5w_commit(mp_h5w *w);

/* Closes and removes the temporary file, leaving the target untouched; frees w. NULL ignored. */
void mp_h5w_abort(mp_h5w *w);

/* Opens `path` read-only. MP_ECKPT for a missing, unreadable, truncated or non-HDF5 file. */
mp_status mp_h5r_open(mp_h5r **r, const char *path);

/* The file's path as opened. */
const char *mp_h5r_path(const mp_h5r *r);

/* Whether group or dataset `path` exists (false also when HDF5 cannot tell: see mp_h5r_find). */
bool mp_h5r_exists(mp_h5r *r, const char *path);

/* 1 when group or dataset `path` exists, 0 when it does not, -1 after MP_ECKPT with HDF5's reason
 * when the lookup itself fails (a damaged object header on the way). */
int mp_h5r_find(mp_h5r *r, const char *path);

/* Whether object `obj` exists and has attribute `name`. */
bool mp_h5r_has_attr(mp_h5r *r, const char *obj, const char *name);

/* Reads attribute `name` of the object `obj`, which must hold exactly one value (a scalar, or an
 * array of one); MP_ECKPT naming both when it is missing, holds another number of values or is
 * of another kind. mp_h5r_attr_string returns a string the caller frees with free(). */
mp_status mp_h5r_attr_int(mp_h5r *r, const char *obj, const char *name, int64_t *v);
mp_status mp_h5r_attr_double(mp_h5r *r, const char *obj, const char *name, double *v);
mp_status mp_h5r_attr_string(mp_h5r *r, const char *obj, const char *name, char **v);

/* The shape and stored dtype (a float mp_dtype or MP_H5_I64) of dataset `path`. */
mp_status mp_h5r_info(mp_h5r *r, const char *path, int *ndim, int64_t shape[MP_H5_MAX_DIMS],
                      mp_dtype *dtype);

/* From now on every dataset read must carry its digest (io/h5_digest.h): files of a format that
 * writes them. Without this call a dataset's digest is checked only where it has one. */
void mp_h5r_require_digests(mp_h5r *r);

/* Reads dataset `path`, which must have shape[0..ndim), into `data` in dtype `dst` (floats
 * converted exactly as mp_convert does; int64 only into MP_H5_I64). MP_ECKPT naming the dataset
 * when it is missing, of another shape, fails its checksum ("is corrupt"), or does not match the
 * digest stored beside it (or has none where digests are required). */
mp_status mp_h5r_array(mp_h5r *r, const char *path, int ndim, const int64_t *shape, void *data,
                       mp_dtype dst);

/* Calls fn(name, arg) for each member of group `group` in name order; stops at the first
 * failure and returns it. A missing group is MP_ECKPT. */
mp_status mp_h5r_members(mp_h5r *r, const char *group,
                         mp_status (*fn)(const char *name, void *arg), void *arg);

/* Closes the file and frees r (NULL ignored). */
void mp_h5r_close(mp_h5r *r);

/* "[3, 5, 7]" for a shape, into out[0..size). */
void mp_h5_shape_text(int ndim, const int64_t *shape, char *out, size_t size);

/* "<dir>/.<base>.<pid>-<attempt>.tmp" for a target path: where mp_h5w_open writes before the
 * rename, with at most MP_H5_TEMP_BASE bytes of <base> (so that a long but legal name keeps a
 * legal temporary). The writer creates it exclusively (never truncating a file another process
 * may be writing), taking the next attempt while the name exists. */
#define MP_H5_TEMP_BASE 200
void mp_h5_temp_path(const char *path, unsigned attempt, char *out, size_t size);

/* The temporary file a writer fills (mp_h5_temp_path of its target). */
const char *mp_h5w_temp(const mp_h5w *w);

#endif
