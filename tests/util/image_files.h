/* Writing JPEG and PNG files for the tests (libjpeg-turbo's compressor, libpng's simplified
 * writer): the fixtures of image folders (tests/unit/test_folder.c, tests/util/make_folder.c). */
#ifndef MP_TEST_IMAGE_FILES_H
#define MP_TEST_IMAGE_FILES_H

#include <stdint.h>

/* Writes px (h, w, c) row-major, c 1, 3 or 4 (CMYK, with libjpeg's Adobe marker: the values as
 * given, read back as inverted), to path as a JPEG of `quality` (1..100), colour without chroma
 * subsampling; returns 0, or -1 when the file cannot be written. */
int mp_test_write_jpeg(const char *path, const uint8_t *px, int h, int w, int c, int quality);

/* Writes px (h, w, c) row-major, c 1 (gray), 2 (gray and alpha), 3 (RGB) or 4 (RGBA), to path
 * as an 8-bit PNG; returns 0 or -1. */
int mp_test_write_png(const char *path, const uint8_t *px, int h, int w, int c);

/* Writes px (h, w, c) row-major, c 1 or 3, to path as a 16-bit PNG without a gAMA or sRGB
 * chunk (libpng's own writer); returns 0 or -1. */
int mp_test_write_png16(const char *path, const uint16_t *px, int h, int w, int c);

#endif
