/* A guard for HDF5 files that hold variable-length strings (checkpoints written before
 * fixed-length string attributes): their values live in global heap collections ("GCOL"),
 * which carry no checksum, and HDF5 1.10 trusts an object's size field there without a bounds
 * check (a flipped bit crashes H5Aread, or loops forever on a zero-sized free-space object).
 * Checking every collection's layout before the first such read turns that damage into an
 * ordinary error. */
#ifndef MP_H5_GHEAP_H
#define MP_H5_GHEAP_H

#include "engine/status.h"

/* Finds every global heap collection in file `path` (signature "GCOL" and version 1, as HDF5
 * finds one; its reserved bytes may hold anything) and checks that its size fits in the
 * file and that its objects tile it exactly as HDF5 reads them (object headers of 16 bytes,
 * sizes rounded up to 8, object 0 the free space). MP_OK when all hold (or there is none);
 * MP_ECKPT naming the file and the collection's offset otherwise, or when the file cannot be
 * read. Reads the whole file once (memory-mapped). */
mp_status mp_h5_check_global_heaps(const char *path);

#endif
