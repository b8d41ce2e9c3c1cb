/* Chunked HDF5 datasets checked before HDF5 reads them (io/h5_chunks.c): all at once (labels),
 * or row by row as the loader first reads each (images: a run's start-up does not read a
 * large file whole, and each rank touches only what it reads). */
#ifndef MP_H5_CHUNKS_H
#define MP_H5_CHUNKS_H

#include <hdf5.h>

#include "engine/status.h"

/* The words of the refusal of a dataset with values never written, after its name. */
#define MP_H5_UNWRITTEN                                                                        \
    "holds values never written (HDF5 stores no data for some or all of them: they would "     \
    "read as its fill value)"

typedef struct mp_h5_chunks mp_h5_chunks;

/* Prepares the checks of chunked dataset d's stored chunks (mp_h5_chunks_row): *out NULL when d
 * is not chunked (nothing to check), else the plan, which uses d (open while the plan is) and
 * the strings path and name (for messages). MP_EDATA with one line naming the file `path` and
 * the dataset `name` when d's filters are other than gzip (deflate), shuffle and Fletcher32, its
 * chunks larger than 256 MiB, or fewer chunks are stored than its grid has (MP_H5_UNWRITTEN),
 * or far more grid than stored chunks (damaged). Reads the chunk index once, no chunk. */
mp_status mp_h5_chunks_open(hid_t d, const char *path, const char *name, mp_h5_chunks **out);

/* Checks, once per plan, the chunks that hold `element` of d's first dimension (its row of the
 * chunk grid): each must be stored and, read raw and unfiltered here, hold exactly the chunk's
 * bytes. MP_OK (also for a NULL plan or an element out of range), else MP_EDATA naming the
 * chunk. Safe from several threads (HDF5 built thread-safe, as Debian's): one row is checked
 * at a time, so at most one chunk's buffers are held. */
mp_status mp_h5_chunks_row(mp_h5_chunks *c, hsize_t element);

/* Frees a plan (NULL: nothing). */
void mp_h5_chunks_free(mp_h5_chunks *c);

/* Every chunk of d at once: open, each row, free. A pass over the dataset's storage, ended by a
 * stop request (MP_ESTOPPED, engine/stop.h). */
mp_status mp_h5_check_chunks(hid_t d, const char *path, const char *name);

#endif
