/* log.trace's files (docs/usage.md, "A timeline of every rank"): rank R writes DIR/rank-R.json,
 * never over another program's file; rank 0 removes the rank files of an earlier, larger run
 * and keeps log.metrics out of the trace's names. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/clock_sync.h"
#include "engine/clock.h"
#include "engine/trace.h"
#include "io/fsutil.h"
#include "src/train.h"

/* R when name is exactly the rank file name rank-R.json (no sign, no leading 0s), else -1. */
static int rank_of(const char *name)
{
    int r = -1;
    char again[32];
    if (sscanf(name, "rank-%d.json", &r) != 1 || r < 0)
        return -1;
    snprintf(again, sizeof again, "rank-%d.json", r);
    return strcmp(again, name) == 0 ? r : -1;
}

/* Rank 0: removes dir's rank files of ranks R >= size that hold a trace (a directory or another
 * program's file is left), an earlier, larger run's, which bench/trace_merge.py would join to
 * this run's; how many in *n. */
static void drop_old_traces(const char *dir, int size, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (rank_of(e->d_name) >= size && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
            !mp_file_foreign(path, MP_TRACE_HEAD))
            *n += unlink(path) == 0;
    }
    closedir(d);
}

mp_status mp_train_open_trace(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    double offset = 0.0, error = 0.0, origin = 0.0;
    MP_TRY(mp_comm_clock_offset(t->comm, &offset, &error));
    if (t->comm->rank == 0)
        origin = mp_now();
    MP_TRY(mp_comm_bcast(t->comm, &origin, sizeof origin, 0, "broadcast of the trace's origin"));
    MP_TRY(mp_comm_allreduce(t->comm, &error, 1, MP_F64, MP_REDOP_MAX,
                             "the largest clock error of the trace"));
    char path[600], dir[600];
    snprintf(path, sizeof path, "%s/rank-%d.json", c->log.trace, t->comm->rank);
    if (mp_make_parents(path, dir, sizeof dir) != 0)
        return mp_fail(MP_EUSAGE, "log.trace: cannot create directory %s (%s)", dir,
                       strerror(errno));
    if (mp_file_foreign(path, MP_TRACE_HEAD))
        return mp_fail(MP_EUSAGE, "log.trace: %s holds something other than mpdist's trace and "
                       "is left as it is: name another directory", path);
    const char *why;
    FILE *f = mp_fopen_output(path, false, &why);
    if (!f)
        return mp_fail(MP_EUSAGE, "log.trace: cannot create %s (%s)", path, why);
    MP_TRY(mp_trace_open(f, path, t->comm->rank, mp_comm_host(t->comm, t->comm->rank), offset,
                         origin));
    if (t->comm->rank == 0) {
        int dropped = 0;
        drop_old_traces(c->log.trace, t->comm->size, &dropped);
        printf("trace: %s/rank-*.json (clocks aligned to rank 0's within %.0f us; join them with "
               "bench/trace_merge.py %s)", c->log.trace, 1e6 * error, c->log.trace);
        if (dropped)
            printf("; removed %d rank file(s) of an earlier run with more ranks", dropped);
        printf("\n");
    }
    return MP_OK;
}

/* Whether paths a and b name the same existing file or directory. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

mp_status mp_train_trace_spares(const char *trace, const char *metrics)
{
    if (!metrics || !metrics[0])
        return MP_OK;
    if (same_file(metrics, trace))
        return mp_fail(MP_EUSAGE, "log.metrics: %s is log.trace's directory: name a file "
                       "outside it", metrics);
    const char *name = mp_path_name_in(trace, metrics);
    if (name && rank_of(name) >= 0)
        return mp_fail(MP_EUSAGE, "log.metrics: %s is a rank file's name in log.trace %s, "
                       "which the trace writes: name another file", metrics, trace);
    return MP_OK;
}
