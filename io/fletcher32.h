/* HDF5's Fletcher32 checksum (the H5Z_FILTER_FLETCHER32 filter), computed as fast as memory
 * allows so that checkpoints can store chunks directly (H5Dwrite_chunk) with the checksum HDF5
 * itself would have appended: data are read as big-endian 16-bit words, sum1 is their sum and
 * sum2 the sum of the running sum1, both folded to 16 bits as HDF5 folds them (a nonzero sum
 * that is a multiple of 65535 gives 65535, an all-zero input gives 0), and the result is
 * sum2 << 16 | sum1. HDF5 stores it after the chunk's bytes, little-endian. */
#ifndef MP_FLETCHER32_H
#define MP_FLETCHER32_H

#include <stddef.h>
#include <stdint.h>

/* The running state over a stream of bytes: the sums modulo 65535, and whether any nonzero
 * word was seen (which decides between 0 and 65535 for a zero residue). */
typedef struct {
    uint64_t sum1, sum2;
    int nonzero;
} mp_fletcher32;

/* An empty stream. */
void mp_fletcher32_init(mp_fletcher32 *f);

/* Adds src[0..bytes) to the stream, also copying them to dst when dst is not NULL (one pass
 * over memory). `bytes` must be even unless this is the stream's last piece: an odd last byte
 * counts as the high byte of a word, as in HDF5. */
void mp_fletcher32_update(mp_fletcher32 *f, void *dst, const void *src, size_t bytes);

/* The checksum of everything added so far, equal to HDF5's H5_checksum_fletcher32. */
uint32_t mp_fletcher32_value(const mp_fletcher32 *f);

#endif
