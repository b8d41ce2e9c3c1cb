/* What the fuzz targets that read data files share: writing the fuzzer's bytes to a file. */
#ifndef MP_FUZZ_FILES_H
#define MP_FUZZ_FILES_H

#include <stdint.h>
#include <stdio.h>

/* Writes len bytes to dir/name (path receives the whole name); returns 0, or -1 when it
 * cannot. */
static inline int mp_fuzz_put_file(char *path, size_t cap, const char *dir, const char *name,
                                   const uint8_t *bytes, size_t len)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = len ? fwrite(bytes, 1, len, f) : 0;
    return fclose(f) == 0 && put == len ? 0 : -1;
}

#endif
