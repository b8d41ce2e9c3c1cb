/* Listing and pruning the checkpoint directory; see ckpt_dir.h. */
#include "io/ckpt_dir.h"

#include "engine/alloc.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mp_ckpt_path(const char *dir, int64_t step, char *out, size_t size)
{
    snprintf(out, size, "%s/ckpt-%08lld.h5", dir, (long long)step);
}

/* The step of a checkpoint file name "ckpt-<digits>.h5", or -1. */
static int64_t name_step(const char *name)
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

int mp_ckpt_list(const char *dir, int64_t *steps, int max)
{
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT)
        return 0;
    if (!d) {
        mp_fail(MP_ECKPT, "%s: cannot read the checkpoint directory (%s)", dir, strerror(errno));
        return -1;
    }
    int64_t *all = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) { /* every entry: readdir's order is not the steps' */
        int64_t step = name_step(e->d_name);
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
    for (int i = 0, kept = 1; i < n; i++) {
        if (steps[i] == latest || kept++ < keep)
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
