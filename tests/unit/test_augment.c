/* Random crop and flip: the identity case, agreement with an independent reference that
 * materialises the zero-padded image and re-seeds the rng exactly as augment.h documents,
 * hand-picked windows (zero borders, shifted content, mirrored rows), determinism under any call
 * order, fresh crops each epoch, and the augmented batch's per-channel normalisation per dtype,
 * for every window (padding only, partial rows, flipped) and for 3 and 1 channels. */
#include "tests/util/test_util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "io/augment.h"
#include "io/dataset.h"

#define N 64
#define H 5
#define W 7
#define C 3
#define PER (H * W * C)

static uint8_t images[N * PER];
static int32_t labels[N];

/* A non-square dataset whose pixels are nonzero and distinct within each sample, so a zero can
 * only be padding and any misplaced pixel shows. */
static mp_dataset make_dataset(void)
{
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < PER; k++)
            images[i * PER + k] = (uint8_t)(1 + (k + 37 * i) % 254);
        labels[i] = (i * 7) % 10;
    }
    mp_dataset d = {.count = N, .h = H, .w = W, .c = C, .num_classes = 10,
                    .images = images, .labels = labels};
    return d;
}

typedef struct window {
    int oy, ox;
    bool flip;
} window;

/* The window augment.h documents for (seed, epoch, index). */
static window draw(uint64_t seed, int64_t epoch, int64_t index, int pad, bool flip)
{
    mp_rng r;
    mp_rng_seed(&r, seed ^ MP_AUGMENT_SALT, (uint64_t)epoch * 4294967296ull + (uint64_t)index);
    window w;
    w.oy = (int)mp_rng_below(&r, 2 * (uint64_t)pad + 1);
    w.ox = (int)mp_rng_below(&r, 2 * (uint64_t)pad + 1);
    w.flip = flip && mp_rng_next(&r) >= (1ull << 63);
    return w;
}

/* Reference: build the padded image, cut the window, then mirror each row if flipped. */
static void reference(const mp_dataset *d, int64_t index, window w, int pad, uint8_t *out)
{
    int ph = H + 2 * pad, pw = W + 2 * pad;
    uint8_t *padded = calloc((size_t)ph * pw * C, 1);
    assert_non_null(padded);
    for (int y = 0; y < H; y++)
        memcpy(padded + ((size_t)(y + pad) * pw + pad) * C,
               d->images + index * PER + (size_t)y * W * C, W * C);
    uint8_t crop[PER];
    for (int y = 0; y < H; y++)
        memcpy(crop + y * W * C, padded + ((size_t)(y + w.oy) * pw + w.ox) * C, W * C);
    free(padded);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            memcpy(out + (y * W + x) * C, crop + (y * W + (w.flip ? W - 1 - x : x)) * C, C);
}

static const uint8_t *src_px(const mp_dataset *d, int64_t i, int y, int x)
{
    return d->images + i * PER + (y * W + x) * C;
}

static void test_identity(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    uint8_t out[PER];
    for (int64_t i = 0; i < N; i++)
        for (int64_t epoch = 0; epoch < 3; epoch++) {
            memset(out, 0xee, sizeof out);
            mp_augment_crop_flip(&d, i, 1234 + (uint64_t)epoch, epoch, 0, false, out);
            assert_memory_equal(out, images + i * PER, PER);
        }
}

static void test_matches_reference(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    const int pads[] = {0, 1, 2, 4, 9};
    int flipped = 0, shifted = 0, total = 0;
    for (int p = 0; p < 5; p++)
        for (int f = 0; f < 2; f++)
            for (int64_t epoch = 0; epoch < 3; epoch++)
                for (int64_t i = 0; i < N; i++) {
                    window w = draw(77, epoch, i, pads[p], f);
                    uint8_t got[PER], want[PER];
                    mp_augment_crop_flip(&d, i, 77, epoch, pads[p], f, got);
                    reference(&d, i, w, pads[p], want);
                    assert_memory_equal(got, want, PER);
                    flipped += w.flip;
                    shifted += w.oy != pads[p] || w.ox != pads[p];
                    total++;
                }
    /* The comparison covered flipped and shifted windows, not just identities. */
    assert_true(flipped > total / 8 && flipped < 3 * total / 8);
    assert_true(shifted > total / 2);
}

/* Finds a (seed, index) whose documented window at epoch 0 is `want`. */
static void find_window(int pad, bool flip, window want, uint64_t *seed, int64_t *index)
{
    for (uint64_t s = 0; s < 1000; s++)
        for (int64_t i = 0; i < N; i++) {
            window w = draw(s, 0, i, pad, flip);
            if (w.oy == want.oy && w.ox == want.ox && w.flip == want.flip) {
                *seed = s;
                *index = i;
                return;
            }
        }
    fail_msg("no (seed, index) draws window (%d, %d, %d)", want.oy, want.ox, want.flip);
}

static void test_known_windows(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    uint8_t out[PER];
    /* pad 1, window at the top-left corner: row 0 and column 0 are padding, the rest is the
     * source moved down and right by one. */
    uint64_t seed;
    int64_t i;
    find_window(1, false, (window){0, 0, false}, &seed, &i);
    mp_augment_crop_flip(&d, i, seed, 0, 1, false, out);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const uint8_t *o = out + (y * W + x) * C;
            for (int ch = 0; ch < C; ch++)
                assert_int_equal(o[ch], y == 0 || x == 0 ? 0 : src_px(&d, i, y - 1, x - 1)[ch]);
        }
    /* pad 1, window at the bottom-right corner: the last row and column are padding. */
    find_window(1, false, (window){2, 2, false}, &seed, &i);
    mp_augment_crop_flip(&d, i, seed, 0, 1, false, out);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int ch = 0; ch < C; ch++)
                assert_int_equal(out[(y * W + x) * C + ch],
                                 y == H - 1 || x == W - 1 ? 0 : src_px(&d, i, y + 1, x + 1)[ch]);
    /* Centred and flipped: every row is the source row mirrored, channels kept in order. */
    find_window(1, true, (window){1, 1, true}, &seed, &i);
    mp_augment_crop_flip(&d, i, seed, 0, 1, true, out);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            assert_memory_equal(out + (y * W + x) * C, src_px(&d, i, y, W - 1 - x), C);
    /* Centred and not flipped (flip allowed): the identity. */
    find_window(1, true, (window){1, 1, false}, &seed, &i);
    mp_augment_crop_flip(&d, i, seed, 0, 1, true, out);
    assert_memory_equal(out, images + i * PER, PER);
    /* A pad larger than the image: a corner window holds only padding. */
    find_window(8, false, (window){0, 16, false}, &seed, &i);
    memset(out, 0xee, sizeof out);
    mp_augment_crop_flip(&d, i, seed, 0, 8, false, out);
    for (int k = 0; k < PER; k++)
        assert_int_equal(out[k], 0);
}

/* With flip allowed the crop draws are unchanged, so each output is the flip-off output or its
 * mirror image, and both happen. */
static void test_flip_mirrors(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    int mirrored = 0;
    for (int64_t i = 0; i < N; i++) {
        uint8_t plain[PER], fl[PER], mirror[PER];
        mp_augment_crop_flip(&d, i, 99, 4, 3, false, plain);
        mp_augment_crop_flip(&d, i, 99, 4, 3, true, fl);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                memcpy(mirror + (y * W + x) * C, plain + (y * W + W - 1 - x) * C, C);
        bool is_plain = memcmp(fl, plain, PER) == 0, is_mirror = memcmp(fl, mirror, PER) == 0;
        assert_true(is_plain != is_mirror); /* the source has no symmetric rows */
        mirrored += is_mirror;
        assert_int_equal(is_mirror, draw(99, 4, i, 3, true).flip);
    }
    assert_in_range(mirrored, 16, 48);
}

static void test_padding_counts(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    for (int64_t i = 0; i < N; i++) {
        const int pad = 2;
        window w = draw(3, 1, i, pad, true);
        uint8_t out[PER];
        mp_augment_crop_flip(&d, i, 3, 1, pad, true, out);
        int rows = H - abs(w.oy - pad), cols = W - abs(w.ox - pad), nonzero = 0;
        for (int k = 0; k < PER; k++)
            nonzero += out[k] != 0;
        assert_int_equal(nonzero, rows * cols * C);
        /* Padding rows sit at the top when the window starts above the image, else at the
         * bottom. */
        int zero_row = w.oy < pad ? 0 : H - 1;
        if (w.oy != pad)
            for (int k = 0; k < W * C; k++)
                assert_int_equal(out[zero_row * W * C + k], 0);
    }
}

static void test_determinism(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    static uint8_t first[N * PER], again[N * PER];
    for (int64_t i = 0; i < N; i++)
        mp_augment_crop_flip(&d, i, 2024, 7, 4, true, first + i * PER);
    /* Another "thread" visits the samples in a shuffled order, interleaved with calls for
     * another epoch and seed; each sample must come out the same. */
    int64_t order[N];
    for (int64_t i = 0; i < N; i++)
        order[i] = i;
    mp_rng r;
    mp_rng_seed(&r, 31337, 0);
    for (int64_t i = N - 1; i > 0; i--) {
        int64_t j = (int64_t)mp_rng_below(&r, (uint64_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    assert_true(order[0] != 0 || order[1] != 1);
    memset(again, 0xee, sizeof again);
    for (int64_t k = 0; k < N; k++) {
        uint8_t junk[PER];
        mp_augment_crop_flip(&d, order[(k + 5) % N], 1, 8, 4, true, junk);
        mp_augment_crop_flip(&d, order[k], 2024, 7, 4, true, again + order[k] * PER);
    }
    assert_memory_equal(first, again, sizeof first);
    /* The batch variant agrees with the per-sample function whatever the batch order. */
    int64_t rev[N];
    for (int64_t i = 0; i < N; i++)
        rev[i] = N - 1 - i;
    static float xb[N * PER], xs[PER];
    int32_t y[N];
    const double mean[C] = {0, 0, 0}, std[C] = {1, 1, 1};
    mp_dataset_batch_augmented(&d, rev, N, mean, std, 2024, 7, 4, true, MP_F32, xb, y);
    for (int64_t k = 0; k < N; k++)
        for (int j = 0; j < PER; j++) {
            xs[j] = (float)((double)first[rev[k] * PER + j] / 255.0);
            if (xb[k * PER + j] != xs[j])
                fail_msg("batch position %lld, element %d: got %g, want %g", (long long)k, j,
                         (double)xb[k * PER + j], (double)xs[j]);
        }
}

static void test_epochs_differ(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    int differ_epoch = 0, differ_seed = 0;
    for (int64_t i = 0; i < N; i++) {
        uint8_t a[PER], b[PER], c[PER];
        mp_augment_crop_flip(&d, i, 11, 0, 4, true, a);
        mp_augment_crop_flip(&d, i, 11, 1, 4, true, b);
        mp_augment_crop_flip(&d, i, 12, 0, 4, true, c);
        differ_epoch += memcmp(a, b, PER) != 0;
        differ_seed += memcmp(a, c, PER) != 0;
    }
    /* Two windows of pad 4 with flip coincide with probability 1/162. */
    assert_true(differ_epoch >= N - 4);
    assert_true(differ_seed >= N - 4);
    /* Neighbouring indices in one epoch get independent windows too. */
    int same = 0;
    for (int64_t i = 0; i + 1 < N; i++) {
        window u = draw(11, 0, i, 4, true), v = draw(11, 0, i + 1, 4, true);
        same += u.oy == v.oy && u.ox == v.ox && u.flip == v.flip;
    }
    assert_true(same <= 4);
}

static void test_batch_normalisation(void **state)
{
    (void)state;
    mp_dataset d = make_dataset();
    enum { B = 5 };
    const int64_t idx[B] = {3, 0, 63, 3, 17};
    const double mean[C] = {0.4914, 0.4822, 0.4465}, std[C] = {0.2470, 0.2435, 0.2616};
    const uint64_t seed = 8;
    const int64_t epoch = 2;
    const int pad = 4;
    float x32[B * PER];
    uint16_t x16[B * PER], xbf[B * PER];
    double x64[B * PER];
    int32_t y[B];
    memset(y, -1, sizeof y);
    mp_dataset_batch_augmented(&d, idx, B, mean, std, seed, epoch, pad, true, MP_F32, x32, y);
    mp_dataset_batch_augmented(&d, idx, B, mean, std, seed, epoch, pad, true, MP_F16, x16, y);
    mp_dataset_batch_augmented(&d, idx, B, mean, std, seed, epoch, pad, true, MP_BF16, xbf, y);
    mp_dataset_batch_augmented(&d, idx, B, mean, std, seed, epoch, pad, true, MP_F64, x64, y);
    int padded = 0;
    for (int i = 0; i < B; i++) {
        assert_int_equal(y[i], labels[idx[i]]);
        uint8_t aug[PER];
        mp_augment_crop_flip(&d, idx[i], seed, epoch, pad, true, aug);
        for (int k = 0; k < PER; k++) {
            int ch = k % C;
            double want = ((double)aug[k] / 255.0 - mean[ch]) / std[ch];
            float wf = (float)want;
            assert_memory_equal(&x32[i * PER + k], &wf, sizeof wf);
            assert_int_equal(x16[i * PER + k], mp_f32_to_f16(x32[i * PER + k]));
            assert_int_equal(xbf[i * PER + k], mp_f32_to_bf16(x32[i * PER + k]));
            assert_true(x64[i * PER + k] == want);
            padded += aug[k] == 0;
        }
    }
    assert_true(padded > 0); /* padding normalised to -mean / std was covered */
    /* Samples 0 and 3 of the batch are the same index and so the same augmented image. */
    assert_memory_equal(x32, x32 + 3 * PER, PER * sizeof(float));
    /* Without augmentation and with equal channels it is exactly mp_dataset_batch. */
    const double m1[C] = {0.3, 0.3, 0.3}, s1[C] = {0.7, 0.7, 0.7};
    float plain[B * PER];
    int32_t yp[B];
    mp_dataset_batch_augmented(&d, idx, B, m1, s1, seed, epoch, 0, false, MP_F32, x32, y);
    mp_dataset_batch(&d, idx, B, 0.3, 0.7, MP_F32, plain, yp);
    assert_memory_equal(x32, plain, sizeof plain);
    assert_memory_equal(y, yp, sizeof y);
}

/* The batch, for every pad (up to wider than the image in both views), flip, dtype and for 3
 * channels and 1 (the same bytes seen as H x 3W x 1): each element is the crop's pixel
 * normalised and stored as mp_store rounds it, whatever window the sample drew, and nothing is
 * written past the batch. */
static void test_batch_every_window(void **state)
{
    (void)state;
    const int pads[] = {0, 1, 3, 4, 6, 7, 12, 24};
    const mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    enum { CANARY = 512 };
    static unsigned char want[PER * 8], one[PER * 8 + CANARY];
    for (int view = 0; view < 2; view++) {
        mp_dataset d = make_dataset();
        if (view == 1)
            d.w = W * C, d.c = 1;
        const double mean[C] = {0.4914, 0.4822, 0.4465}, std[C] = {0.2470, 0.2435, 0.2616};
        int64_t rev[N];
        for (int64_t i = 0; i < N; i++)
            rev[i] = N - 1 - i;
        for (size_t p = 0; p < sizeof pads / sizeof *pads; p++)
            for (int f = 0; f < 2; f++)
                for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
                    int32_t y[N];
                    size_t es = mp_dtype_size(dts[t]), size = (size_t)N * PER * es;
                    /* exactly the batch's bytes, then bytes that must stay as they are */
                    unsigned char *x = malloc(size + CANARY);
                    assert_non_null(x);
                    memset(x + size, 0xab, CANARY);
                    mp_dataset_batch_augmented(&d, rev, N, mean, std, 5, 3, pads[p], f, dts[t], x,
                                               y);
                    for (size_t k = 0; k < CANARY; k++)
                        if (x[size + k] != 0xab)
                            fail_msg("%d channel(s), pad %d, flip %d, dtype %d: written past the "
                                     "batch", d.c, pads[p], f, (int)dts[t]);
                    for (int64_t k = 0; k < N; k++) {
                        uint8_t aug[PER];
                        mp_augment_crop_flip(&d, rev[k], 5, 3, pads[p], f, aug);
                        for (int e = 0; e < PER; e++) {
                            int ch = e % d.c;
                            mp_store(want, dts[t], (size_t)e,
                                     ((double)aug[e] / 255.0 - mean[ch]) / std[ch]);
                        }
                        if (memcmp(x + (size_t)k * PER * es, want, PER * es) != 0)
                            fail_msg("%d channel(s), pad %d, flip %d, dtype %d: sample %lld "
                                     "differs",
                                     d.c, pads[p], f, (int)dts[t], (long long)rev[k]);
                        /* alone, into exactly its bytes: its last row is the buffer's end */
                        int32_t y1;
                        memset(one + PER * es, 0xab, CANARY);
                        mp_dataset_batch_augmented(&d, &rev[k], 1, mean, std, 5, 3, pads[p], f,
                                                   dts[t], one, &y1);
                        for (size_t b = 0; b < CANARY; b++)
                            if (one[PER * es + b] != 0xab)
                                fail_msg("%d channel(s), pad %d, flip %d, dtype %d: sample %lld "
                                         "alone: written past it",
                                         d.c, pads[p], f, (int)dts[t], (long long)rev[k]);
                        assert_memory_equal(one, want, PER * es);
                        assert_int_equal(y[k], labels[rev[k]]);
                    }
                    free(x);
                }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity),       cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_known_windows),  cmocka_unit_test(test_flip_mirrors),
        cmocka_unit_test(test_padding_counts), cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_epochs_differ),  cmocka_unit_test(test_batch_normalisation),
        cmocka_unit_test(test_batch_every_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
