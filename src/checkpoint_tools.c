/* mpdist export and mpdist inspect: checkpoints read and written without a model, by walking
 * the names stored in /params, /buffers and /optim. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/h5file.h"
#include "src/checkpoint.h"

typedef struct name_list {
    char (*names)[128];
    int n, cap;
} name_list;

static mp_status add_name(const char *name, void *arg)
{
    name_list *l = arg;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        void *p = realloc(l->names, (size_t)cap * sizeof *l->names);
        if (!p)
            return mp_fail(MP_ECKPT, "out of memory listing a checkpoint");
        l->names = p;
        l->cap = cap;
    }
    snprintf(l->names[l->n++], sizeof l->names[0], "%s", name);
    return MP_OK;
}

/* The members of `group` (none when it is absent and optional). */
static mp_status list_group(mp_h5r *r, const char *group, bool optional, name_list *l)
{
    memset(l, 0, sizeof *l);
    if (optional && !mp_h5r_exists(r, group))
        return MP_OK;
    mp_status st = mp_h5r_members(r, group, add_name, l);
    if (st != MP_OK) {
        free(l->names);
        memset(l, 0, sizeof *l);
    }
    return st;
}

/* Reads dataset `path` whole into a new FP64 buffer (freed with mp_free). */
static mp_status read_all(mp_h5r *r, const char *path, int *ndim, int64_t *shape,
                          mp_dtype *stored, double **data, int64_t *numel)
{
    MP_TRY(mp_h5r_info(r, path, ndim, shape, stored));
    *numel = 1;
    for (int k = 0; k < *ndim; k++)
        *numel *= shape[k];
    if (*stored == MP_H5_I64)
        return mp_fail(MP_ECKPT, "%s: dataset %s holds integers, expected floats",
                       mp_h5r_path(r), path);
    *data = mp_alloc((size_t)*numel * sizeof(double) + 1, MP_MEM_WORKSPACE);
    mp_status st = mp_h5r_array(r, path, *ndim, shape, *data, MP_F64);
    if (st != MP_OK) {
        mp_free(*data);
        *data = NULL;
    }
    return st;
}

static const char *const export_strings[] = {"opt_level", "half", "model", "config"};
static const char *const export_ints[] = {"step", "epoch", "world_size", "global_batch"};

/* /meta of the export: `in`'s, with kind "export", the dtype and, when the model has BatchNorm
 * layers (has_bn), their dtype bn_dt. */
static mp_status export_meta(mp_h5r *r, mp_h5w *w, mp_dtype dt, bool has_bn, mp_dtype bn_dt)
{
    MP_TRY(mp_h5w_attr_int(w, "/meta", "format_version", MP_CKPT_FORMAT));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "kind", "export"));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "dtype", mp_dtype_name(dt)));
    if (has_bn)
        MP_TRY(mp_h5w_attr_string(w, "/meta", "batchnorm_dtype", mp_dtype_name(bn_dt)));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "mpdist_version", MPDIST_VERSION));
    for (size_t i = 0; i < sizeof export_strings / sizeof export_strings[0]; i++) {
        char *v = NULL;
        MP_TRY(mp_h5r_attr_string(r, "/meta", export_strings[i], &v));
        mp_status st = mp_h5w_attr_string(w, "/meta", export_strings[i], v);
        free(v);
        MP_TRY(st);
    }
    for (size_t i = 0; i < sizeof export_ints / sizeof export_ints[0]; i++) {
        int64_t v = 0;
        MP_TRY(mp_h5r_attr_int(r, "/meta", export_ints[i], &v));
        MP_TRY(mp_h5w_attr_int(w, "/meta", export_ints[i], v));
    }
    return MP_OK;
}

/* Whether `name` (P.x) belongs to a BatchNorm layer: one of whose buffers is P.running_mean. */
static bool batchnorm_member(const name_list *buffers, const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return false;
    int prefix = (int)(dot - name);
    for (int i = 0; i < buffers->n; i++)
        if (strncmp(buffers->names[i], name, (size_t)prefix) == 0 &&
            strcmp(buffers->names[i] + prefix, ".running_mean") == 0)
            return true;
    return false;
}

/* Whether /buffers (its names) holds a BatchNorm layer's running statistics. */
static bool has_bn(const name_list *buffers)
{
    for (int i = 0; i < buffers->n; i++) {
        const char *dot = strrchr(buffers->names[i], '.');
        if (dot && strcmp(dot, ".running_mean") == 0)
            return true;
    }
    return false;
}

/* MP_EUSAGE naming dataset `path` when one of its n finite values x rounds to inf in dt (beyond
 * fp16's 65504: an O0 or bf16 run's weights), which would write a file eval calls damaged. */
static mp_status check_fits(const char *path, const double *x, int64_t n, mp_dtype dt)
{
    double lim = mp_dtype_overflow(dt);
    for (int64_t k = 0; k < n; k++)
        if (isfinite(x[k]) && fabs(x[k]) >= lim)
            return mp_fail(MP_EUSAGE, "export: %s holds %g at element %lld, beyond %s's range "
                           "(largest %g): export it with --dtype %s",
                           path, x[k], (long long)k, mp_dtype_name(dt), mp_dtype_max(dt),
                           dt == MP_F16 ? "bf16 or fp32" : "fp32");
    return MP_OK;
}

/* Copies every dataset of `group` in dtype dt, those of BatchNorm layers (by `buffers`, the
 * names in /buffers) in bn_dt. */
static mp_status export_group(mp_h5r *r, mp_h5w *w, const char *group, const name_list *buffers,
                              mp_dtype dt, mp_dtype bn_dt)
{
    name_list l;
    MP_TRY(list_group(r, group, strcmp(group, "/buffers") == 0, &l));
    mp_status st = MP_OK;
    for (int i = 0; i < l.n && st == MP_OK; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", group, l.names[i]);
        int ndim;
        int64_t shape[MP_H5_MAX_DIMS], numel;
        mp_dtype stored;
        double *x = NULL;
        st = read_all(r, path, &ndim, shape, &stored, &x, &numel);
        mp_dtype to = batchnorm_member(buffers, l.names[i]) ? bn_dt : dt;
        if (st == MP_OK)
            st = check_fits(path, x, numel, to);
        if (st == MP_OK)
            st = mp_h5w_array(w, path, to, ndim, shape, x, MP_F64);
        mp_free(x);
    }
    free(l.names);
    return st;
}

/* Refuses an export's output that it must not replace or cannot write (MP_EUSAGE): no path, a
 * path stat refuses for another reason than its absence (a name too long, say), anything but a
 * regular file (a directory, a device, a FIFO: the new file would take its name),
 * a new file whose directory is missing, not a directory or not writable, the input itself, a
 * training checkpoint (what a run resumes from), or a file with bytes that is no checkpoint (a
 * config or a dataset named by a slip: left as it is, as log.metrics leaves another program's
 * file). A missing or empty file or an earlier export is replaced. */
static mp_status export_target(const char *in, const char *out)
{
    if (!out[0])
        return mp_fail(MP_EUSAGE, "export: the output path is empty");
    struct stat so, si;
    if (stat(out, &so) != 0 && errno != ENOENT && errno != ENOTDIR) /* too long, looping, ... */
        return mp_fail(MP_EUSAGE, "export: %s: %s", out, strerror(errno));
    if (stat(out, &so) != 0) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", out);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else
            slash[slash == dir] = '\0'; /* "/x.h5": the root */
        struct stat sd;
        if (stat(dir, &sd) != 0)
            return mp_fail(MP_EUSAGE, "export: %s: its directory %s: %s", out, dir,
                           strerror(errno));
        if (!S_ISDIR(sd.st_mode))
            return mp_fail(MP_EUSAGE, "export: %s: %s is not a directory", out, dir);
        if (access(dir, W_OK | X_OK) != 0)
            return mp_fail(MP_EUSAGE, "export: %s: cannot write in its directory %s: %s", out,
                           dir, strerror(errno));
        return MP_OK;
    }
    if (!S_ISREG(so.st_mode))
        return mp_fail(MP_EUSAGE, "export: %s is not a regular file (%s); give the path of a new "
                       "file", out, S_ISDIR(so.st_mode) ? "a directory" : "a device, FIFO or socket");
    if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return mp_fail(MP_EUSAGE, "export: %s is the checkpoint being exported; give another "
                       "output path", out);
    mp_h5r *r = NULL;
    char *kind = NULL;
    mp_status st = mp_checkpoint_open(out, &r, &kind);
    char why[512];
    snprintf(why, sizeof why, "%s", st == MP_OK ? "" : mp_error_message());
    mp_error_clear();
    bool full = st == MP_OK && kind && strcmp(kind, "full") == 0;
    free(kind);
    if (r)
        mp_h5r_close(r);
    if (full)
        return mp_fail(MP_EUSAGE, "export: %s is a training checkpoint; export will not replace "
                       "it (remove it first, or give another output path)", out);
    if (st != MP_OK && so.st_size > 0)
        return mp_fail(MP_EUSAGE, "export: %s is no checkpoint that export may replace (%s); "
                       "remove it first, or give another output path", out, why);
    return MP_OK;
}

mp_status mp_checkpoint_export(const char *in, const char *out, mp_dtype dt, bool keep_bn_fp32,
                               bool *has_batchnorm)
{
    if (has_batchnorm)
        *has_batchnorm = false;
    MP_TRY(export_target(in, out));
    mp_h5r *r;
    MP_TRY(mp_checkpoint_open(in, &r, NULL));
    mp_dtype bn_dt = keep_bn_fp32 ? MP_F32 : dt;
    name_list buffers;
    mp_status st = list_group(r, "/buffers", true, &buffers);
    if (st != MP_OK) {
        mp_h5r_close(r);
        return st;
    }
    if (has_batchnorm)
        *has_batchnorm = has_bn(&buffers);
    mp_h5w *w = NULL;
    st = mp_h5w_open(&w, out, 0);
    if (st == MP_OK)
        st = export_meta(r, w, dt, has_bn(&buffers), bn_dt);
    if (st == MP_OK)
        st = export_group(r, w, "/params", &buffers, dt, bn_dt);
    if (st == MP_OK)
        st = export_group(r, w, "/buffers", &buffers, dt, bn_dt);
    free(buffers.names);
    mp_h5r_close(r);
    if (st != MP_OK) {
        mp_h5w_abort(w);
        return st;
    }
    return mp_h5w_commit(w);
}

/* Reads every dataset of `group` and prints a row for each (name, shape, dtype, L2 norm) when
 * out is not NULL; adds their elements to *total and their squares to *sumsq. */
static mp_status print_tensors(mp_h5r *r, const char *group, bool optional, FILE *out,
                               int64_t *total, double *sumsq)
{
    name_list l;
    MP_TRY(list_group(r, group, optional, &l));
    mp_status st = MP_OK;
    for (int i = 0; i < l.n && st == MP_OK; i++) {
        char path[256], shape_s[96];
        int len = snprintf(path, sizeof path, "%s/%s", group, l.names[i]);
        if (len < 0 || (size_t)len >= sizeof path) {
            st = mp_fail(MP_ECKPT, "%s: dataset name %s/%s is too long", mp_h5r_path(r), group,
                         l.names[i]);
            break;
        }
        int ndim;
        int64_t shape[MP_H5_MAX_DIMS], numel;
        mp_dtype stored;
        double *x = NULL, sum = 0.0;
        st = read_all(r, path, &ndim, shape, &stored, &x, &numel);
        if (st != MP_OK)
            break;
        for (int64_t e = 0; e < numel; e++)
            sum += x[e] * x[e];
        mp_free(x);
        *total += numel;
        *sumsq += sum;
        mp_h5_shape_text(ndim, shape, shape_s, sizeof shape_s);
        if (out)
            fprintf(out, "  %-36s %-18s %-5s %12.6g\n", l.names[i], shape_s, mp_dtype_name(stored),
                sqrt(sum));
    }
    free(l.names);
    return st;
}

/* The optimizer summary: its slots, and the count and total norm of their datasets (every
 * one read). */
static mp_status print_optim(mp_h5r *r, FILE *out)
{
    char *name = NULL, *slots = NULL;
    int64_t steps = 0;
    MP_TRY(mp_h5r_attr_string(r, "/optim", "name", &name));
    mp_status st = mp_h5r_attr_int(r, "/optim", "steps", &steps);
    if (st == MP_OK)
        st = mp_h5r_attr_string(r, "/optim", "slots", &slots);
    name_list params = {0};
    if (st == MP_OK)
        st = list_group(r, "/optim", false, &params);
    int64_t n = 0;
    double sumsq = 0.0;
    for (int i = 0; st == MP_OK && i < params.n; i++) {
        char group[256];
        snprintf(group, sizeof group, "/optim/%s", params.names[i]);
        st = print_tensors(r, group, false, NULL, &n, &sumsq);
    }
    if (st == MP_OK)
        fprintf(out, "optimizer: %s, %lld steps taken, slots: %s (%lld elements, norm %.6g)\n",
                name, (long long)steps, slots[0] ? slots : "none", (long long)n, sqrt(sumsq));
    free(params.names);
    free(name);
    free(slots);
    return st;
}

static mp_status print_meta(mp_h5r *r, FILE *out, bool *full)
{
    char *kind = NULL, *opt = NULL, *half = NULL, *model = NULL, *version = NULL;
    int64_t format = 0, step = 0, epoch = 0, world = 0, batch = 0;
    mp_status st = mp_h5r_attr_int(r, "/meta", "format_version", &format);
    const char *skeys[] = {"kind", "opt_level", "half", "model", "mpdist_version"};
    char **svals[] = {&kind, &opt, &half, &model, &version};
    for (int i = 0; i < 5 && st == MP_OK; i++)
        st = mp_h5r_attr_string(r, "/meta", skeys[i], svals[i]);
    const char *ikeys[] = {"step", "epoch", "world_size", "global_batch"};
    int64_t *ivals[] = {&step, &epoch, &world, &batch};
    for (int i = 0; i < 4 && st == MP_OK; i++)
        st = mp_h5r_attr_int(r, "/meta", ikeys[i], ivals[i]);
    if (st == MP_OK) {
        *full = strcmp(kind, "full") == 0;
        fprintf(out, "checkpoint: %s\n", mp_h5r_path(r));
        fprintf(out, "format %lld (%s), written by mpdist %s\n", (long long)format, kind, version);
        fprintf(out, "model %s, opt level %s, half %s\n", model, opt, half);
        fprintf(out, "step %lld, epoch %lld, %lld rank%s, global batch %lld\n", (long long)step,
                (long long)epoch, (long long)world, world == 1 ? "" : "s", (long long)batch);
    }
    for (int i = 0; i < 5; i++)
        free(*svals[i]);
    return st;
}

static mp_status print_state(mp_h5r *r, FILE *out)
{
    double scale = 0.0;
    int64_t growth = 0, hyst = 0, skipped = 0, dynamic = 0, epoch = 0, position = 0, n = 0;
    MP_TRY(mp_h5r_attr_double(r, "/scaler", "scale", &scale));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "growth_tracker", &growth));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "hysteresis_left", &hyst));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "skipped_steps", &skipped));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "dynamic", &dynamic));
    fprintf(out, "scaler: %s scale %g, growth tracker %lld, hysteresis left %lld, skipped steps "
            "%lld\n", dynamic ? "dynamic" : "static", scale, (long long)growth, (long long)hyst,
            (long long)skipped);
    MP_TRY(print_optim(r, out));
    MP_TRY(mp_h5r_attr_int(r, "/data", "epoch", &epoch));
    MP_TRY(mp_h5r_attr_int(r, "/data", "position", &position));
    MP_TRY(mp_h5r_attr_int(r, "/data", "dataset_size", &n));
    fprintf(out, "data: epoch %lld, %lld of %lld samples consumed\n", (long long)epoch,
            (long long)position, (long long)n);
    int ndim;
    int64_t shape[MP_H5_MAX_DIMS];
    mp_dtype dt;
    MP_TRY(mp_h5r_info(r, "/rng/state", &ndim, shape, &dt));
    if (ndim != 2 || shape[0] < 1 || shape[1] < 1)
        return mp_fail(MP_ECKPT, "%s: /rng/state is not a table of ranks", mp_h5r_path(r));
    int64_t *rng = mp_alloc((size_t)(shape[0] * shape[1]) * sizeof(int64_t), MP_MEM_WORKSPACE);
    mp_status st = mp_h5r_array(r, "/rng/state", 2, shape, rng, MP_H5_I64);
    if (st == MP_OK)
        fprintf(out, "rng: seed %lld, state of %lld ranks\n", (long long)rng[0],
                (long long)shape[0]);
    mp_free(rng);
    return st;
}

mp_status mp_checkpoint_inspect(const char *path, FILE *out)
{
    mp_h5r *r;
    MP_TRY(mp_checkpoint_open(path, &r, NULL));
    bool full = false;
    int64_t np = 0, nb = 0;
    double sp = 0.0, sb = 0.0;
    mp_status st = print_meta(r, out, &full);
    if (st == MP_OK) {
        fprintf(out, "parameters:\n  %-36s %-18s %-5s %12s\n", "name", "shape", "dtype", "norm");
        st = print_tensors(r, "/params", false, out, &np, &sp);
    }
    if (st == MP_OK && mp_h5r_exists(r, "/buffers")) {
        fprintf(out, "buffers:\n");
        st = print_tensors(r, "/buffers", true, out, &nb, &sb);
    }
    if (st == MP_OK)
        fprintf(out, "%lld parameter elements (norm %.6g), %lld buffer elements\n",
                (long long)np, sqrt(sp), (long long)nb);
    if (st == MP_OK && full)
        st = print_state(r, out);
    mp_h5r_close(r);
    return st;
}
