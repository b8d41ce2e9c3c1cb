/* Global heap collection checks; see h5_gheap.h. The layout is the HDF5 file format
 * specification's (version 1 collections, 8-byte lengths as mpdist's files use):
 *   "GCOL", version 1, 3 reserved bytes, collection size (8 bytes, header included), then
 *   objects: index (2), reference count (2), reserved (4), size (8), data padded to 8 bytes;
 *   index 0 is the free space, whose size counts its own header; a tail shorter than an object
 *   header is free space too. */
#include "io/h5_gheap.h"
#include "io/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/check.h"

#define GCOL_HEADER 16
#define GCOL_OBJ_HEADER 16
#define GCOL_MIN_SIZE 4096 /* H5HG_MINSIZE: no collection is smaller */

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Whether the collection of `size` bytes at base tiles exactly into objects. */
static int objects_tile(const unsigned char *base, uint64_t size)
{
    uint64_t p = GCOL_HEADER;
    while (p < size) {
        if (size - p < GCOL_OBJ_HEADER)
            return 1; /* a tail too small for a header: free space */
        unsigned idx = (unsigned)base[p] | (unsigned)base[p + 1] << 8;
        uint64_t osize = le64(base + p + 8), need;
        if (idx == 0) {
            need = osize; /* the free space counts its header */
            if (need < GCOL_OBJ_HEADER)
                return 0;
        } else {
            if (osize > size)
                return 0;
            need = GCOL_OBJ_HEADER + ((osize + 7) & ~(uint64_t)7);
        }
        if (need > size - p)
            return 0;
        p += need;
    }
    return p == size;
}

/* Checks every "GCOL" of the mapped file; returns the offset of a bad one, or -1. */
static int64_t first_bad(const unsigned char *map, size_t n)
{
    const unsigned char *at = map, *end = map + n;
    while (end - at >= GCOL_HEADER) {
        const unsigned char *hit = memchr(at, 'G', (size_t)(end - at));
        if (!hit || end - hit < GCOL_HEADER)
            return -1;
        at = hit + 1;
        /* HDF5 reads a collection by its signature and version alone (its reserved bytes are
         * never looked at), so neither may this: a collection with reserved bytes set went
         * unchecked and its object of 2^56 bytes crashed HDF5 (fuzz_checkpoint found it:
         * corpus/checkpoint/legacy-gcol-reserved). */
        if (memcmp(hit, "GCOL", 4) != 0 || hit[4] != 1)
            continue; /* not a collection header (bytes of some other object) */
        uint64_t size = le64(hit + 8);
        uint64_t room = (uint64_t)(end - hit);
        if (size < GCOL_MIN_SIZE || size > room || !objects_tile(hit, size))
            return (int64_t)(hit - map);
    }
    return -1;
}

mp_status mp_h5_check_global_heaps(const char *path)
{
    const char *why;
    long long size = 0;
    int fd = mp_open_regular(path, &size, &why);
    if (fd < 0)
        return mp_fail(MP_ECKPT, "%s: cannot read the checkpoint (%s)", path, why);
    struct stat st = {.st_size = (off_t)size};
    if (st.st_size == 0) {
        close(fd);
        return MP_OK;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED)
        return mp_fail(MP_ECKPT, "%s: cannot map the checkpoint (%s)", path, strerror(err));
    int64_t bad = first_bad(map, (size_t)st.st_size);
    munmap(map, (size_t)st.st_size);
    if (bad >= 0)
        return mp_fail(MP_ECKPT, "%s: the string storage (global heap at byte %lld) is damaged",
                       path, (long long)bad);
    return MP_OK;
}
