/* Chunked HDF5 datasets checked before HDF5 reads them (io/h5_chunks.c). */
#ifndef MP_H5_CHUNKS_H
#define MP_H5_CHUNKS_H

#include <hdf5.h>

#include "engine/status.h"

/* The words of the refusal of a dataset with values never written, after its name. */
#define MP_H5_UNWRITTEN                                                                        \
    "holds values never written (HDF5 stores no data for some or all of them: they would "     \
    "read as its fill value)"

/* MP_OK when dataset d is not chunked, or when its filters are only gzip (deflate), shuffle and
 * Fletcher32 and every chunk of its grid is stored and, read raw and unfiltered here, holds
 * exactly the chunk's bytes (chunks of at most 256 MiB). Else MP_EDATA with one line naming the
 * file `path`, the dataset `name` and the chunk (MP_H5_UNWRITTEN for a chunk never written).
 * Reads every chunk once: a pass over the dataset's storage. */
mp_status mp_h5_check_chunks(hid_t d, const char *path, const char *name);

#endif
