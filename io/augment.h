/* Training-time data augmentation: the standard CIFAR random crop (zero padding of `pad`
 * pixels on each side, then a random H x W window) and random horizontal flip.
 * The random choices of a sample depend only on (seed, epoch, sample index), never on which
 * thread, rank or batch position produced it. They come from one mp_rng per sample:
 *
 *     mp_rng_seed(&r, seed ^ MP_AUGMENT_SALT, ((uint64_t)epoch << 32) + (uint64_t)index);
 *     oy   = mp_rng_below(&r, 2 * pad + 1);     row offset into the padded image
 *     ox   = mp_rng_below(&r, 2 * pad + 1);     column offset into the padded image
 *     flip = flip && (mp_rng_next(&r) >> 63);   the third draw is made only when flip
 *
 * so output pixel (y, x) is source pixel (y + oy - pad, xx + ox - pad) with xx = W - 1 - x when
 * flipped and x otherwise, or 0 when that falls in the padding. The stream is distinct for every
 * (epoch, index) with 0 <= epoch, index < 2^32; the salt keeps it apart from the sampler's
 * (seed, epoch) stream. pad = 0 and flip = false leave the image unchanged. */
#ifndef MP_AUGMENT_H
#define MP_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/dtype.h"
#include "io/dataset.h"

#define MP_AUGMENT_SALT 0x5bd1e9955bd1e995ull

/* Writes sample `index` of d, cropped and possibly flipped as above, into out (h, w, c) uint8
 * (caller-owned, d->h * d->w * d->c bytes). Padding pixels are 0 (black, before any
 * normalisation, as torchvision's RandomCrop(padding=pad)). 0 <= index < d->count, pad >= 0.
 * Thread-safe: it only reads d. */
void mp_augment_crop_flip(const mp_dataset *d, int64_t index, uint64_t seed, int64_t epoch,
                          int pad, bool flip, uint8_t *out /* (H, W, C) */);

/* Fills tables (c * 256 elements of dt) with each channel's 256 pixel values normalised,
 * (p / 255 - mean[ch]) / std[ch] in double rounded once to dt (by mp_store). MP_EDATA naming
 * the pixel value and channel when one rounds to infinity or NaN in dt (a tiny data.std). */
mp_status mp_pixel_tables(void *tables, size_t c, const double *mean, const double *std,
                          mp_dtype dt);

/* mp_dataset_batch with augmentation and per-channel normalisation: gathers the samples
 * idx[0..n) into x (n, h, w, c) of dtype `dt`, each augmented with mp_augment_crop_flip(d,
 * idx[i], seed, epoch, pad, flip) (keyed by the dataset index idx[i], not the position i), then
 * each pixel p of channel ch normalised as (p / 255 - mean[ch]) / std[ch] in double and rounded
 * once to dt (half types through FP32, as mp_store does); labels go to y (n). mean and std hold
 * d->c entries (CIFAR-10: mean 0.4914, 0.4822, 0.4465; std 0.2470, 0.2435, 0.2616).
 * A text dataset (d->text) is mp_text_batch(d, idx, n, seed, epoch, dt, x, y), a token
 * dataset (d->tokens) io/tokens.h's mp_tokens_batch with the same arguments: y then holds
 * n * T labels, and mean, std, pad and flip are ignored. An image folder (d->folder) is
 * io/folder.h's mp_folder_batch, augmented (random resized crop and flip) when flip, pad
 * ignored. Returns MP_OK, or the error of a
 * token shard that cannot be read (MP_EDATA; the only one that reads files). Thread-safe: it
 * only reads d, mean and std (and a token dataset's files). */
mp_status mp_dataset_batch_augmented(const mp_dataset *d, const int64_t *idx, int64_t n,
                                     const double *mean /* (c) */, const double *std /* (c) */,
                                     uint64_t seed, int64_t epoch, int pad, bool flip,
                                     mp_dtype dt, void *x /* (n, H, W, C) */,
                                     int32_t *y /* (n * mp_dataset_label_len(d)) */);

#endif
