/* The synthetic dataset (data.format = "synthetic"): images made in memory, for benchmarks that
 * must not depend on files or on reading them. Each class has a pattern: a bright or dark level
 * per 8x8 tile and channel, chosen by a hash of (class, tile, channel); a sample is its class's
 * pattern plus uniform noise, so a model can learn it and accuracy means something. Everything
 * follows from (seed, split): every rank makes the same samples. */
#include <stdio.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/rng.h"
#include "engine/stop.h"
#include "io/dataset.h"
#include "io/memcheck.h"

/* The pattern's level (0 or 1) of (class, tile row, tile column, channel). */
static int pattern(int label, int ty, int tx, int ch)
{
    uint64_t h = ((uint64_t)label * 0x9E3779B97F4A7C15u) ^ ((uint64_t)ty << 40) ^
                 ((uint64_t)tx << 20) ^ (uint64_t)ch;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9u;
    h ^= h >> 29;
    return (int)(h & 1);
}

mp_status mp_synthetic_make(mp_dataset *d, const char *split, int h, int w, int c,
                            int64_t count, int num_classes, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    uint64_t stream;
    if (strcmp(split, "train") == 0)
        stream = 0x5e17;
    else if (strcmp(split, "test") == 0)
        stream = 0x5e18;
    else
        return mp_fail(MP_EUSAGE, "synthetic data: unknown split \"%s\"", split);
    if (h < 1 || w < 1 || c < 1 || count < 1 || num_classes < 2)
        return mp_fail(MP_EUSAGE, "synthetic data: shape %dx%dx%d, %lld samples and %d classes "
                                  "must all be positive (at least 2 classes)",
                       h, w, c, (long long)count, num_classes);
    char what[160];
    snprintf(what, sizeof what, "%s split: %lld images of %dx%dx%d with labels", split,
             (long long)count, h, w, c);
    int64_t shape[3] = {h, w, c}, per_bytes;
    MP_TRY(mp_data_mem_check("synthetic data", what, 3, shape, &per_bytes));
    int64_t sizes[2] = {count, per_bytes + (int64_t)sizeof *d->labels}; /* image and label */
    MP_TRY(mp_data_mem_check("synthetic data", what, 2, sizes, NULL));
    size_t per = (size_t)h * (size_t)w * (size_t)c;
    d->images = mp_alloc((size_t)count * per, MP_MEM_DATA);
    d->labels = mp_alloc((size_t)count * sizeof *d->labels, MP_MEM_DATA);
    d->count = count;
    d->h = h, d->w = w, d->c = c;
    d->num_classes = num_classes;
    mp_rng r;
    mp_rng_seed(&r, seed, stream);
    char doing[200];
    snprintf(doing, sizeof doing, "making the synthetic %s", what);
    for (int64_t i = 0; i < count; i++) {
        mp_status st = i % 1024 ? MP_OK : mp_stop_check(doing);
        if (st != MP_OK) {
            mp_dataset_free(d);
            return st;
        }
        int label = (int)mp_rng_below(&r, (uint64_t)num_classes);
        uint8_t *img = d->images + (size_t)i * per;
        d->labels[i] = label;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < c; ch++) {
                    int level = pattern(label, y / 8, x / 8, ch) ? 160 : 64;
                    int noise = (int)mp_rng_below(&r, 97) - 48;
                    img[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)ch] =
                        (uint8_t)(level + noise);
                }
    }
    return MP_OK;
}
