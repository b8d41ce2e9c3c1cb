/* In-memory datasets. Image classification: images kept as the file's uint8 pixels,
 * (count, H, W, C) row-major, labels as int32 in [0, num_classes), one per sample; batches are
 * produced normalised, in the input dtype the model asks for. Text (io/text.c): the split's bytes
 * kept as they are; sample j is the window of T + 1 bytes starting at j * T + offset (the offset
 * drawn per epoch for the training split), shaped (1, T, 1) with the T next bytes as its
 * labels, so the sampler, the loader and resume treat windows exactly as images. */
#ifndef MP_DATASET_H
#define MP_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/dtype.h"
#include "engine/status.h"

typedef struct mp_tokens mp_tokens; /* token shards (io/tokens.h) */
typedef struct mp_h5data mp_h5data; /* images in an HDF5 file (io/h5data.h) */
typedef struct mp_folder mp_folder; /* an image folder of JPEG and PNG files (io/folder.h) */

/* Channels an image dataset may have (grayscale, RGB, RGBA): the per-channel mean and std. */
#define MP_DATA_MAX_CHANNELS 4

typedef struct mp_dataset {
    int64_t count;       /* number of samples */
    int h, w, c;         /* per-sample shape (NHWC) */
    int num_classes;     /* labels are in [0, num_classes) */
    uint8_t *images;     /* (count, h, w, c), owned, counted under MP_MEM_DATA; NULL for text */
    int32_t *labels;     /* (count), owned; NULL for text */
    /* Text only (NULL / 0 / false for images): h = 1, w = T (data.context), c = 1, 256 classes. */
    uint8_t *text;       /* (text_len) the split's bytes, owned, counted under MP_MEM_DATA */
    int64_t text_len;    /* >= count * T + 1, and >= (count + 1) * T when text_shift */
    bool text_shift;     /* windows start at a per-epoch offset in [0, T) (mp_text_offset) */
    /* Token shards only (NULL otherwise): windows of T tokens read from files as batches need
     * them (io/tokens.h), h = 1, w = T, c = 1, num_classes the vocabulary; text_shift as text. */
    mp_tokens *tokens;   /* owned */
    /* Images in an HDF5 file only (NULL otherwise): `images` is NULL, each sample is read from
     * the file as a batch needs it (io/h5data.h); labels are in memory as for every image set. */
    mp_h5data *h5;       /* owned */
    /* Image folders only (NULL otherwise): `images` is NULL, each sample is a file decoded and
     * transformed as a batch needs it (io/folder.h); labels are in memory. */
    mp_folder *folder;   /* owned */
} mp_dataset;

/* Labels per sample: 1 for an image dataset, T = d->w (one per byte or token of the window)
 * for text and token shards.
 * A batch of n samples has n * mp_dataset_label_len(d) labels. */
int mp_dataset_label_len(const mp_dataset *d);

/* A digest of what tells one training set from another of the same size, for a checkpoint to
 * name the data it was written for: an image set's labels in order (and an image folder's file
 * names, CLASS/NAME, its labels being in class order), text's bytes; token shards, which are
 * read as batches need them, have none (0). Nonzero otherwise. */
uint64_t mp_dataset_digest(const mp_dataset *d);

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

/* Frees what any loader of this file allocated (mp_idx_load, mp_cifar10_load,
 * mp_synthetic_make, mp_text_load) or io/tokens.h's mp_tokens_load, and zeroes *d. */
void mp_dataset_free(mp_dataset *d);

/* Gathers the samples idx[0..n) of an image dataset into x (n, h, w, c) of dtype `dt`, each
 * pixel normalised as (p / 255 - mean) / std and rounded once to dt, and their labels into
 * y (n). */
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
 * MP_EDATA when the images do not fit memory or their size overflows (mp_data_mem_check),
 * MP_ESTOPPED when a stop signal comes while they are made (engine/stop.h), each with *d left
 * zeroed. */
mp_status mp_synthetic_make(mp_dataset *d, const char *split, int h, int w, int c,
                            int64_t count, int num_classes, uint64_t seed);

/* Loads a text corpus for byte-level language modelling (data.format = "text", io/text.c).
 * `path` is a regular file, or a directory read recursively: the entries of each directory in
 * strcmp order of their names, regular files only (symbolic links, hidden names and names
 * ending in ".dat", fortune's index files, are skipped), their bytes concatenated. Bytes are
 * bytes: no decoding, the vocabulary is the 256 byte values. The last
 * floor(total * val_fraction) bytes are the validation split (*test), the rest the training
 * split (*train), both with h = 1, w = context, c = 1, num_classes = 256. *test holds
 * (len - 1) / context windows at offset 0; *train holds len / context - 1 windows and shifts
 * them each epoch (text_shift), so that every offset in [0, context) fits. A limit > 0 keeps
 * only the first `limit` windows of its split (and only the bytes they can reach).
 * context in [2, 4096] and val_fraction in (0, 1) (else MP_EUSAGE). Errors (MP_EDATA, one line
 * naming the path): a missing path, one that is neither a regular file nor a directory, a
 * directory without text files, no bytes, a split without one whole window, more bytes than
 * memory can hold (mp_data_mem_check, before anything is allocated), a read error or a file
 * that shrank while read. On error both datasets are left zeroed with nothing allocated. */
mp_status mp_text_load(mp_dataset *train, mp_dataset *test, const char *path, int context,
                       double val_fraction, int64_t train_limit, int64_t test_limit);

/* The start of epoch `epoch`'s windows in text or token dataset d: 0 unless d->text_shift, else
 * uniform in [0, d->w) from mp_rng_seed(seed ^ MP_TEXT_SALT, epoch), the same on every rank
 * and thread. Sample j's window starts at j * d->w + mp_text_offset(d, seed, epoch). */
#define MP_TEXT_SALT 0x7e47d1a3c5f0b219ull
int64_t mp_text_offset(const mp_dataset *d, uint64_t seed, int64_t epoch);

/* Gathers the windows idx[0..n) of text dataset d for (seed, epoch): x (n, 1, T, 1) of dtype
 * `dt` holds the window's first T bytes as the values 0..255 (exact in every float dtype), y
 * (n * T) the T bytes after each (the next byte of each position). Thread-safe. */
void mp_text_batch(const mp_dataset *d, const int64_t *idx, int64_t n, uint64_t seed,
                   int64_t epoch, mp_dtype dt, void *x /* (n, 1, T, 1) */,
                   int32_t *y /* (n * T) */);

#endif
