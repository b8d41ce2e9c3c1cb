/* JPEG and PNG files decoded to 8-bit pixels, with libjpeg-turbo (its libjpeg API) and libpng
 * (its simplified API), for image folders (io/folder.c). */
#ifndef MP_IMAGE_DECODE_H
#define MP_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

/* The largest side and pixel count decoded: larger images are refused before any pixel
 * memory is allocated. */
#define MP_IMAGE_MAX_SIDE 16384
#define MP_IMAGE_MAX_PIXELS ((int64_t)64 << 20)

typedef struct mp_image {
    uint8_t *px;  /* (h, w, c) row-major, malloc'd; free with free() */
    int h, w, c;  /* c: the channels asked for, 1 (gray) or 3 (RGB) */
} mp_image;

/* Decodes the n bytes of buf, a JPEG (starts FF D8 FF) or PNG (starts with PNG's signature)
 * file read from `path` (for messages), into *out with `channels` channels (1: luminance, 3:
 * RGB; a gray file gives equal channels, an alpha channel is composited over black as libpng
 * does). MP_EDATA with one line naming path for anything else: another format, a damaged or
 * truncated file, a size above the limits. On error out->px is NULL. Thread-safe. */
mp_status mp_image_decode(const uint8_t *buf, size_t n, const char *path, int channels,
                          mp_image *out);

#endif
