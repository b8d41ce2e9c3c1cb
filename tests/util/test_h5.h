/* HDF5 helpers for tests that damage files on purpose. */
#ifndef MP_TEST_H5_H
#define MP_TEST_H5_H

/* Sets the first byte of object `name`'s header in the HDF5 file at `path` to 7: a version-1
 * header's version byte (only 1 and 2 exist), or the start of a version-2 header's "OHDR"
 * signature, which HDF5 then reads as version 1's. Either way HDF5 cannot read that header:
 * "bad object header version number". Fails the test when the object or the file cannot be
 * found or written. */
void mp_test_h5_damage_header(const char *path, const char *name);

#endif
