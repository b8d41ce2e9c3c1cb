/* Image datasets in HDF5 files (data.format = "hdf5"): images and labels in named datasets, as
 * a user writes them with h5py, read a sample at a time by hyperslab, never whole. The datasets
 * are mp_dataset's with `h5` set (io/dataset.h): labels in memory, pixels in the file. */
#ifndef MP_H5DATA_H
#define MP_H5DATA_H

#include <stdbool.h>

#include "io/dataset.h"

/* Where one split lives in the file, and how its images are laid out. */
typedef struct mp_h5data_keys {
    const char *images, *labels; /* dataset paths in the file, e.g. "train/images" */
} mp_h5data_keys;

/* Opens the HDF5 file `path` (a regular file; read only) and its datasets keys[0] (the
 * training split) and keys[1] (the test split) into *train and *test. Images are
 * (N, H, W, C), or (N, C, H, W) when nchw, or (N, H, W) with one channel; of uint8 (pixels,
 * normalised as (p / 255 - mean) / std, the bits of an IDX file's) or of a float type (values,
 * normalised as (v - mean) / std); H and W from 1 to 4096, C from 1 to MP_DATA_MAX_CHANNELS.
 * Labels are (N) integers in
 * [0, num_classes), read whole (4 bytes a sample, checked against memory first); the images
 * stay in the file and are read a sample at a time (mp_h5data_read) through a chunk cache of
 * cache_mb MiB per dataset. A limit > 0 keeps only the first `limit` samples of its split.
 * Errors, one line each, both datasets left zeroed and nothing held: MP_EUSAGE for a bad
 * argument; MP_EDATA naming the file and the dataset for a file that is missing, not regular or
 * not HDF5, a dataset that is missing or not a dataset, images of another rank, size or type,
 * labels not one integer per image, a label out of range (with its index), more labels than
 * memory can hold, an empty split, values stored elsewhere or never written, chunks HDF5 cannot
 * read safely (io/h5_chunks.h: the labels' all, the images' index; their chunks are checked as
 * mp_h5data_read first reads each, so the load never reads the images whole). MP_ESTOPPED when
 * a stop signal comes during the load (engine/stop.h). */
mp_status mp_h5data_load(mp_dataset *train, mp_dataset *test, const char *path,
                         const mp_h5data_keys keys[2], bool nchw, int64_t num_classes,
                         int64_t cache_mb, int64_t train_limit, int64_t test_limit);

/* Whether d's images are floats (read as double), else uint8 pixels. d->h5 is set. */
bool mp_h5data_float(const mp_dataset *d);

/* "FILE: image INDEX of DATASET" into buf (cap bytes) for messages about one of d's samples;
 * returns buf. d->h5 is set. */
const char *mp_h5data_sample_name(const mp_dataset *d, int64_t index, char *buf, size_t cap);

/* Reads image `index` of d (0 <= index < d->count) into out, (H, W, C) row-major whatever the
 * file's layout: uint8 pixels, or doubles when mp_h5data_float(d). MP_EDATA naming the file and
 * the dataset when the read fails (the file changed or is damaged), a chunk holding the image
 * is damaged or missing (checked on its first read: io/h5_chunks.h) or a float value is not
 * finite. Thread-safe (HDF5's own lock serialises the library's calls). */
mp_status mp_h5data_read(const mp_dataset *d, int64_t index, void *out);

/* Closes a split's HDF5 handles and frees it (mp_dataset_free calls it); NULL is ignored. */
void mp_h5data_free(mp_h5data *h);

#endif
