/* The memory ceiling of this process and the check every data-sized allocation passes first
 * (see memcheck.h for the choice of ceiling). Sizes are multiplied with overflow checks in
 * int64_t; the ceiling is read afresh on each check (a few small files), so a cgroup limit
 * changed while a process runs is seen, and nothing is cached across threads. */
#include "io/memcheck.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine/alloc.h"

#define MP_GIB 1073741824.0

/* The limit in file `path` ("max" or a byte count), or -1 when the file is missing or says
 * "max" or holds no number. */
static int64_t read_limit_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[64] = "";
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (!got || strncmp(line, "max", 3) == 0)
        return -1;
    char *end = NULL;
    long long v = strtoll(line, &end, 10);
    if (end == line || v < 0)
        return -1;
    return (int64_t)v;
}

/* Lowers *best to the limits in `file` under dir and each of dir's ancestors down to `stop`
 * (a prefix of dir), recording the file that set it. */
static void walk_up(char *dir, size_t stop, const char *file, int64_t *best, char *source,
                    size_t cap)
{
    for (;;) {
        char path[4352];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        int64_t v = read_limit_file(path);
        if (v >= 0 && (*best < 0 || v < *best)) {
            *best = v;
            if (source && cap)
                snprintf(source, cap, "cgroup limit %s", path);
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= stop || !slash || (size_t)(slash - dir) < stop)
            return;
        *slash = '\0';
    }
}

/* Under an address-space limit (ulimit -v: RLIMIT_AS), the bytes of data this process could
 * still hold: the limit less the address space mapped now (/proc/self/statm's size), plus the
 * data already held (mp_data_mem_check subtracts that again). -1 without a limit. */
static int64_t address_space_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > (rlim_t)INT64_MAX)
        return -1;
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = 0;
    int got = f ? fscanf(f, "%lld", &pages) : 0;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGE_SIZE);
    if (got != 1 || pages < 0 || page <= 0 || pages > INT64_MAX / page)
        return -1;
    int64_t mapped = (int64_t)pages * page, held = mp_mem_current(MP_MEM_DATA);
    int64_t room = (int64_t)rl.rlim_cur > mapped ? (int64_t)rl.rlim_cur - mapped : 0;
    return room + (held > 0 ? held : 0);
}

int64_t mp_cgroup_mem_limit(const char *self_cgroup, const char *root, char *source, size_t cap)
{
    FILE *f = fopen(self_cgroup, "r");
    if (!f)
        return -1;
    int64_t best = -1;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = '\0';
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1, *base, *file;
        if (strcmp(line, "0") == 0 && ctrls[0] == '\0') { /* "0::PATH": the v2 hierarchy */
            base = "";
            file = "memory.max";
        } else {
            char list[256];
            snprintf(list, sizeof list, ",%s,", ctrls);
            if (!strstr(list, ",memory,"))
                continue;
            base = "/memory";
            file = "memory.limit_in_bytes";
        }
        char dir[4096];
        int stop = snprintf(dir, sizeof dir, "%s%s", root, base);
        if (stop < 0 || (size_t)stop >= sizeof dir)
            continue;
        int len = snprintf(dir + stop, sizeof dir - (size_t)stop, "%s", path);
        if (len < 0 || (size_t)len >= sizeof dir - (size_t)stop)
            continue;
        while (strlen(dir) > (size_t)stop && dir[strlen(dir) - 1] == '/')
            dir[strlen(dir) - 1] = '\0'; /* "PATH/" and the root path "/" */
        walk_up(dir, (size_t)stop, file, &best, source, cap);
    }
    fclose(f);
    return best;
}

int64_t mp_mem_limit(char *source, size_t cap)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    int64_t phys = INT64_MAX;
    if (pages > 0 && page > 0 && (int64_t)pages <= INT64_MAX / (int64_t)page)
        phys = (int64_t)pages * (int64_t)page;
    if (source && cap)
        snprintf(source, cap, "physical memory");
    char cg_source[4400];
    int64_t cg = mp_cgroup_mem_limit("/proc/self/cgroup", "/sys/fs/cgroup", cg_source,
                                     sizeof cg_source);
    if (cg >= 0 && cg < phys) {
        phys = cg;
        if (source && cap)
            snprintf(source, cap, "%s", cg_source);
    }
    int64_t as = address_space_limit();
    if (as >= 0 && as < phys) {
        phys = as;
        if (source && cap)
            snprintf(source, cap, "the address-space limit, ulimit -v, less what is mapped");
    }
    return phys > 0 ? phys : 1;
}

mp_status mp_data_mem_check(const char *where, const char *what, int n, const int64_t *factors,
                            int64_t *bytes)
{
    if (bytes)
        *bytes = 0;
    char expr[256] = "";
    size_t used = 0;
    int64_t product = 1;
    int overflow = 0, negative = 0;
    for (int i = 0; i < n; i++) {
        int64_t v = factors[i];
        int w = snprintf(expr + used, sizeof expr - used, "%s%" PRId64, i ? " x " : "", v);
        if (w > 0 && (size_t)w < sizeof expr - used)
            used += (size_t)w;
        if (v < 0)
            negative = 1;
        else if (!overflow && v != 0 && product > INT64_MAX / v)
            overflow = 1;
        else if (!overflow)
            product *= v;
    }
    if (n < 1 || negative)
        return mp_fail(MP_EDATA, "%s: %s: invalid size %s", where, what, n < 1 ? "(none)" : expr);
    if (overflow || (uint64_t)product > (uint64_t)SIZE_MAX)
        return mp_fail(MP_EDATA, "%s: %s: %s bytes overflows 64 bits", where, what, expr);
    char source[4400];
    int64_t limit = mp_mem_limit(source, sizeof source);
    int64_t held = mp_mem_current(MP_MEM_DATA);
    if (held < 0)
        held = 0;
    int64_t room = limit > held ? limit - held : 0;
    if (product > room)
        return mp_fail(MP_EDATA,
                       "%s: %s needs %s = %" PRId64 " bytes (%.1f GiB), more than the %" PRId64
                       " bytes (%.1f GiB) this process may use (%s) less %" PRId64
                       " bytes already held for data",
                       where, what, expr, product, (double)product / MP_GIB, limit,
                       (double)limit / MP_GIB, source, held);
    if (bytes)
        *bytes = product;
    return MP_OK;
}
