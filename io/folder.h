/* Image folders (data.format = "folder"): the layout torchvision's ImageFolder reads, JPEG and
 * PNG files decoded on the loader's threads as batches need them. The datasets are
 * mp_dataset's with `folder` set (io/dataset.h): labels in memory, pixels in the files. */
#ifndef MP_FOLDER_H
#define MP_FOLDER_H

#include <stdbool.h>

#include "io/dataset.h"

/* ImageNet's per-channel statistics (torchvision's Normalize for its models): the defaults of
 * data.mean and data.std for RGB folders. */
#define MP_FOLDER_MEAN {0.485, 0.456, 0.406}
#define MP_FOLDER_STD {0.229, 0.224, 0.225}

/* Lists the image folder at `root`: root/train/CLASS/FILE and root/val/CLASS/FILE, FILE named
 * *.jpg, *.jpeg or *.png (any case; hidden names skipped), classes the training split's
 * subdirectory names in strcmp order (label k: the k-th), files in strcmp order within a class.
 * A validation class must be a training class. Samples are `size` x `size` (8..1024) with
 * `channels` 1 or 3; num_classes must cover the classes (data.num_classes). A limit > 0 keeps
 * the first `limit` files of its split (in class order). Only names are read here; a batch
 * reads and decodes its files (mp_folder_batch). Errors, one line each, both datasets zeroed:
 * MP_EUSAGE for a bad argument; MP_EDATA naming the directory for a missing root, train or val
 * directory, a split without images, a validation class not among the training classes, more
 * classes than num_classes; MP_ESTOPPED when a stop signal comes while listing (engine/stop.h).
 * `resize` is the evaluation transform's shorter side (0: size /
 * 0.875, torchvision's 256 for 224; else at least size). */
mp_status mp_folder_load(mp_dataset *train, mp_dataset *test, const char *root, int size,
                         int channels, int resize, int64_t num_classes, int64_t train_limit,
                         int64_t test_limit);

/* Gathers samples idx[0..n) of folder dataset d into x (n, size, size, channels) of dtype dt,
 * normalised as (p / 255 - mean[ch]) / std[ch] and rounded once to dt, and their labels into
 * y (n). augment: the training transform of torchvision's ImageNet recipe, RandomResizedCrop
 * (a box of 8% to 100% of the area, aspect ratio 3/4 to 4/3 on a log scale, 10 tries then the
 * centre crop) and a horizontal flip with probability 1/2, drawn from (seed, epoch, idx[i]);
 * else the evaluation transform, the shorter side resized to `resize` and the centre
 * size x size kept. Both resample bilinearly in one pass (pixel centres aligned; weights in
 * 1/2048ths and bytes rounded half up, as PIL's fixed point, which resamples in two passes
 * and antialiases when it shrinks; this does neither).
 * MP_EDATA naming the file when one cannot be read or decoded, or naming the pixel value and
 * channel that mean and std take beyond dt's range (mp_pixel_tables). Thread-safe. */
mp_status mp_folder_batch(const mp_dataset *d, const int64_t *idx, int64_t n,
                          const double *mean, const double *std, uint64_t seed, int64_t epoch,
                          bool augment, mp_dtype dt, void *x, int32_t *y);

/* Sample i's file as "CLASS/NAME" (0 <= i < d->count of a folder split; owned by d). */
const char *mp_folder_name(const mp_dataset *d, int64_t i);

/* Frees a folder split (mp_dataset_free calls it); NULL is ignored. */
void mp_folder_free(mp_folder *f);

#endif
