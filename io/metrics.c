/* The JSON Lines metrics sink. Each record is built as a cJSON object whose first member is
 * "type", printed unformatted on one line and written at once. cJSON prints non-finite numbers
 * (a diverged loss) as null, so every line stays valid JSON, and a write that fails is cut
 * back, so every line is whole. After the first write error the sink reports once on stderr
 * and keeps going silently: metrics never stop training. A regular file is held under an open
 * file description lock (F_OFD_SETLK, as io/ckpt_lock.c holds checkpoint.dir) while the sink is
 * open, so that a second run naming it is refused rather than truncating it under the first. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK */
#endif
#include "io/metrics.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"

struct mp_metrics {
    FILE *f;       /* NULL for a sink that writes nothing */
    char *path;
    bool reported; /* an I/O error was already printed */
    bool cut;      /* a regular file of its own (not the job's stdout or stderr log): a record
                      that fails to write is cut back from it */
    int lock;      /* the descriptor holding the file's lock, or -1 */
};

/* What every metrics file starts with: its first record's first member (record_begin). */
#define MP_METRICS_HEAD "{\"type\":\""

/* Whether `path` is the file this process's stdout or stderr writes (/dev/stdout of a job's
 * log, say): the metrics are appended to it, never cut or checked as the metrics' own file. */
static bool std_stream(const char *path)
{
    struct stat p, o;
    if (stat(path, &p) != 0)
        return false;
    for (int fd = 1; fd <= 2; fd++)
        if (fstat(fd, &o) == 0 && o.st_dev == p.st_dev && o.st_ino == p.st_ino)
            return true;
    return false;
}

/* MP_EUSAGE when `path` holds another program's file (a config, a checkpoint, a dataset named
 * by mistake), which the metrics would overwrite. */
static mp_status refuse_foreign(const char *path)
{
    if (!std_stream(path) && mp_file_foreign(path, MP_METRICS_HEAD))
        return mp_fail(MP_EUSAGE, "log.metrics: %s holds something other than mpdist's metrics "
                       "(JSON Lines) and is left as it is: name another file", path);
    return MP_OK;
}

/* Locks the metrics file `path` for this process, a regular file of its own or none yet (then
 * created, empty), into *fd; *fd = -1 for another kind of file, one that cannot be opened (the
 * open that follows says why) or a file system without locks (as before locks). MP_EUSAGE when
 * another process holds the lock: a run writing it now. */
static mp_status lock_file(const char *path, int *fd)
{
    *fd = -1;
    struct stat sb;
    if (stat(path, &sb) == 0 ? !S_ISREG(sb.st_mode) || std_stream(path) : errno != ENOENT)
        return MP_OK;
    int f = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666);
    if (f < 0)
        return MP_OK;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(f, F_OFD_SETLK, &fl) != 0) {
        int e = errno;
        close(f);
        if (e == EAGAIN || e == EACCES)
            return mp_fail(MP_EUSAGE, "log.metrics: %s is being written by another run, left as "
                           "it is: give each run its own log.metrics", path);
        return MP_OK;
    }
    *fd = f;
    return MP_OK;
}

/* Opens the sink; `lock` is the file's lock (lock_file) when the caller took it, else -1. */
static mp_status open_sink(mp_metrics **m, const char *path, bool append, int lock)
{
    *m = NULL;
    mp_metrics *s = calloc(1, sizeof *s);
    if (!s) {
        if (lock >= 0)
            close(lock);
        return mp_fail(MP_EINTERNAL, "log.metrics: out of memory");
    }
    s->lock = lock;
    if (!path || !*path) {
        *m = s;
        return MP_OK;
    }
    char dir[4096];
    if (mp_make_parents(path, dir, sizeof dir) != 0) {
        int e = errno;
        free(s);
        if (lock >= 0)
            close(lock);
        return mp_fail(MP_EUSAGE, "log.metrics: %s: cannot create directory %s: %s", path, dir,
                       strerror(e));
    }
    mp_status st = refuse_foreign(path);
    if (st == MP_OK && s->lock < 0)
        st = lock_file(path, &s->lock);
    const char *why = "out of memory";
    s->path = st == MP_OK ? strdup(path) : NULL;
    bool shared = std_stream(path);
    s->f = s->path ? mp_fopen_output(path, append || shared, &why) : NULL;
    if (!s->f) {
        if (s->lock >= 0)
            close(s->lock);
        free(s->path);
        free(s);
        return st != MP_OK ? st : mp_fail(MP_EUSAGE, "log.metrics: %s: %s", path, why);
    }
    struct stat sb;
    s->cut = !shared && fstat(fileno(s->f), &sb) == 0 && S_ISREG(sb.st_mode);
    *m = s;
    return MP_OK;
}

mp_status mp_metrics_open(mp_metrics **m, const char *path)
{
    return open_sink(m, path, false, -1);
}

/* Whether a line belongs to the past of a run resumed at (step, epoch): not a summary or
 * backward record (written at a run's end), a step or
 * checkpoint record past `step`, or an eval record of `epoch` or later (evaluated again). */
static bool before_resume(const char *line, int64_t step, int64_t epoch)
{
    cJSON *o = cJSON_Parse(line);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "step");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "epoch");
    bool is_step = cJSON_IsString(type) && (strcmp(type->valuestring, "step") == 0 ||
                                            strcmp(type->valuestring, "checkpoint") == 0);
    bool is_eval = cJSON_IsString(type) && strcmp(type->valuestring, "eval") == 0;
    bool keep = cJSON_IsString(type) && strcmp(type->valuestring, "summary") != 0 &&
                strcmp(type->valuestring, "backward") != 0 &&
                !(is_step && cJSON_IsNumber(n) && n->valuedouble > (double)step) &&
                !(is_eval && cJSON_IsNumber(e) && e->valuedouble >= (double)epoch);
    cJSON_Delete(o);
    return keep;
}

mp_status mp_metrics_open_resumed(mp_metrics **m, const char *path, int64_t step,
                                  int64_t epoch)
{
    *m = NULL;
    struct stat sb;
    bool regular = path && *path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
                   !std_stream(path);
    int lock = -1;
    if (regular) {
        MP_TRY(refuse_foreign(path));
        MP_TRY(lock_file(path, &lock)); /* before its past is cut: not under another run */
    }
    FILE *f = regular ? fopen(path, "r+") : NULL; /* (another kind of file has no past to keep) */
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        long keep = 0;
        while (getline(&line, &cap, f) > 0 && strchr(line, '\n') && before_resume(line, step, epoch))
            keep = ftell(f);
        free(line);
        int rc = ftruncate(fileno(f), (off_t)keep);
        int e = errno;
        fclose(f);
        if (rc != 0) {
            if (lock >= 0)
                close(lock);
            return mp_fail(MP_EUSAGE, "log.metrics: %s: %s", path, strerror(e));
        }
    }
    return open_sink(m, path, true, lock);
}

static void report(mp_metrics *m, int e)
{
    if (m->reported)
        return;
    m->reported = true;
    fprintf(stderr, "mpdist: warning: log.metrics: %s: %s (further metrics may be lost)\n", m->path,
            strerror(e));
}

/* Writes the n bytes of a record to fd (stdio's buffer stays empty: every record goes through
 * here). 0, or the errno of a failed write, after which the file is cut back to where the
 * record began when `cut`: a full disk or a file size limit leaves whole lines, never a torn
 * one that the next record would join. */
static int write_whole(int fd, const char *buf, size_t n, bool cut)
{
    off_t start = cut ? lseek(fd, 0, SEEK_END) : -1;
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            if (start >= 0 && ftruncate(fd, start) == 0)
                lseek(fd, start, SEEK_SET);
            return e;
        }
        done += (size_t)w;
    }
    return 0;
}

/* A new object whose first member is "type", or NULL for a sink that writes nothing. */
static cJSON *record_begin(const mp_metrics *m, const char *type)
{
    if (!m || !m->f)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddStringToObject(o, "type", type);
    return o;
}

static void record_end(mp_metrics *m, cJSON *o)
{
    if (!o) {
        if (m && m->f)
            report(m, ENOMEM);
        return;
    }
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!line) {
        report(m, ENOMEM);
        return;
    }
    size_t n = strlen(line);
    line[n] = '\n'; /* cJSON's terminator becomes the line's end: one write for the record */
    int e = write_whole(fileno(m->f), line, n + 1, m->cut);
    if (e)
        report(m, e);
    cJSON_free(line);
}

/* v under key, or null where v < 0 (not measured). */
static void number_or_null(cJSON *o, const char *key, double v)
{
    if (v >= 0)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static void add_str(cJSON *o, const char *key, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

double mp_metrics_bpb(double loss)
{
    return loss / log(2.0);
}

void mp_metrics_step(mp_metrics *m, const mp_step_record *r)
{
    cJSON *o = record_begin(m, "step");
    if (o) {
        cJSON_AddNumberToObject(o, "step", (double)r->step);
        cJSON_AddNumberToObject(o, "epoch", (double)r->epoch);
        cJSON_AddNumberToObject(o, "loss", r->loss);
        cJSON_AddNumberToObject(o, "lr", r->lr);
        cJSON_AddNumberToObject(o, "loss_scale", r->loss_scale);
        cJSON_AddBoolToObject(o, "skipped", r->skipped);
        cJSON_AddNumberToObject(o, "images_per_s", r->images_per_s);
        cJSON_AddNumberToObject(o, "step_ms", r->step_ms);
        number_or_null(o, "device_ms", r->device_ms);
        cJSON_AddNumberToObject(o, "comm_ms", r->comm_ms);
        number_or_null(o, "comm_hidden", r->comm_hidden);
        number_or_null(o, "comm_last_ms", r->comm_last_ms);
        number_or_null(o, "comm_skew_ms", r->comm_skew_ms);
    }
    record_end(m, o);
}

void mp_metrics_eval(mp_metrics *m, const mp_eval_record *r)
{
    cJSON *o = record_begin(m, "eval");
    if (o) {
        cJSON_AddNumberToObject(o, "epoch", (double)r->epoch);
        cJSON_AddNumberToObject(o, "loss", r->loss);
        cJSON_AddNumberToObject(o, "accuracy", r->accuracy);
        if (r->text)
            cJSON_AddNumberToObject(o, "bpb", mp_metrics_bpb(r->loss));
    }
    record_end(m, o);
}

void mp_metrics_checkpoint(mp_metrics *m, const mp_ckpt_record *r)
{
    cJSON *o = record_begin(m, "checkpoint");
    if (o) {
        cJSON_AddNumberToObject(o, "step", (double)r->step);
        add_str(o, "path", r->path);
        cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
        cJSON_AddBoolToObject(o, "async", r->async);
        cJSON_AddNumberToObject(o, "stall_s", r->stall_s);
        cJSON_AddNumberToObject(o, "wait_s", r->wait_s);
        cJSON_AddNumberToObject(o, "write_s", r->write_s);
        cJSON_AddNumberToObject(o, "steps_during_write", (double)r->steps_during);
    }
    record_end(m, o);
}

void mp_metrics_summary(mp_metrics *m, const mp_summary_record *r)
{
    cJSON *o = record_begin(m, "summary");
    if (o) {
        cJSON_AddNumberToObject(o, "world_size", r->world_size);
        add_str(o, "opt_level", r->opt_level);
        add_str(o, "half", r->half);
        add_str(o, "backend", r->backend);
        add_str(o, "model", r->model);
        cJSON_AddNumberToObject(o, "wall_s", r->wall_s);
        cJSON_AddNumberToObject(o, "images_per_s", r->images_per_s);
        cJSON_AddNumberToObject(o, "accuracy", r->accuracy);
        if (r->text)
            cJSON_AddNumberToObject(o, "test_bpb", mp_metrics_bpb(r->test_loss));
        cJSON_AddNumberToObject(o, "final_loss", r->final_loss);
        cJSON_AddNumberToObject(o, "loss_scale", r->loss_scale);
        cJSON_AddNumberToObject(o, "steps", (double)r->steps);
        cJSON_AddNumberToObject(o, "skipped_steps", (double)r->skipped_steps);
        cJSON_AddNumberToObject(o, "peak_mem_bytes", (double)r->peak_mem_bytes);
        cJSON_AddNumberToObject(o, "device_peak_bytes", (double)r->device_peak_bytes);
        cJSON_AddNumberToObject(o, "host_peak_bytes", (double)r->host_peak_bytes);
        if (r->device_used_peak_bytes >= 0)
            cJSON_AddNumberToObject(o, "device_used_peak_bytes", (double)r->device_used_peak_bytes);
        cJSON *time = cJSON_AddObjectToObject(o, "time_s");
        if (time) {
            cJSON_AddNumberToObject(time, "steps", r->step_s);
            cJSON_AddNumberToObject(time, "compute",
                                    r->step_s - r->input_wait_s - r->comm_exposed_s);
            cJSON_AddNumberToObject(time, "comm_exposed", r->comm_exposed_s);
            cJSON_AddNumberToObject(time, "input_wait", r->input_wait_s);
        }
        cJSON *loader = r->loader_fills > 0 ? cJSON_AddObjectToObject(o, "loader") : NULL;
        if (loader) {
            cJSON_AddNumberToObject(loader, "batches", (double)r->loader_fills);
            cJSON_AddNumberToObject(loader, "fill_s", r->loader_fill_s);
            cJSON_AddNumberToObject(loader, "fence_wait_s", r->loader_fence_s);
            cJSON_AddNumberToObject(loader, "slot_wait_s", r->loader_slot_wait_s);
        }
        cJSON *amp = cJSON_AddObjectToObject(o, "amp");
        if (amp) {
            add_str(amp, "weights", r->amp_weights);
            cJSON_AddBoolToObject(amp, "master_weights", r->amp_master_weights);
            add_str(amp, "gemm", r->amp_compute);
            add_str(amp, "batchnorm_params", r->amp_norm);
            cJSON_AddBoolToObject(amp, "keep_batchnorm_fp32", r->amp_keep_batchnorm_fp32);
            if (r->amp_loss_scale == 0.0)
                add_str(amp, "loss_scale", "dynamic");
            else
                cJSON_AddNumberToObject(amp, "loss_scale", r->amp_loss_scale);
            add_str(amp, "grads", r->amp_grads);
        }
        cJSON *graph = r->graph_launches > 0 ? cJSON_AddObjectToObject(o, "graph") : NULL;
        if (graph) {
            cJSON_AddNumberToObject(graph, "captured_at", (double)r->graph_captured_at);
            cJSON_AddNumberToObject(graph, "captures", (double)r->graph_captures);
            cJSON_AddNumberToObject(graph, "launches", (double)r->graph_launches);
        }
        cJSON *mem = cJSON_AddObjectToObject(o, "mem_bytes");
        int n = r->n_mem < 0 ? 0 : r->n_mem > 8 ? 8 : r->n_mem;
        for (int i = 0; mem && i < n; i++)
            if (r->mem_names[i])
                cJSON_AddNumberToObject(mem, r->mem_names[i], (double)r->mem_bytes[i]);
        cJSON *prof = r->n_prof > 0 ? cJSON_AddObjectToObject(o, "profile_ms") : NULL;
        if (prof)
            cJSON_AddNumberToObject(prof, "step", r->prof_step_ms);
        for (int i = 0; prof && i < r->n_prof && i < 64; i++)
            cJSON_AddNumberToObject(prof, r->prof_name[i], r->prof_ms[i]);
    }
    record_end(m, o);
}

/* A new object appended to array, or NULL (array NULL, or out of memory). */
static cJSON *array_item(cJSON *array)
{
    cJSON *q = array ? cJSON_CreateObject() : NULL;
    if (q && !cJSON_AddItemToArray(array, q)) {
        cJSON_Delete(q);
        return NULL;
    }
    return q;
}

void mp_metrics_backward(mp_metrics *m, const mp_backward_record *r)
{
    cJSON *o = record_begin(m, "backward");
    if (o) {
        cJSON_AddNumberToObject(o, "steps", (double)r->steps);
        cJSON_AddNumberToObject(o, "micro_batches", (double)r->micro_batches);
        cJSON_AddNumberToObject(o, "bucket_mb", r->bucket_mb);
        cJSON_AddNumberToObject(o, "first_bucket_mb", r->first_bucket_mb);
        cJSON *ps = cJSON_AddArrayToObject(o, "params");
        cJSON *q;
        for (int i = 0; i < r->nparams && (q = array_item(ps)); i++) {
            const mp_backward_param *p = &r->params[i];
            add_str(q, "name", p->name);
            add_str(q, "group", p->group);
            cJSON_AddNumberToObject(q, "elements", (double)p->elements);
            cJSON_AddNumberToObject(q, "bytes", (double)p->bytes);
            cJSON_AddNumberToObject(q, "ready_ms", p->ready_ms);
        }
        cJSON *bs = cJSON_AddArrayToObject(o, "buckets");
        for (int i = 0; i < r->nbuckets && (q = array_item(bs)); i++) {
            cJSON_AddNumberToObject(q, "bytes", (double)r->buckets[i].bytes);
            cJSON_AddNumberToObject(q, "params", r->buckets[i].params);
            cJSON_AddNumberToObject(q, "ready_ms", r->buckets[i].ready_ms);
        }
    }
    record_end(m, o);
}

void mp_metrics_close(mp_metrics *m)
{
    if (!m)
        return;
    if (m->f && fclose(m->f) != 0)
        report(m, errno);
    if (m->lock >= 0)
        close(m->lock);
    free(m->path);
    free(m);
}
