/* make_folder IDX_DIR OUT NTRAIN NTEST [SIDE [FORMAT]]: writes the first NTRAIN training and
 * NTEST test images of the IDX files in IDX_DIR (Fashion-MNIST) as an image folder,
 * OUT/train/L/N.EXT and OUT/val/L/N.EXT (L the label, N the index, 6 digits): FORMAT mixed
 * (the default: PNG for even N, JPEG of quality 90 for odd N), jpeg or png. With SIDE > 0 each
 * image is first upscaled to SIDE x SIDE (nearest pixel) and written as RGB, gray in every
 * channel (the 224 x 224 variant of the loader benchmark). Exits 0, or 2 with one line on
 * stderr. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/dataset.h"
#include "tests/util/image_files.h"

static int write_split(const mp_dataset *d, const char *out, const char *split, int side,
                       char format)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", out, split);
    mkdir(out, 0755);
    mkdir(dir, 0755);
    int h = side > 0 ? side : d->h, w = side > 0 ? side : d->w, c = side > 0 ? 3 : 1;
    uint8_t *px = malloc((size_t)h * (size_t)w * (size_t)c);
    if (!px)
        return -1;
    for (int64_t i = 0; i < d->count; i++) {
        snprintf(path, sizeof path, "%s/%d", dir, d->labels[i]);
        mkdir(path, 0755);
        const uint8_t *src = d->images + (size_t)i * (size_t)d->h * (size_t)d->w;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < c; ch++)
                    px[((size_t)y * w + x) * c + ch] = src[(size_t)(y * d->h / h) * d->w +
                                                           (size_t)(x * d->w / w)];
        bool jpeg = format == 'j' || (format == 'm' && i % 2);
        snprintf(path, sizeof path, "%s/%d/%06lld.%s", dir, d->labels[i], (long long)i,
                 jpeg ? "jpg" : "png");
        int rc = jpeg ? mp_test_write_jpeg(path, px, h, w, c, 90)
                      : mp_test_write_png(path, px, h, w, c);
        if (rc != 0) {
            free(px);
            return -1;
        }
    }
    free(px);
    return 0;
}

int main(int argc, char **argv)
{
    const char *fmt = argc > 6 ? argv[6] : "mixed";
    if (argc < 5 || argc > 7 || (strcmp(fmt, "mixed") && strcmp(fmt, "jpeg") && strcmp(fmt, "png"))) {
        fprintf(stderr, "usage: make_folder IDX_DIR OUT NTRAIN NTEST [SIDE [mixed|jpeg|png]]\n");
        return 2;
    }
    int side = argc > 5 ? atoi(argv[5]) : 0;
    mp_dataset tr, te;
    if (mp_idx_load(&tr, argv[1], "train", 10, atoll(argv[3])) != MP_OK ||
        mp_idx_load(&te, argv[1], "test", 10, atoll(argv[4])) != MP_OK) {
        fprintf(stderr, "make_folder: %s\n", mp_error_message());
        return 2;
    }
    int rc = write_split(&tr, argv[2], "train", side, fmt[0]) ||
             write_split(&te, argv[2], "val", side, fmt[0]);
    if (rc)
        fprintf(stderr, "make_folder: cannot write under %s\n", argv[2]);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    return rc ? 2 : 0;
}
