/* The checkpoint directory's lock; see ckpt_dir.h. One lock per process: the directory it is
 * held on and the descriptor that holds it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/ckpt_dir.h"
#include "io/fsutil.h"

static int mp_lock_fd = -1;
static char mp_lock_dir[1024];

/* The holder's line from the lock file, or "unknown". */
static void holder(int fd, char *out, size_t cap)
{
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    if (!out[0])
        snprintf(out, cap, "unknown");
}

mp_status mp_ckpt_dir_lock(const char *dir, char *note, size_t cap)
{
    note[0] = '\0';
    char path[1100], made[1100];
    int n = snprintf(path, sizeof path, "%s/.mpdist.lock", dir);
    if (n < 0 || (size_t)n >= sizeof path || strlen(dir) >= sizeof mp_lock_dir)
        return mp_fail(MP_ECKPT, "checkpoint.dir %s: path too long", dir);
    if (mp_lock_fd >= 0 && strcmp(mp_lock_dir, dir) == 0) {
        /* replaced: gone, or another file (made again after the directory's removal); a file
         * that cannot be told apart (a stat failing otherwise) is taken to be the one locked */
        struct stat held, cur;
        bool replaced = stat(path, &cur) != 0
                            ? errno == ENOENT
                            : fstat(mp_lock_fd, &held) == 0 &&
                                  (held.st_dev != cur.st_dev || held.st_ino != cur.st_ino);
        if (!replaced)
            return MP_OK;
    }
    if (mp_make_parents(path, made, sizeof made) != 0)
        return mp_fail(MP_ECKPT, "checkpoint.dir %s: cannot create %s (%s)", dir, made,
                       strerror(errno));
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return mp_fail(MP_ECKPT, "checkpoint.dir %s: cannot open its lock file %s (%s)", dir,
                       path, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        int e = errno;
        if (e == EAGAIN || e == EACCES) {
            char who[256];
            holder(fd, who, sizeof who);
            close(fd);
            return mp_fail(MP_ECKPT, "checkpoint.dir %s is in use by another run (%s; lock file "
                           "%s): give each run its own checkpoint.dir", dir, who, path);
        }
        if (e != ENOLCK && e != EOPNOTSUPP && e != EINVAL) {
            close(fd);
            return mp_fail(MP_ECKPT, "checkpoint.dir %s: cannot lock %s (%s)", dir, path,
                           strerror(e));
        }
        snprintf(note, cap, "warning: checkpoint.dir %s cannot be locked here (%s): two runs "
                 "sharing it would not be told apart", dir, strerror(e));
    }
    if (mp_lock_fd >= 0)
        close(mp_lock_fd);
    mp_lock_fd = fd;
    snprintf(mp_lock_dir, sizeof mp_lock_dir, "%s", dir);
    char host[256] = "unknown", line[400], when[32] = "";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int len = snprintf(line, sizeof line, "pid %ld on host %s, since %s\n", (long)getpid(), host,
                       when);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len)
        snprintf(note, cap, "warning: checkpoint.dir %s: cannot write its lock file %s (%s)",
                 dir, path, strerror(errno));
    return MP_OK;
}
