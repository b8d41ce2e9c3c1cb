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
 * `limit` samples are kept. Errors (MP_EDATA, message naming the file): missing directory or
 * file, wrong magic, bad dimensions, truncated data, image/label count mismatch, a label
 * >= num_classes. On error *d is left empty. */
mp_status mp_idx_load(mp_dataset *d, const char *dir, const char *split, int num_classes,
                      int64_t limit);

/* Frees what mp_idx_load allocated and zeroes *d. */
void mp_dataset_free(mp_dataset *d);

/* Gathers the samples idx[0..n) into x (n, h, w, c) of dtype `dt`, each pixel normalised
 * as (p / 255 - mean) / std and rounded once to dt, and their labels into y (n). */
void mp_dataset_batch(const mp_dataset *d, const int64_t *idx, int64_t n, double mean,
                      double std, mp_dtype dt, void *x, int32_t *y);

#endif
