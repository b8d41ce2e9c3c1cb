/* Listing and pruning the checkpoint directory; see ckpt_dir.h. */
#include "io/ckpt_dir.h"

#include "engine/alloc.h"
#include "io/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void mp_ckpt_path(const char *dir, int64_t step, char *out, size_t size)
{
    snprintf(out, size, "%s/ckpt-%08lld.h5", dir, (long long)step);
}

int64_t mp_ckpt_name_step(const char *name)
{
    if (strncmp(name, "ckpt-", 5) != 0)
        return -1;
    const char *p = name + 5;
    int64_t step = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++)
        step = step * 10 + (*p - '0');
    return digits > 0 && strcmp(p, ".h5") == 0 ? step : -1;
}

static int newest_first(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* Opens checkpoint directory dir: *d is NULL and 0 returned when it does not exist; -1 after
 * MP_ECKPT when it cannot be read. */
static int open_dir(const char *dir, DIR **d)
{
    *d = opendir(dir);
    if (*d || errno == ENOENT)
        return 0;
    mp_fail(MP_ECKPT, "%s: cannot read the checkpoint directory (%s)", dir, strerror(errno));
    return -1;
}

int mp_ckpt_list(const char *dir, int64_t *steps, int max)
{
    DIR *d;
    if (open_dir(dir, &d) < 0)
        return -1;
    if (!d)
        return 0;
    int64_t *all = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) { /* every entry: readdir's order is not the steps' */
        int64_t step = mp_ckpt_name_step(e->d_name);
        if (step < 0)
            continue;
        if (n == cap) {
            int64_t *p = realloc(all, (cap = cap ? 2 * cap : 64) * sizeof *all);
            if (!p) {
                closedir(d);
                free(all);
                mp_fail(MP_ECKPT, "%s: out of memory listing checkpoints", dir);
                return -1;
            }
            all = p;
        }
        all[n++] = step;
    }
    closedir(d);
    if (n > 1) /* an empty directory leaves all NULL, which qsort must not get */
        qsort(all, n, sizeof *all, newest_first);
    int kept = n < (size_t)max ? (int)n : max;
    if (kept > 0)
        memcpy(steps, all, (size_t)kept * sizeof *steps);
    free(all);
    return kept;
}

mp_status mp_ckpt_prune(const char *dir, int keep, int64_t latest)
{
    int64_t *steps = mp_alloc(MP_CKPT_MAX_FILES * sizeof *steps, MP_MEM_WORKSPACE);
    int n = mp_ckpt_list(dir, steps, MP_CKPT_MAX_FILES);
    mp_status st = n < 0 ? MP_ECKPT : MP_OK;
    for (int i = 0, kept = 1; i < n; i++) { /* newest first: higher steps are not this run's */
        if (steps[i] >= latest || kept++ < keep)
            continue;
        char path[1100];
        mp_ckpt_path(dir, steps[i], path, sizeof path);
        if (unlink(path) != 0 && errno != ENOENT && st == MP_OK)
            st = mp_fail(MP_ECKPT, "%s: cannot remove an old checkpoint (%s)", path,
                         strerror(errno));
    }
    mp_free(steps);
    return st;
}

mp_status mp_ckpt_dir_prepare(const char *dir)
{
    char probe[1100], made[1100];
    int n = snprintf(probe, sizeof probe, "%s/.mpdist-probe-%ld", dir, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof probe)
        return mp_fail(MP_ECKPT, "checkpoint.dir %s: path too long", dir);
    if (mp_make_parents(probe, made, sizeof made) != 0)
        return mp_fail(MP_ECKPT, "checkpoint.dir %s: cannot create %s (%s)", dir, made,
                       strerror(errno));
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return mp_fail(MP_ECKPT, "checkpoint.dir %s: cannot create files in it (%s); checkpoints "
                       "could not be saved", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return MP_OK;
}

/* Whether s is "<digits>-<digits>" (a writer's pid and attempt). */
static bool pid_attempt(const char *s)
{
    size_t a = strspn(s, "0123456789");
    if (a == 0 || s[a] != '-')
        return false;
    size_t b = strspn(s + a + 1, "0123456789");
    return b > 0 && s[a + 1 + b] == '\0';
}

/* Whether `name` is a writer's temporary: "." + a checkpoint file name + ".<pid>-<n>.tmp", or
 * + ".tmp" as earlier versions named them. */
static bool temp_name(const char *name)
{
    size_t len = strlen(name);
    char base[256];
    if (name[0] != '.' || len < 6 || len - 5 >= sizeof base || strcmp(name + len - 4, ".tmp") != 0)
        return false;
    memcpy(base, name + 1, len - 5);
    base[len - 5] = '\0';
    if (mp_ckpt_name_step(base) >= 0)
        return true;
    char *dot = strrchr(base, '.');
    if (!dot || !pid_attempt(dot + 1))
        return false;
    *dot = '\0';
    return mp_ckpt_name_step(base) >= 0;
}

bool mp_ckpt_dir_names(const char *dir, const char *path)
{
    const char *name = mp_path_name_in(dir, path);
    return name && (mp_ckpt_name_step(name) >= 0 || temp_name(name) ||
                    strcmp(name, ".mpdist.lock") == 0);
}

/* Appends ", NAME" (or NAME first) to the list at list[0..cap), keeping it a string. */
static void add_name(char *list, size_t cap, const char *name)
{
    size_t len = strlen(list);
    if (len + 1 < cap)
        snprintf(list + len, cap - len, "%s%s", len ? ", " : "", name);
}

int mp_ckpt_clean_temps(const char *dir, double min_age_s, char *said, size_t cap)
{
    said[0] = '\0';
    DIR *d;
    if (open_dir(dir, &d) < 0)
        return -1;
    if (!d)
        return 0;
    char removed[400] = "", left[400] = "", failed[400] = "";
    int nremoved = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!temp_name(e->d_name))
            continue;
        char path[1400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (difftime(now, sb.st_mtime) < min_age_s) {
            add_name(left, sizeof left, e->d_name);
        } else if (unlink(path) == 0) {
            add_name(removed, sizeof removed, e->d_name);
            nremoved++;
        } else {
            add_name(failed, sizeof failed, e->d_name);
        }
    }
    closedir(d);
    size_t len = 0;
    if (removed[0])
        len += (size_t)snprintf(said, cap, "removed the temporary file(s) of interrupted saves "
                                "in %s: %s", dir, removed);
    if (left[0] && len < cap)
        len += (size_t)snprintf(said + len, cap - len, "%sleft %s in %s: changed less than %.0f s "
                                "ago, maybe another job's save in progress", len ? "; " : "",
                                left, dir, min_age_s);
    if (failed[0] && len < cap)
        snprintf(said + len, cap - len, "%scould not remove %s in %s", len ? "; " : "", failed,
                 dir);
    return nremoved;
}
