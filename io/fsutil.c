/* File-system helpers; see fsutil.h. */
#include "io/fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int mp_make_parents(const char *path, char *dir, size_t cap)
{
    size_t len = strlen(path);
    if (len >= cap) {
        errno = ENAMETOOLONG;
        snprintf(dir, cap, "%s", path);
        return -1;
    }
    memcpy(dir, path, len + 1);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (stat(dir, &st) != 0) {
            if (mkdir(dir, 0777) != 0 && errno != EEXIST)
                return -1;
            if (stat(dir, &st) != 0)
                return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            return -1;
        }
        *p = saved;
        if (saved == '\0')
            return 0;
    }
}

mp_status mp_check_dir(const char *dir)
{
    struct stat st;
    if (!dir || stat(dir, &st) != 0) {
        if (dir && errno != ENOENT && errno != ENOTDIR)
            return mp_fail(MP_EDATA, "%s: %s", dir, strerror(errno));
        return mp_fail(MP_EDATA, "%s: no such directory", dir ? dir : "(null)");
    }
    if (!S_ISDIR(st.st_mode))
        return mp_fail(MP_EDATA, "%s: not a directory", dir);
    return MP_OK;
}
