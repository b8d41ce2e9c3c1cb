/* JPEG and PNG decoding (io/image_decode.h). libjpeg reports errors through a callback that
 * must not return: it longjmps back here, with the message kept. libpng's simplified API
 * returns its errors. Both read from memory, so a file is read once by the caller. */
#include "io/image_decode.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

typedef struct jpeg_error {
    struct jpeg_error_mgr mgr;
    jmp_buf back;
    char msg[JMSG_LENGTH_MAX];
} jpeg_error;

static void jpeg_fail(j_common_ptr c)
{
    jpeg_error *e = (jpeg_error *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->back, 1);
}

/* libjpeg-turbo's advice against hostile progressive files: at most this many scans. */
enum { MP_JPEG_MAX_SCANS = 500 };

static void jpeg_scans(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->is_decompressor && d->input_scan_number > MP_JPEG_MAX_SCANS) {
        jpeg_error *e = (jpeg_error *)c->err;
        snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", MP_JPEG_MAX_SCANS);
        longjmp(e->back, 1);
    }
}

/* libjpeg's warnings: a stream whose data ran out (a cut file: "Premature end of JPEG file") or
 * whose scan ends at a marker before its last row ("premature end of data segment") decodes
 * with filler pixels, so it fails as an error does, as PIL refuses a truncated image. The others
 * (extraneous bytes before a marker, which cameras and some ImageNet files have) leave every
 * pixel decoded and are not printed. */
static void jpeg_warning(j_common_ptr c, int level)
{
    if (level == -1 && (c->err->msg_code == JWRN_JPEG_EOF || c->err->msg_code == JWRN_HIT_MARKER))
        jpeg_fail(c);
}

/* CMYK pixels (4 bytes each, stored inverted when Adobe wrote the file, as Photoshop does) to
 * RGB, R = (255 - C)(255 - K) / 255 and so on, or to luminance (ITU-R 601 weights), in place. */
static void from_cmyk(uint8_t *px, size_t n, bool inverted, int channels)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *q = px + 4 * i;
        int k = inverted ? q[3] : 255 - q[3], rgb[3];
        for (int j = 0; j < 3; j++)
            rgb[j] = ((inverted ? q[j] : 255 - q[j]) * k + 127) / 255;
        if (channels == 1)
            px[i] = (uint8_t)((299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2] + 500) / 1000);
        else
            for (int j = 0; j < 3; j++)
                px[3 * i + (size_t)j] = (uint8_t)rgb[j];
    }
}

static bool size_ok(int64_t h, int64_t w)
{
    return h >= 1 && w >= 1 && h <= MP_IMAGE_MAX_SIDE && w <= MP_IMAGE_MAX_SIDE &&
           h * w <= MP_IMAGE_MAX_PIXELS;
}

static mp_status decode_jpeg(const uint8_t *buf, size_t n, const char *path, int channels,
                             mp_image *out)
{
    struct jpeg_decompress_struct d;
    struct jpeg_progress_mgr progress = {.progress_monitor = jpeg_scans};
    jpeg_error e;
    uint8_t *volatile px = NULL;
    memset(&d, 0, sizeof d);
    snprintf(e.msg, sizeof e.msg, "out of memory");
    d.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jpeg_fail;
    e.mgr.emit_message = jpeg_warning;
    if (setjmp(e.back)) {
        jpeg_destroy_decompress(&d);
        free(px);
        return mp_fail(MP_EDATA, "%s: not a readable JPEG file (%s)", path, e.msg);
    }
    jpeg_create_decompress(&d);
    d.progress = &progress;
    jpeg_mem_src(&d, buf, (unsigned long)n);
    jpeg_read_header(&d, TRUE);
    if (!size_ok(d.image_height, d.image_width)) {
        mp_status st = mp_fail(MP_EDATA, "%s: a JPEG of %u x %u pixels: at most %d a side and "
                               "%lld pixels are read", path, d.image_width, d.image_height,
                               MP_IMAGE_MAX_SIDE, (long long)MP_IMAGE_MAX_PIXELS);
        jpeg_destroy_decompress(&d);
        return st;
    }
    bool cmyk = d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK;
    d.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&d);
    size_t row = (size_t)d.output_width * (size_t)d.output_components;
    px = malloc(row * d.output_height);
    if (!px)
        longjmp(e.back, 1);
    while (d.output_scanline < d.output_height) {
        JSAMPROW r = px + row * d.output_scanline;
        jpeg_read_scanlines(&d, &r, 1);
    }
    if (cmyk)
        from_cmyk(px, (size_t)d.output_width * d.output_height, d.saw_Adobe_marker, channels);
    jpeg_finish_decompress(&d);
    *out = (mp_image){.px = px, .h = (int)d.output_height, .w = (int)d.output_width,
                      .c = channels};
    jpeg_destroy_decompress(&d);
    return MP_OK;
}

static mp_status decode_png(const uint8_t *buf, size_t n, const char *path, int channels,
                            mp_image *out)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, buf, n))
        return mp_fail(MP_EDATA, "%s: not a readable PNG file (%s)", path, im.message);
    if (!size_ok(im.height, im.width)) {
        png_image_free(&im);
        return mp_fail(MP_EDATA, "%s: a PNG of %u x %u pixels: at most %d a side and %lld "
                       "pixels are read", path, im.width, im.height, MP_IMAGE_MAX_SIDE,
                       (long long)MP_IMAGE_MAX_PIXELS);
    }
    /* As PIL's convert("RGB"), which torchvision's ImageFolder calls: transparency is
     * dropped, the colours kept (not blended onto black: read with alpha, then dropped); 16-bit
     * samples without a gAMA or sRGB chunk are sRGB values (rounded to 8 bits; PIL takes the
     * high byte), not linear light to be gamma-encoded. (Gray from colour stays libpng's, in
     * linear light, where PIL's convert("L") weighs the encoded values.) */
    bool alpha = (im.format & PNG_FORMAT_FLAG_ALPHA) != 0;
    im.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
    im.format = (channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB) |
                (alpha ? PNG_FORMAT_FLAG_ALPHA : 0);
    uint8_t *px = malloc(PNG_IMAGE_SIZE(im));
    if (!px) {
        png_image_free(&im);
        return mp_fail(MP_EDATA, "%s: out of memory for %u x %u pixels", path, im.width,
                       im.height);
    }
    if (!png_image_finish_read(&im, NULL, px, 0, NULL)) {
        free(px);
        return mp_fail(MP_EDATA, "%s: not a readable PNG file (%s)", path, im.message);
    }
    size_t pixels = (size_t)im.width * im.height;
    for (size_t i = 0; alpha && i < pixels; i++) /* in place: each pixel moves down */
        memmove(px + i * (size_t)channels, px + i * (size_t)(channels + 1), (size_t)channels);
    *out = (mp_image){.px = px, .h = (int)im.height, .w = (int)im.width, .c = channels};
    return MP_OK;
}

mp_status mp_image_decode(const uint8_t *buf, size_t n, const char *path, int channels,
                          mp_image *out)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memset(out, 0, sizeof *out);
    if (channels != 1 && channels != 3)
        return mp_fail(MP_EUSAGE, "image decoding: %d channels: expected 1 or 3", channels);
    if (n >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
        return decode_jpeg(buf, n, path, channels, out);
    if (n >= 8 && memcmp(buf, png_sig, 8) == 0)
        return decode_png(buf, n, path, channels, out);
    return mp_fail(MP_EDATA, "%s: neither a JPEG nor a PNG file (by its first bytes)", path);
}
