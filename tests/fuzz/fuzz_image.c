/* Fuzz target: the JPEG and PNG decoders of image folders (mp_image_decode, libjpeg-turbo and
 * libpng underneath). Input: byte 0 bit 0 asks for 1 channel (else 3); the rest is the file.
 * The decode must succeed with an image within the limits, or fail with MP_EDATA and a
 * one-line message naming the file and no pixels. Anything else aborts, for the fuzzer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/image_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int channels = data[0] & 1 ? 1 : 3;
    mp_image im;
    mp_status st = mp_image_decode(data + 1, size - 1, "fuzz.img", channels, &im);
    if (st == MP_OK) {
        if (!im.px || im.c != channels || im.h < 1 || im.w < 1 || im.h > MP_IMAGE_MAX_SIDE ||
            im.w > MP_IMAGE_MAX_SIDE || (int64_t)im.h * im.w > MP_IMAGE_MAX_PIXELS)
            abort();
        volatile uint8_t sink = im.px[(size_t)im.h * im.w * im.c - 1]; /* the last pixel */
        (void)sink;
        free(im.px);
    } else {
        const char *msg = mp_error_message();
        if (st != MP_EDATA || im.px || !strstr(msg, "fuzz.img") || strchr(msg, '\n'))
            abort();
    }
    return 0;
}
