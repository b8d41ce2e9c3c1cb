/* Dataset digests; see h5_digest.h. */
#include "io/h5_digest.h"

#include <string.h>
#include <zlib.h>

static uLong add_word(uLong crc, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return crc32_z(crc, b, sizeof b);
}

uint32_t mp_h5_digest(const char *path, size_t elem, int ndim, const int64_t *shape,
                      const void *data, size_t bytes)
{
    static const char tag[] = "mpdist dataset";
    while (*path == '/')
        path++;
    uLong crc = crc32_z(0L, (const Bytef *)tag, sizeof tag);
    crc = crc32_z(crc, (const Bytef *)path, strlen(path) + 1);
    crc = add_word(crc, (uint64_t)elem);
    crc = add_word(crc, (uint64_t)ndim);
    for (int k = 0; k < ndim; k++)
        crc = add_word(crc, (uint64_t)shape[k]);
    const unsigned char *p = data;
    while (bytes > 0) { /* crc32_z takes a size_t, but stay within 1 GiB a call */
        size_t n = bytes < ((size_t)1 << 30) ? bytes : ((size_t)1 << 30);
        crc = crc32_z(crc, p, n);
        p += n;
        bytes -= n;
    }
    return (uint32_t)crc;
}
