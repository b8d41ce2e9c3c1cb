/* The HDF5 code's shared internals (io/h5file.c writes, io/h5_read.c reads): HDF5's error
 * stack made one line, the H5_CHECK macro (docs/ARCHITECTURE.md §7), and our dtypes as HDF5
 * file types. HDF5's own error printing is off: a failed call is reported once, with the
 * innermost message of HDF5's error stack. */
#ifndef MP_H5_INTERNAL_H
#define MP_H5_INTERNAL_H

#include <hdf5.h>
#include <stdint.h>

#include "engine/check.h"
#include "io/h5file.h"

/* Forgets the message mp_h5_grab kept, before a call whose failure may need a fresh one. */
void mp_h5_forget(void);

/* Keeps the innermost message of HDF5's error stack for mp_h5_message (then clears the
 * stack). Call it right after the failing call: any later HDF5 call starts a new stack. */
void mp_h5_grab(void);

/* The message mp_h5_grab kept, or the current stack's when nothing was kept. */
const char *mp_h5_message(void);

/* For H5_CHECK: the message of the call that just failed. */
const char *mp_h5_checked_message(int64_t rc);

#define MP_H5_OK(rc) ((rc) >= 0)
#define H5_CHECK(stmt) \
    MP_LIB_CHECK("HDF5", MP_ECKPT, int64_t, (int64_t)(stmt), MP_H5_OK, mp_h5_checked_message)

/* HDF5's own messages off; and, before the library first starts, its exit-time clean-up off
 * (mp_h5_no_atexit). */
void mp_h5_quiet(void);

/* The HDF5 file type of a dtype (MP_F32, MP_F64, MP_F16, MP_BF16 or MP_H5_I64: a new id the
 * caller closes), or -1. */
hid_t mp_h5_file_type(mp_dtype dt);

/* The dtype a stored HDF5 type holds, or -1 when it is none of ours. */
int mp_h5_stored_dtype(hid_t t);

/* Closes each of the n ids that is valid (>= 0) with the close call of its kind (property list,
 * datatype, dataspace, attribute, dataset, group, file); others are left alone. */
void mp_h5_close_ids(int n, const hid_t *ids);

/* MP_H5_CLOSE(a, b, ...): mp_h5_close_ids over the ids given. */
#define MP_H5_CLOSE(...) \
    mp_h5_close_ids((int)(sizeof((hid_t[]){__VA_ARGS__}) / sizeof(hid_t)), (hid_t[]){__VA_ARGS__})

#endif
