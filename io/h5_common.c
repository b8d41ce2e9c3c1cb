/* What the HDF5 writer (h5file.c) and reader (h5_read.c) share; see h5_internal.h. */
#include "io/h5_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* desc into buf[0..cap), where HDF5's POSIX driver's long form, "file write failed: time = ...,
 * filename = ..., file descriptor = 5, errno = 28, error message = 'No space left on device',
 * buf = ..., total write size = ..." (more than a line, cut mid-word by the buffer), becomes
 * "file write failed: No space left on device". */
static void short_desc(char *buf, size_t cap, const char *desc)
{
    static const char key[] = "error message = '";
    const char *colon = strchr(desc, ':'), *m = strstr(desc, key), *end = NULL;
    if (colon && m && colon < m)
        end = strchr(m + sizeof key - 1, '\'');
    if (end)
        snprintf(buf, cap, "%.*s: %.*s", (int)(colon - desc), desc,
                 (int)(end - (m + sizeof key - 1)), m + sizeof key - 1);
    else
        snprintf(buf, cap, "%s", desc);
}

static herr_t innermost(unsigned n, const H5E_error2_t *e, void *arg)
{
    char *buf = arg;
    if (n == 0 && e->desc)
        short_desc(buf, 256, e->desc);
    return 0;
}

static _Thread_local char mp_h5_last[256]; /* HDF5's error stacks are per thread too */

/* Keeps the innermost message of HDF5's error stack for mp_h5_message (then clears the stack).
 * Call it right after the failing call: any later HDF5 call starts a new stack. */
void mp_h5_forget(void)
{
    mp_h5_last[0] = '\0';
}

void mp_h5_grab(void)
{
    mp_h5_last[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, mp_h5_last);
    H5Eclear2(H5E_DEFAULT);
}

/* The message mp_h5_grab() kept, or the current stack's when nothing was kept. */
const char *mp_h5_message(void)
{
    if (!mp_h5_last[0])
        mp_h5_grab();
    return mp_h5_last[0] ? mp_h5_last : "unknown HDF5 error";
}

/* For H5_CHECK: the message of the call that just failed. */
const char *mp_h5_checked_message(int64_t rc)
{
    (void)rc;
    mp_h5_grab();
    return mp_h5_message();
}

/* HDF5's own messages off; and, before the library first starts, its exit-time clean-up off
 * (mp_h5_no_atexit). */
void mp_h5_quiet(void)
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
hid_t mp_h5_file_type(mp_dtype dt)
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
int mp_h5_stored_dtype(hid_t t)
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

void mp_h5_close_ids(int n, const hid_t *ids)
{
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0)
            continue;
        switch (H5Iget_type(ids[i])) {
        case H5I_GENPROP_LST: H5Pclose(ids[i]); break;
        case H5I_DATATYPE: H5Tclose(ids[i]); break;
        case H5I_DATASPACE: H5Sclose(ids[i]); break;
        case H5I_ATTR: H5Aclose(ids[i]); break;
        case H5I_DATASET: H5Dclose(ids[i]); break;
        case H5I_GROUP: H5Gclose(ids[i]); break;
        case H5I_FILE: H5Fclose(ids[i]); break;
        default: break;
        }
    }
}
