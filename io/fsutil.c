/* File-system helpers; see fsutil.h. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* realpath */
#endif
#include "io/fsutil.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Sets fd back to blocking I/O (opened with O_NONBLOCK so that the open itself cannot block).
 * 0, or -1 with errno set. */
static int set_blocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? -1 : 0;
}

int mp_open_regular(const char *path, long long *size, const char **why)
{
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) { /* a socket cannot be opened (ENXIO): say what it is */
        int err = errno;
        *why = err == ENXIO && stat(path, &sb) == 0 && S_ISSOCK(sb.st_mode)
                   ? "not a regular file (a socket)"
                   : strerror(err);
        errno = err;
        return -1;
    }
    int err = EINVAL;
    *why = NULL;
    if (fstat(fd, &sb) != 0 || set_blocking(fd) != 0)
        *why = strerror(err = errno);
    else if (S_ISFIFO(sb.st_mode))
        *why = "not a regular file (a FIFO)";
    else if (S_ISDIR(sb.st_mode))
        *why = "not a regular file (a directory)";
    else if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode))
        *why = "not a regular file (a device)";
    else if (S_ISSOCK(sb.st_mode))
        *why = "not a regular file (a socket)";
    else if (!S_ISREG(sb.st_mode))
        *why = "not a regular file";
    if (*why) {
        close(fd);
        errno = err;
        return -1;
    }
    if (size)
        *size = (long long)sb.st_size;
    return fd;
}

FILE *mp_fopen_regular(const char *path, const char **why)
{
    int fd = mp_open_regular(path, NULL, why);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        *why = strerror(errno);
        close(fd);
    }
    return f;
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

FILE *mp_fopen_output(const char *path, bool append, const char **why)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOCTTY | O_NONBLOCK | O_CLOEXEC |
                            (append ? O_APPEND : O_TRUNC), 0666);
    if (fd < 0 || set_blocking(fd) != 0) {
        int err = errno;
        struct stat sb;
        bool fifo = err == ENXIO && stat(path, &sb) == 0 && S_ISFIFO(sb.st_mode);
        *why = fifo ? "a FIFO that no process reads (start the reader first)" : strerror(err);
        if (fd >= 0)
            close(fd);
        errno = err;
        return NULL;
    }
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f) {
        *why = strerror(errno);
        close(fd);
    }
    return f;
}

bool mp_file_foreign(const char *path, const char *prefix)
{
    const char *why;
    long long size = 0;
    int fd = mp_open_regular(path, &size, &why);
    if (fd < 0) { /* a regular file with bytes that cannot be read is not known to be ours */
        struct stat sb;
        return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
    }
    char head[64] = {0};
    size_t n = strlen(prefix) < sizeof head ? strlen(prefix) : sizeof head;
    ssize_t got = size > 0 ? read(fd, head, n) : 0;
    close(fd);
    /* (a file cut inside its first bytes, as a torn write leaves it, is still ours) */
    return size > 0 && (got <= 0 || memcmp(head, prefix, (size_t)got) != 0);
}

bool mp_path_within(const char *dir, const char *path)
{
    char root[PATH_MAX], at[PATH_MAX], full[2 * PATH_MAX + 2];
    struct stat sb;
    if (!realpath(dir, root) || stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode) || !path[0] ||
        strlen(path) >= sizeof at)
        return false;
    /* the longest existing prefix that ends at a '/': resolved; the part after it: appended */
    snprintf(at, sizeof at, "%s", path);
    size_t cut = strlen(at);
    char resolved[PATH_MAX];
    while (!realpath(at, resolved)) {
        char *slash = strrchr(at, '/');
        if (!slash) { /* nothing of it exists: relative to the working directory */
            if (!realpath(".", resolved))
                return false;
            cut = 0;
            break;
        }
        *slash = '\0';
        cut = (size_t)(slash - at);
        if (!at[0]) { /* "/x...": the root */
            snprintf(resolved, sizeof resolved, "/");
            break;
        }
    }
    /* the rest's names appended, "." dropped and ".." taking the last name off, as the
     * directories mp_make_parents creates will resolve */
    snprintf(full, sizeof full, "%s", strcmp(resolved, "/") ? resolved : "");
    for (const char *p = path + cut; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            char *slash = strrchr(full, '/');
            if (slash)
                *slash = '\0';
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            size_t at_end = strlen(full);
            snprintf(full + at_end, sizeof full - at_end, "/%.*s", (int)len, p);
        }
        p += len + (p[len] == '/');
    }
    if (!full[0])
        snprintf(full, sizeof full, "/");
    size_t n = strlen(root);
    if (strcmp(root, "/") == 0)
        return true;
    return strncmp(full, root, n) == 0 && (full[n] == '\0' || full[n] == '/');
}

const char *mp_path_name_in(const char *dir, const char *path)
{
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    char parent[4096];
    int n = !slash ? snprintf(parent, sizeof parent, ".")
            : slash == path ? snprintf(parent, sizeof parent, "/")
                            : snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    struct stat a, b;
    if (n < 0 || (size_t)n >= sizeof parent || stat(dir, &a) != 0 || stat(parent, &b) != 0 ||
        a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return NULL;
    return name;
}
