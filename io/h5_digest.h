/* The digest mpdist stores beside every dataset it writes (attribute MP_H5_DIGEST_ATTR, a 32-bit
 * unsigned integer), checked when the dataset is read. HDF5's Fletcher-32 guards each chunk
 * against flipped bits, but a chunk of zeros with a checksum of zeros passes it (Fletcher-32 of
 * zeros is 0), and so does any data written whole by another process. The digest is taken from
 * the values in memory before they are written, and it starts from the dataset's name, element
 * size and shape, so zeros do not digest to zero and a dataset's bytes under another name or
 * shape do not match: data that never came from the run that named it cannot pass. */
#ifndef MP_H5_DIGEST_H
#define MP_H5_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define MP_H5_DIGEST_ATTR "mpdist_crc32"

/* zlib's CRC-32 of "mpdist dataset", the path without its leading '/', the element size, the
 * rank and each extent (as little-endian 64-bit words), then the `bytes` stored bytes. */
uint32_t mp_h5_digest(const char *path, size_t elem, int ndim, const int64_t *shape,
                      const void *data, size_t bytes);

#endif
