/* Random crop and flip (see augment.h for the seeding convention). A sample's window is drawn
 * from its own freshly seeded mp_rng, so nothing is shared between calls and the result is the
 * same whatever order, thread or rank computes it in. Output pixels are mapped straight to
 * source pixels (or to the zero padding); the padded image is never materialised. */
#include "io/augment.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"
#include "io/folder.h"
#include "io/h5data.h"
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

mp_status mp_pixel_tables(void *tables, size_t c, const double *mean, const double *std,
                          mp_dtype dt)
{
    size_t es = mp_dtype_size(dt);
    unsigned char *t = tables;
    for (size_t ch = 0; ch < c; ch++)
        for (int p = 0; p < 256; p++) {
            double v = ((double)p / 255.0 - mean[ch]) / std[ch];
            mp_store(t + ch * 256 * es, dt, (size_t)p, v);
            if (!isfinite(mp_load(t + ch * 256 * es, dt, (size_t)p)))
                return mp_fail(MP_EDATA, "data.mean and data.std take pixel value %d of channel "
                               "%zu to %g, beyond %s's range (the input's dtype at this opt "
                               "level)", p, ch, v, mp_dtype_name(dt));
        }
    return MP_OK;
}

/* The output columns [*x0, *x1) of a row of `width` whose source column under window w is valid
 * (aug_src_col(w, x, width, pad) >= 0): source column base + dir x there (dir 1, or -1 when
 * flipped); the columns outside are padding. 0 <= *x0 <= *x1 <= width; the range may be empty
 * (*x0 == *x1). */
static void aug_valid_cols(const aug_window *w, int width, int pad, int *x0, int *x1, int *base,
                           int *dir)
{
    *dir = w->flip ? -1 : 1;
    *base = w->flip ? width - 1 + w->ox - pad : w->ox - pad;
    /* valid: 0 <= base + dir x < width */
    int lo = w->flip ? *base - width + 1 : -*base, hi = w->flip ? *base + 1 : width - *base;
    *x0 = lo > 0 ? (lo < width ? lo : width) : 0;
    *x1 = hi < width ? hi : width;
    if (*x1 < *x0) /* empty: all padding (a pad wider than the image can put lo past width) */
        *x1 = *x0;
}

/* Pixels x0 .. x1 - 1 of an output row at dst (es bytes an element, c channels), from the uint8
 * source pixels at src + (base + dir x) c, each channel ch through its table (tables + ch 256 es);
 * with src NULL, padding (the tables' pixel value 0). Inlined with es and c constants, so that each
 * element is one load and one store. */
static inline __attribute__((always_inline)) void
put_pixels(unsigned char *dst, const uint8_t *src, int x0, int x1, int base, int dir,
           const unsigned char *tables, size_t c, size_t es)
{
    for (int x = x0; x < x1; x++) {
        const uint8_t *p = src ? src + (size_t)(base + dir * x) * c : NULL;
        for (size_t ch = 0; ch < c; ch++)
            memcpy(dst + ((size_t)x * c + ch) * es, tables + (ch * 256 + (p ? p[ch] : 0)) * es,
                   es);
    }
}

/* Rows of pixel sample src (h, w, c uint8) under window w into dst (h, w, c of es bytes an
 * element) through the per-channel tables: each row's padding, then its valid columns. */
static inline __attribute__((always_inline)) void
put_rows(const mp_dataset *d, const uint8_t *src, const aug_window *w, int pad,
         const unsigned char *tables, unsigned char *dst, size_t c, size_t es)
{
    int x0, x1, base, dir;
    aug_valid_cols(w, d->w, pad, &x0, &x1, &base, &dir);
    size_t row = (size_t)d->w * c;
    for (int yy = 0; yy < d->h; yy++) {
        int sy = aug_src_row(w, yy, d->h, pad);
        unsigned char *out = dst + (size_t)yy * row * es;
        if (sy < 0) {
            put_pixels(out, NULL, 0, d->w, 0, 0, tables, c, es);
            continue;
        }
        put_pixels(out, NULL, 0, x0, 0, 0, tables, c, es);
        put_pixels(out, src + (size_t)sy * row, x0, x1, base, dir, tables, c, es);
        put_pixels(out, NULL, x1, d->w, 0, 0, tables, c, es);
    }
}

/* v as mp_store rounds it on the way to dt: through FP32 unless dt is FP64, so that a value
 * compares with mp_dtype_overflow(dt) as its stored value will. */
static double as_stored(double v, mp_dtype dt) { return dt == MP_F64 ? v : (double)(float)v; }

/* Sample `index` of image dataset d, augmented by window w, normalised into dst (h, w, c of
 * dt): src holds its pixels (uint8) or, when values, its doubles; padding is pixel or value 0.
 * Pixels go through the tables, the element size and the usual channel counts (1, 3) fixed at
 * compile time. Returns -1, or for values the first one (its index in src, its value in *bad)
 * that dt cannot hold once normalised (the padding's value is the caller's to check). */
static int64_t put_sample(const mp_dataset *d, const void *src, bool values,
                          const aug_window *w, int pad, const unsigned char *tables,
                          const double *mean, const double *std, mp_dtype dt, unsigned char *dst,
                          double *bad)
{
    size_t es = mp_dtype_size(dt), wd = (size_t)d->w, c = (size_t)d->c;
    if (!values) {
        const uint8_t *px = src;
        if (es == 2 && c == 3)
            put_rows(d, px, w, pad, tables, dst, 3, 2);
        else if (es == 4 && c == 3)
            put_rows(d, px, w, pad, tables, dst, 3, 4);
        else if (es == 2 && c == 1)
            put_rows(d, px, w, pad, tables, dst, 1, 2);
        else if (es == 4 && c == 1)
            put_rows(d, px, w, pad, tables, dst, 1, 4);
        else
            put_rows(d, px, w, pad, tables, dst, c, es);
        return -1;
    }
    double lim = mp_dtype_overflow(dt); /* padding's value: checked once a batch */
    for (int yy = 0; yy < d->h; yy++) {
        int sy = aug_src_row(w, yy, d->h, pad);
        for (int xx = 0; xx < d->w; xx++) {
            int sx = sy < 0 ? -1 : aug_src_col(w, xx, d->w, pad);
            size_t from = sx < 0 ? 0 : ((size_t)sy * wd + (size_t)sx) * c;
            size_t to = ((size_t)yy * wd + (size_t)xx) * c;
            for (size_t ch = 0; ch < c; ch++) {
                double v = sx < 0 ? 0.0 : ((const double *)src)[from + ch];
                double x = (v - mean[ch]) / std[ch];
                if (sx >= 0 && !(fabs(as_stored(x, dt)) < lim)) {
                    *bad = v;
                    return (int64_t)(from + ch);
                }
                mp_store(dst, dt, to + ch, x);
            }
        }
    }
    return -1;
}

mp_status mp_dataset_batch_augmented(const mp_dataset *d, const int64_t *idx, int64_t n,
                                     const double *mean, const double *std, uint64_t seed,
                                     int64_t epoch, int pad, bool flip, mp_dtype dt, void *x,
                                     int32_t *y)
{
    if (d->tokens)
        return mp_tokens_batch(d, idx, n, seed, epoch, dt, x, y);
    if (d->folder) /* augmentation: its own (random resized crop and flip), not pad and flip */
        return mp_folder_batch(d, idx, n, mean, std, seed, epoch, flip, dt, x, y);
    if (d->text) {
        mp_text_batch(d, idx, n, seed, epoch, dt, x, y);
        return MP_OK;
    }
    size_t es = mp_dtype_size(dt), c = (size_t)d->c;
    size_t per = (size_t)d->h * (size_t)d->w * c;
    bool file = d->h5 != NULL, values = file && mp_h5data_float(d);
    double small[MP_DATA_MAX_CHANNELS * 256]; /* tables of 256 elements of dt per channel */
    void *sample = file ? malloc(per * (values ? sizeof(double) : 1)) : NULL;
    if (file && !sample)
        return mp_fail(MP_EDATA, "out of memory for a sample of %zu values", per);
    assert(c <= MP_DATA_MAX_CHANNELS);
    mp_status st = values ? MP_OK : mp_pixel_tables(small, c, mean, std, dt); /* 0: padding */
    for (size_t ch = 0; values && pad > 0 && ch < c && st == MP_OK; ch++)
        if (!(fabs(as_stored((0.0 - mean[ch]) / std[ch], dt)) < mp_dtype_overflow(dt)))
            st = mp_fail(MP_EDATA, "data.mean and data.std take the padding (0) of channel %zu "
                         "to %g, beyond %s's range (the input's dtype at this opt level)", ch,
                         (0.0 - mean[ch]) / std[ch], mp_dtype_name(dt));
    for (int64_t i = 0; st == MP_OK && i < n; i++) {
        assert(idx[i] >= 0 && idx[i] < d->count);
        const void *src = sample;
        if (file)
            st = mp_h5data_read(d, idx[i], sample);
        else
            src = d->images + (size_t)idx[i] * per;
        aug_window w = aug_draw(seed, epoch, idx[i], pad, flip);
        double v = 0.0;
        int64_t bad = st == MP_OK ? put_sample(d, src, values, &w, pad,
                                               (const unsigned char *)small, mean, std, dt,
                                               (unsigned char *)x + (size_t)i * per * es, &v)
                                  : -1;
        if (bad >= 0) { /* finite in the file (mp_h5data_read), not once normalised */
            char at[800];
            st = mp_fail(MP_EDATA, "%s holds %g at row %lld, column %lld, channel %lld, which "
                         "(v - data.mean) / data.std takes beyond %s's range (the input's "
                         "dtype at this opt level)",
                         mp_h5data_sample_name(d, idx[i], at, sizeof at), v,
                         (long long)(bad / (int64_t)c / d->w), (long long)(bad / (int64_t)c % d->w),
                         (long long)(bad % (int64_t)c), mp_dtype_name(dt));
        }
        y[i] = d->labels[idx[i]];
    }
    free(sample);
    return st;
}
