/* In-memory image classification datasets. Images are kept as the file's uint8 pixels,
 * (count, H, W, C) row-major; labels as int32 in [0, num_classes). Batches are produced
 * normalised, in the input dtype the model asks for. */
#ifndef MP_DATASET_H
#define MP_DATASET_H

#include <stdint.h>

#include "engine/dtype.h"
#include "engine/status.h"

typedef struct mp_dataset {
    int64_t count;       /* number of samples */
    int h, w, c;         /* per-sample shape (NHWC) */
    int num_classes;     /* labels are in [0, num_classes) */
    uint8_t *images;     /* (count, h, w, c), owned, counted under MP_MEM_DATA */
    int32_t *labels;     /* (count), owned */
} mp_dataset;

/* Loads an IDX image/label file pair (MNIST and Fashion-MNIST format, gzip-compressed or raw)
 * from directory `dir`: split "train" reads train-images-idx3-ubyte[.gz] and
 * train-labels-idx1-ubyte[.gz]; split "test" reads t10k-*. When limit > 0 only the first
 * `limit` samples are kept; a gzip file is still read to its end, so that its CRC-32 and length
 * trailer are checked (a raw file is read only as far as the kept samples). Errors (MP_EDATA,
 * message naming the file): missing directory or file, wrong magic, bad dimensions, more data
 * than memory can hold (mp_data_mem_check, before anything is read), truncated data or a gzip
 * stream that ends before its trailer, a gzip CRC or length mismatch or other damage,
 * image/label count mismatch, a label >= num_classes. On error *d is left empty. */
mp_status mp_idx_load(mp_dataset *d, const char *dir, const char *split, int num_classes,
                      int64_t limit);

/* Frees what mp_idx_load allocated and zeroes *d. */
void mp_dataset_free(mp_dataset *d);

/* Gathers the samples idx[0..n) into x (n, h, w, c) of dtype `dt`, each pixel normalised
 * as (p / 255 - mean) / std and rounded once to dt, and their labels into y (n). */
void mp_dataset_batch(const mp_dataset *d, const int64_t *idx, int64_t n, double mean,
                      double std, mp_dtype dt, void *x, int32_t *y);

/* Loads the CIFAR-10 binary version from directory `dir` (the extracted
 * cifar-10-batches-bin/): split "train" reads data_batch_1.bin .. data_batch_5.bin in that
 * order, split "test" reads test_batch.bin. Each file is a sequence of 3073-byte records: one
 * label byte in 0..9, then the 1024 R, 1024 G and 1024 B bytes, each plane row-major 32x32.
 * Images are converted to (count, 32, 32, 3) NHWC; num_classes is 10. When limit > 0 only the
 * first `limit` samples are kept (read and label-checked), but every file of the split must
 * still exist and have a valid size. Errors (MP_EDATA, one line naming the file or directory):
 * missing directory or file, an empty file, a size that is not a whole number of records, more
 * records than memory can hold (mp_data_mem_check, before anything is allocated), a short read,
 * a label > 9; an unknown split is MP_EUSAGE. On error *d is left zeroed with nothing
 * allocated. */
mp_status mp_cifar10_load(mp_dataset *d, const char *dir, const char *split, int64_t limit);

/* Makes the synthetic dataset's split "train" or "test" (io/synthetic.c): `count` images of
 * h x w x c, labels uniform over num_classes, each image its class's tile pattern plus noise,
 * all determined by (seed, split). MP_EUSAGE for a non-positive size or an unknown split,
 * MP_EDATA when the images do not fit memory or their size overflows (mp_data_mem_check), each
 * with *d left zeroed. */
mp_status mp_synthetic_make(mp_dataset *d, const char *split, int h, int w, int c,
                            int64_t count, int num_classes, uint64_t seed);

#endif
