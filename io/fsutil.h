/* Small file-system helpers shared by the writers in io/ (metrics, checkpoints). */
#ifndef MP_FSUTIL_H
#define MP_FSUTIL_H

#include <stddef.h>

/* mkdir -p of the directory part of `path` (everything before its last '/'). Returns 0, or -1
 * with errno set and the directory that could not be made left in dir[0..cap). */
int mp_make_parents(const char *path, char *dir, size_t cap);

#endif
