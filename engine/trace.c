/* The timeline (see trace.h). Invariants: `f` is open exactly while `on`; spans are kept in
 * `buf` (under `mu`) and written when it is full and at the close, so recording one costs a copy,
 * not a formatted write; every event is written whole, preceded by ",\n" but the first, so the
 * file is a JSON array once closed (and, as the format allows, one a viewer reads without its
 * closing bracket: what was written before a crash). */
#include "engine/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/clock.h"

#ifdef MPDIST_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

enum { BUF_EVENTS = 8192 };

typedef struct span {
    char name[96];
    const char *cat; /* a string literal */
    int tid;
    double t0, t1;
    int64_t step;
} span;

static struct {
    bool on, first;
    FILE *f;
    span *buf;
    int n;
    char path[1024];
    int rank;
    double offset, origin;
    pthread_mutex_t mu;
} tr = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Writes s as a JSON string body (quotes and backslashes escaped, control bytes dropped). */
static void put_string(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
}

/* A metadata event naming pid or thread tid (locked). */
static void put_name(const char *what, int tid, const char *name)
{
    fprintf(tr.f, "%s{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"",
            tr.first ? "" : ",\n", what, tr.rank, tid);
    put_string(tr.f, name);
    fputs("\"}}", tr.f);
    tr.first = false;
}

mp_status mp_trace_open(FILE *f, const char *path, int rank, const char *host, double offset_s,
                        double origin_s)
{
    span *buf = malloc(BUF_EVENTS * sizeof *buf);
    if (!buf) {
        fclose(f);
        return mp_fail(MP_EUSAGE, "log.trace: no memory for %d events", BUF_EVENTS);
    }
    pthread_mutex_lock(&tr.mu);
    tr.f = f;
    tr.buf = buf;
    tr.n = 0;
    snprintf(tr.path, sizeof tr.path, "%s", path);
    tr.rank = rank;
    tr.offset = offset_s;
    tr.origin = origin_s;
    tr.first = true;
    fputs("[\n", f);
    char name[300];
    snprintf(name, sizeof name, "rank %d (%s)", rank, host ? host : "?");
    put_name("process_name", MP_TRACE_MAIN, name);
    put_name("thread_name", MP_TRACE_MAIN, "model (forward, backward, step)");
    put_name("thread_name", MP_TRACE_COMM, "collectives");
    put_name("thread_name", MP_TRACE_IO, "checkpoint writer");
    tr.on = true;
    pthread_mutex_unlock(&tr.mu);
    return MP_OK;
}

bool mp_trace_on(void) { return tr.on; }

/* Writes the kept spans to the file and empties `buf` (locked). */
static void flush_locked(void)
{
    for (int i = 0; i < tr.n; i++) {
        const span *e = &tr.buf[i];
        double ts = 1e6 * (e->t0 + tr.offset - tr.origin), dur = 1e6 * (e->t1 - e->t0);
        fprintf(tr.f, "%s{\"name\":\"", tr.first ? "" : ",\n");
        put_string(tr.f, e->name);
        fprintf(tr.f, "\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,"
                "\"tid\":%d", e->cat, ts, dur > 0 ? dur : 0.0, tr.rank, e->tid);
        if (e->step >= 0)
            fprintf(tr.f, ",\"args\":{\"step\":%lld}", (long long)e->step);
        fputc('}', tr.f);
        tr.first = false;
    }
    tr.n = 0;
    fflush(tr.f);
}

void mp_trace_span(const char *name, const char *cat, int tid, double t0, double t1,
                   int64_t step)
{
    if (!tr.on)
        return;
    pthread_mutex_lock(&tr.mu);
    if (tr.on) {
        if (tr.n == BUF_EVENTS)
            flush_locked();
        span *e = &tr.buf[tr.n++];
        *e = (span){.cat = cat, .tid = tid, .t0 = t0, .t1 = t1, .step = step};
        snprintf(e->name, sizeof e->name, "%s", name);
    }
    pthread_mutex_unlock(&tr.mu);
}

void mp_trace_push(const char *name)
{
#ifdef MPDIST_HAVE_CUDA
    if (tr.on)
        nvtxRangePushA(name);
#else
    (void)name;
#endif
}

void mp_trace_pop(void)
{
#ifdef MPDIST_HAVE_CUDA
    if (tr.on)
        nvtxRangePop();
#endif
}

mp_status mp_trace_close(void)
{
    pthread_mutex_lock(&tr.mu);
    if (!tr.on) {
        pthread_mutex_unlock(&tr.mu);
        return MP_OK;
    }
    tr.on = false;
    flush_locked();
    free(tr.buf);
    tr.buf = NULL;
    fputs("\n]\n", tr.f);
    bool bad = ferror(tr.f) != 0;
    bad = fclose(tr.f) != 0 || bad;
    tr.f = NULL;
    pthread_mutex_unlock(&tr.mu);
    if (bad)
        return mp_fail(MP_EUSAGE, "log.trace: writing %s failed", tr.path);
    return MP_OK;
}
