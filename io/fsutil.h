/* Small file-system helpers shared by the writers in io/ (metrics, checkpoints, datasets). */
#ifndef MP_FSUTIL_H
#define MP_FSUTIL_H

#include <stddef.h>

#include "engine/status.h"

/* mkdir -p of the directory part of `path` (everything before its last '/'). Returns 0, or -1
 * with errno set and the directory that could not be made left in dir[0..cap). */
int mp_make_parents(const char *path, char *dir, size_t cap);

/* MP_OK when `dir` is an existing directory, else MP_EDATA with "DIR: no such directory",
 * "DIR: not a directory" or the system's message (dataset directories). */
mp_status mp_check_dir(const char *dir);

#endif
