/* The text helpers of io/h5file.h that need no HDF5: a writer's temporary path, and a shape
 * as messages print it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/h5file.h"

void mp_h5_temp_path(const char *path, unsigned attempt, char *out, size_t size)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    long pid = (long)getpid();
    /* at most MP_H5_TEMP_BASE bytes of the name: with the dots, pid and attempt the temporary
     * stays within a file system's 255-byte names wherever the target's name is one */
    int keep = (int)strnlen(base, MP_H5_TEMP_BASE);
    if (slash)
        snprintf(out, size, "%.*s/.%.*s.%ld-%u.tmp", (int)(slash - path), path, keep, base, pid,
                 attempt);
    else
        snprintf(out, size, ".%.*s.%ld-%u.tmp", keep, base, pid, attempt);
}

void mp_h5_shape_text(int ndim, const int64_t *shape, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "[");
    for (int k = 0; k < ndim && used < size; k++)
        used += (size_t)snprintf(out + used, size - used, "%s%lld", k ? ", " : "",
                                 (long long)shape[k]);
    if (used < size)
        snprintf(out + used, size - used, "]");
}
