/* JPEG and PNG writers for the tests (tests/util/image_files.h). */
#include "tests/util/image_files.h"

#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

int mp_test_write_jpeg(const char *path, const uint8_t *px, int h, int w, int c, int quality)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    struct jpeg_compress_struct j;
    struct jpeg_error_mgr err;
    j.err = jpeg_std_error(&err);
    jpeg_create_compress(&j);
    jpeg_stdio_dest(&j, f);
    j.image_width = (JDIMENSION)w;
    j.image_height = (JDIMENSION)h;
    j.input_components = c;
    j.in_color_space = c == 1 ? JCS_GRAYSCALE : c == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&j);
    jpeg_set_quality(&j, quality, TRUE);
    for (int k = 0; k < j.num_components; k++) /* 4:4:4, no chroma subsampling */
        j.comp_info[k].h_samp_factor = j.comp_info[k].v_samp_factor = 1;
    jpeg_start_compress(&j, TRUE);
    while (j.next_scanline < j.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)j.next_scanline * (size_t)w * (size_t)c);
        jpeg_write_scanlines(&j, &row, 1);
    }
    jpeg_finish_compress(&j);
    jpeg_destroy_compress(&j);
    return fclose(f) == 0 ? 0 : -1;
}

int mp_test_write_png(const char *path, const uint8_t *px, int h, int w, int c)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    static const png_uint_32 formats[5] = {0, PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                           PNG_FORMAT_RGBA};
    im.format = formats[c >= 1 && c <= 4 ? c : 3];
    return png_image_write_to_file(&im, path, 0, px, 0, NULL) ? 0 : -1;
}

int mp_test_write_png16(const char *path, const uint16_t *px, int h, int w, int c)
{
    FILE *f = fopen(path, "wb");
    png_structp p = f ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL) : NULL;
    png_infop info = p ? png_create_info_struct(p) : NULL;
    uint8_t *row = malloc((size_t)w * (size_t)c * 2);
    volatile int ok = 0; /* set after the setjmp: volatile, as a longjmp may come back */
    if (info && row && setjmp(png_jmpbuf(p)) == 0) {
        png_init_io(p, f);
        png_set_IHDR(p, info, (png_uint_32)w, (png_uint_32)h, 16,
                     c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(p, info); /* no gAMA, no sRGB chunk */
        for (int y = 0; y < h; y++) {
            for (int k = 0; k < w * c; k++) { /* big-endian samples */
                uint16_t v = px[(size_t)y * (size_t)w * (size_t)c + (size_t)k];
                row[2 * k] = (uint8_t)(v >> 8);
                row[2 * k + 1] = (uint8_t)v;
            }
            png_write_row(p, row);
        }
        png_write_end(p, info);
        ok = 1;
    }
    if (p)
        png_destroy_write_struct(&p, &info);
    free(row);
    return (f && fclose(f) == 0 && ok) ? 0 : -1;
}
