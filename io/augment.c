/* Random crop and flip (see augment.h for the seeding convention). A sample's window is drawn
 * from its own freshly seeded mp_rng, so nothing is shared between calls and the result is the
 * same whatever order, thread or rank computes it in. Output pixels are mapped straight to
 * source pixels (or to the zero padding); the padded image is never materialised. */
#include "io/augment.h"

#include <assert.h>
#include <string.h>

#include "engine/rng.h"
#include "io/tokens.h"

typedef struct aug_window {
    int oy, ox; /* offsets of the crop in the padded image, in [0, 2 pad] */
    bool flip;  /* mirror the crop's columns */
} aug_window;

static aug_window aug_draw(uint64_t seed, int64_t epoch, int64_t index, int pad, bool flip)
{
    assert(pad >= 0);
    mp_rng r;
    mp_rng_seed(&r, seed ^ MP_AUGMENT_SALT, ((uint64_t)epoch << 32) + (uint64_t)index);
    aug_window w;
    uint64_t span = 2 * (uint64_t)pad + 1;
    w.oy = (int)mp_rng_below(&r, span);
    w.ox = (int)mp_rng_below(&r, span);
    w.flip = flip && (mp_rng_next(&r) >> 63);
    return w;
}

/* The source column for output column x, or -1 when it falls in the padding. */
static int aug_src_col(const aug_window *w, int x, int width, int pad)
{
    int xx = w->flip ? width - 1 - x : x;
    int sx = xx + w->ox - pad;
    return sx >= 0 && sx < width ? sx : -1;
}

/* The source row for output row y, or -1 when it falls in the padding. */
static int aug_src_row(const aug_window *w, int y, int height, int pad)
{
    int sy = y + w->oy - pad;
    return sy >= 0 && sy < height ? sy : -1;
}

void mp_augment_crop_flip(const mp_dataset *d, int64_t index, uint64_t seed, int64_t epoch,
                          int pad, bool flip, uint8_t *out)
{
    assert(index >= 0 && index < d->count);
    aug_window w = aug_draw(seed, epoch, index, pad, flip);
    size_t c = (size_t)d->c;
    const uint8_t *src = d->images + (size_t)index * (size_t)d->h * (size_t)d->w * c;
    for (int y = 0; y < d->h; y++) {
        int sy = aug_src_row(&w, y, d->h, pad);
        uint8_t *row = out + (size_t)y * (size_t)d->w * c;
        for (int x = 0; x < d->w; x++) {
            int sx = sy < 0 ? -1 : aug_src_col(&w, x, d->w, pad);
            if (sx < 0)
                memset(row + (size_t)x * c, 0, c);
            else
                memcpy(row + (size_t)x * c, src + ((size_t)sy * (size_t)d->w + (size_t)sx) * c,
                       c);
        }
    }
}

mp_status mp_dataset_batch_augmented(const mp_dataset *d, const int64_t *idx, int64_t n,
                                     const double *mean, const double *std, uint64_t seed,
                                     int64_t epoch, int pad, bool flip, mp_dtype dt, void *x,
                                     int32_t *y)
{
    if (d->tokens)
        return mp_tokens_batch(d, idx, n, seed, epoch, dt, x, y);
    if (d->text) {
        mp_text_batch(d, idx, n, seed, epoch, dt, x, y);
        return MP_OK;
    }
    /* Channel by channel: the channel's 256 normalised values are rounded once (by mp_store)
     * into a table, then every sample's pixels of that channel are copied from it. Redrawing a
     * sample's window per channel costs a seed and three draws, and needs no scratch memory. */
    double table[256]; /* 256 elements of dt; double is the widest and most aligned dtype */
    size_t es = mp_dtype_size(dt);
    size_t h = (size_t)d->h, wd = (size_t)d->w, c = (size_t)d->c, per = h * wd * c;
    unsigned char *out = x;
    for (size_t ch = 0; ch < c; ch++) {
        for (int p = 0; p < 256; p++)
            mp_store(table, dt, (size_t)p, ((double)p / 255.0 - mean[ch]) / std[ch]);
        for (int64_t i = 0; i < n; i++) {
            assert(idx[i] >= 0 && idx[i] < d->count);
            aug_window w = aug_draw(seed, epoch, idx[i], pad, flip);
            const uint8_t *src = d->images + (size_t)idx[i] * per;
            unsigned char *dst = out + (size_t)i * per * es;
            for (int yy = 0; yy < d->h; yy++) {
                int sy = aug_src_row(&w, yy, d->h, pad);
                for (int xx = 0; xx < d->w; xx++) {
                    int sx = sy < 0 ? -1 : aug_src_col(&w, xx, d->w, pad);
                    uint8_t v = sx < 0 ? 0 : src[((size_t)sy * wd + (size_t)sx) * c + ch];
                    size_t k = ((size_t)yy * wd + (size_t)xx) * c + ch;
                    memcpy(dst + k * es, (const unsigned char *)table + (size_t)v * es, es);
                }
            }
        }
    }
    for (int64_t i = 0; i < n; i++)
        y[i] = d->labels[idx[i]];
    return MP_OK;
}
