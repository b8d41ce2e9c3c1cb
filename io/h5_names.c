/* The text helpers of io/h5file.h that need no HDF5: a writer's temporary path, and a shape
 * as messages print it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/h5file.h"

void mp_h5_temp_path(const char *path, unsigned attempt, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    long pid = (long)getpid();
    if (slash)
        snprintf(out, size, "%.*s/.%s.%ld-%u.tmp", (int)(slash - path), path, slash + 1, pid,
                 attempt);
    else
        snprintf(out, size, ".%s.%ld-%u.tmp", path, pid, attempt);
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
