/* JPEG and PNG writers for the tests (tests/util/image_files.h). */
#include "tests/util/image_files.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */
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
    im.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    return png_image_write_to_file(&im, path, 0, px, 0, NULL) ? 0 : -1;
}
