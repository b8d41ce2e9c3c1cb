/* Saving, loading and sharing a trainer's state; the layout is in checkpoint.h.
 * Invariants: a save writes every dataset a load reads, and a successful load overwrites every
 * piece of state it restores (so a failed attempt at a newer file leaves nothing behind once an
 * older one loads). Only rank 0 touches the file. */
#include "src/checkpoint.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libconfig.h>

#include "engine/host_swap.h"
#include "io/ckpt_dir.h"
#include "io/fsutil.h"
#include "io/h5file.h"

#define RNG_COLS 4 /* seed, next step (dropout counter), epoch (sampler stream), position */

static const char *optim_name(mp_optim_kind k)
{
    return k == MP_OPTIM_ADAM ? "adam" : k == MP_OPTIM_ADAMW ? "adamw" : "sgd";
}

/* The name of optimizer slot s (0, 1), or NULL when o has no such slot. */
static const char *slot_name(const mp_optimizer *o, int s)
{
    const mp_tensor *flat = s == 0 ? o->slot1 : o->slot2;
    if (!flat[MP_GROUP_WEIGHTS].data && !flat[MP_GROUP_NORM].data)
        return NULL;
    if (o->args.kind == MP_OPTIM_SGD)
        return "momentum_buffer";
    return s == 0 ? "exp_avg" : "exp_avg_sq";
}

/* Parameter v's slice of a flat per-group tensor of its group (an optimizer slot). */
static mp_tensor slice(const mp_tensor *flat, const mp_param_view *v)
{
    return mp_tensor_view((char *)flat->data + (size_t)v->offset * mp_dtype_size(flat->dtype),
                          flat->dtype, v->ndim, v->shape);
}

/* What /params/<name> holds for parameter i: the FP32 master, or the model copy (O3). */
static mp_tensor stored_values(const mp_params *p, int i)
{
    mp_tensor m = mp_params_master(p, i);
    return m.data ? m : mp_params_value(p, i);
}

/* MP_ECKPT naming dataset `path` of file r when one of the n values in `data` (dtype dt) is not
 * finite in that dtype, or is negative when `nonneg`: states no run writes (a hand-edited or
 * damaged file whose checksums hold). */
static mp_status check_values(const mp_h5r *r, const char *path, const void *data, mp_dtype dt,
                              int64_t n, bool nonneg)
{
    for (int64_t i = 0; i < n; i++) {
        double v = mp_load(data, dt, (size_t)i);
        if (!isfinite(v) || (nonneg && v < 0.0))
            return mp_fail(MP_ECKPT, "%s: %s holds %g at element %lld, which no run writes%s (a "
                           "damaged or edited checkpoint)", mp_h5r_path(r), path, v,
                           (long long)i, isfinite(v) ? " (it must be >= 0)" : "");
    }
    return MP_OK;
}

static mp_status write_meta(mp_h5w *w, const mp_train_state *t, const mp_resume_point *at)
{
    const mp_config *c = t->cfg;
    MP_TRY(mp_h5w_attr_int(w, "/meta", "format_version", MP_CKPT_FORMAT));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "kind", "full"));
    MP_TRY(mp_h5w_attr_int(w, "/meta", "step", at->step));
    MP_TRY(mp_h5w_attr_int(w, "/meta", "epoch", at->epoch));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "opt_level", c->amp.opt_level));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "half", c->amp.half));
    MP_TRY(mp_h5w_attr_int(w, "/meta", "world_size", t->world_size));
    MP_TRY(mp_h5w_attr_int(w, "/meta", "global_batch",
                           c->data.batch_size * t->world_size * t->accum));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "mpdist_version", MPDIST_VERSION));
    MP_TRY(mp_h5w_attr_string(w, "/meta", "model", c->model.preset));
    return mp_h5w_attr_string(w, "/meta", "config", c->text ? c->text : "");
}

/* Whether part `part` (0 the FP32 master, 1 and 2 the optimizer's slots) of group k is sharded
 * without a whole copy: only this rank's block of it is here, and t->whole gives the rest. */
static bool sharded(const mp_train_state *t, int part, int k)
{
    if (!t->whole)
        return false;
    const mp_param_group *g = &t->params->groups[k];
    if (part == 0)
        return g->master.data && g->master.data != g->model.data;
    return (part == 1 ? t->opt->slot1 : t->opt->slot2)[k].data != NULL;
}

/* Parameter i's values of part `part` as the file stores them: a view of them, or when sharded
 * their whole values gathered into buf (collective then). */
static mp_status part_values(const mp_train_state *t, int part, int i, float *buf, mp_tensor *x)
{
    const mp_param_view *v = &t->params->views[i];
    if (sharded(t, part, v->group)) {
        MP_TRY(t->whole(t->whole_arg, part, i, buf));
        *x = mp_tensor_view(buf, MP_F32, v->ndim, v->shape);
    } else if (part == 0)
        *x = stored_values(t->params, i);
    else
        *x = slice(&(part == 1 ? t->opt->slot1 : t->opt->slot2)[v->group], v);
    return MP_OK;
}

static mp_status write_weights(mp_h5w *w, const mp_train_state *t, float *buf)
{
    const mp_params *p = t->params;
    char path[256];
    for (int i = 0; i < p->count; i++) {
        const mp_param_view *v = &p->views[i];
        mp_tensor x;
        MP_TRY(part_values(t, 0, i, buf, &x));
        snprintf(path, sizeof path, "/params/%s", v->name);
        MP_TRY(mp_h5w_array(w, path, MP_F32, v->ndim, v->shape, x.data, x.dtype));
    }
    for (int j = 0; j < t->nbufs; j++) {
        const mp_tensor *b = &t->bufs[j].t;
        snprintf(path, sizeof path, "/buffers/%s", t->bufs[j].name);
        MP_TRY(mp_h5w_array(w, path, MP_F32, b->ndim, b->shape, b->data, b->dtype));
    }
    return MP_OK;
}

static mp_status write_optim(mp_h5w *w, const mp_train_state *t, float *buf)
{
    const mp_optimizer *o = t->opt;
    const mp_params *p = t->params;
    const char *s0 = slot_name(o, 0), *s1 = slot_name(o, 1);
    char slots[64], path[256];
    snprintf(slots, sizeof slots, "%s%s%s", s0 ? s0 : "", s1 ? " " : "", s1 ? s1 : "");
    MP_TRY(mp_h5w_attr_string(w, "/optim", "name", optim_name(o->args.kind)));
    MP_TRY(mp_h5w_attr_int(w, "/optim", "steps", o->steps));
    MP_TRY(mp_h5w_attr_string(w, "/optim", "slots", slots));
    for (int i = 0; i < p->count; i++)
        for (int s = 0; s < 2; s++) {
            const mp_param_view *v = &p->views[i];
            if (!(s == 0 ? o->slot1 : o->slot2)[v->group].data)
                continue;
            mp_tensor x;
            MP_TRY(part_values(t, 1 + s, i, buf, &x));
            snprintf(path, sizeof path, "/optim/%s/%s", v->name, slot_name(o, s));
            MP_TRY(mp_h5w_array(w, path, MP_F32, v->ndim, v->shape, x.data, x.dtype));
        }
    return MP_OK;
}

/* The other ranks' side of a sharded save: the gathers of write_weights and write_optim, in their
 * order, with nothing written. */
static mp_status serve(const mp_train_state *t, float *buf)
{
    const mp_params *p = t->params;
    mp_tensor x;
    for (int i = 0; i < p->count; i++)
        MP_TRY(part_values(t, 0, i, buf, &x));
    for (int i = 0; i < p->count; i++)
        for (int s = 0; s < 2; s++)
            if ((s == 0 ? t->opt->slot1 : t->opt->slot2)[p->views[i].group].data)
                MP_TRY(part_values(t, 1 + s, i, buf, &x));
    return MP_OK;
}

static mp_status write_state(mp_h5w *w, const mp_train_state *t, const mp_resume_point *at,
                             const int64_t *rng)
{
    const mp_scaler_state *s = t->scaler;
    MP_TRY(mp_h5w_attr_double(w, "/scaler", "scale", s->scale));
    MP_TRY(mp_h5w_attr_int(w, "/scaler", "growth_tracker", s->growth_tracker));
    MP_TRY(mp_h5w_attr_int(w, "/scaler", "hysteresis_left", s->hysteresis_left));
    MP_TRY(mp_h5w_attr_int(w, "/scaler", "skipped_steps", s->skipped_steps));
    MP_TRY(mp_h5w_attr_int(w, "/scaler", "consecutive_skips", s->consecutive_skips));
    MP_TRY(mp_h5w_attr_int(w, "/scaler", "dynamic", t->scaler_cfg->dynamic));
    MP_TRY(mp_h5w_attr_string(w, "/rng", "algorithm",
                              "xoshiro256** seeded by splitmix64 from (seed, stream); counter-"
                              "based: dropout from (seed, step), shuffling from (seed, epoch), "
                              "augmentation from (seed, epoch, sample)"));
    MP_TRY(mp_h5w_attr_int(w, "/rng", "seed", (int64_t)t->cfg->train.seed));
    MP_TRY(mp_h5w_attr_string(w, "/rng", "columns", "seed, step, epoch, position"));
    int64_t shape[2] = {t->world_size, RNG_COLS};
    MP_TRY(mp_h5w_array(w, "/rng/state", MP_H5_I64, 2, shape, rng, MP_H5_I64));
    MP_TRY(mp_h5w_attr_int(w, "/data", "epoch", at->epoch));
    MP_TRY(mp_h5w_attr_int(w, "/data", "position", at->position));
    MP_TRY(mp_h5w_attr_int(w, "/data", "batch_size", t->cfg->data.batch_size));
    MP_TRY(mp_h5w_attr_int(w, "/data", "accum_steps", t->accum));
    MP_TRY(mp_h5w_attr_int(w, "/data", "world_size", t->world_size));
    if (t->dataset_digest)
        MP_TRY(mp_h5w_attr_int(w, "/data", "dataset_digest", (int64_t)t->dataset_digest));
    return mp_h5w_attr_int(w, "/data", "dataset_size", t->dataset_size);
}

static mp_status write_file(mp_train_state *t, const mp_resume_point *at, const int64_t *rng,
                            float *buf, char *path, size_t size)
{
    const mp_config *c = t->cfg;
    char dir[1100];
    mp_ckpt_path(c->checkpoint.dir, at->step, path, size);
    if (mp_make_parents(path, dir, sizeof dir) != 0)
        return mp_fail(MP_ECKPT, "checkpoint.dir: cannot create %s (%s)", dir, strerror(errno));
    mp_h5w *w;
    MP_TRY(mp_h5w_open(&w, path, (int)c->checkpoint.deflate));
    mp_host_swap hs;
    mp_status st = mp_host_begin(&hs, t->ops, t->tensors, t->ntensors, true);
    if (st == MP_OK)
        st = write_meta(w, t, at);
    if (st == MP_OK)
        st = write_weights(w, t, buf);
    if (st == MP_OK)
        st = write_optim(w, t, buf);
    if (st == MP_OK)
        st = write_state(w, t, at, rng);
    char note[400]; /* (a file system without locks was said at the start) */
    if (st == MP_OK) /* the directory made again: locked anew (after the gathers, so a sharded
                        save's other ranks are never left waiting for them) */
        st = mp_ckpt_dir_lock(c->checkpoint.dir, note, sizeof note);
    mp_status end = mp_host_end(&hs, false);
    if (st == MP_OK)
        st = end;
    if (st != MP_OK) {
        mp_h5w_abort(w);
        return st;
    }
    return mp_h5w_commit(w);
}

/* Row r of the generator table: what rank r's random streams continue from. */
static void rng_row(const mp_train_state *t, const mp_resume_point *at, int rank, int64_t *row)
{
    row[0] = (int64_t)t->cfg->train.seed;
    row[1] = at->step;
    row[2] = at->epoch;
    row[3] = at->position + rank;
}

void mp_checkpoint_prune(const mp_train_state *t, int64_t step)
{
    const mp_config *c = t->cfg;
    if (t->rank == 0 &&
        mp_ckpt_prune(c->checkpoint.dir, (int)c->checkpoint.keep, step) != MP_OK)
        fprintf(stderr, "mpdist: warning: %s\n", mp_error_message()); /* the new file is safe */
}

mp_status mp_checkpoint_save(mp_train_state *t, const mp_resume_point *at, char *path, size_t size)
{
    if (t->rank != 0 && !t->whole)
        return MP_OK;
    int64_t most = 0; /* a sharded save's buffer: the largest parameter */
    for (int i = 0; t->whole && i < t->params->count; i++)
        most = t->params->views[i].numel > most ? t->params->views[i].numel : most;
    float *buf = t->whole ? mp_alloc((size_t)most * sizeof(float) + 1, MP_MEM_WORKSPACE) : NULL;
    mp_status st;
    if (t->rank != 0) {
        mp_host_swap hs;
        st = mp_host_begin(&hs, t->ops, t->tensors, t->ntensors, true);
        if (st == MP_OK)
            st = serve(t, buf);
        mp_status end = mp_host_end(&hs, false);
        st = st != MP_OK ? st : end;
    } else {
        int world = t->world_size;
        int64_t *table = mp_alloc((size_t)world * RNG_COLS * sizeof(int64_t), MP_MEM_WORKSPACE);
        for (int r = 0; r < world; r++)
            rng_row(t, at, r, table + (size_t)r * RNG_COLS);
        st = write_file(t, at, table, buf, path, size);
        mp_free(table);
    }
    mp_free(buf);
    return st;
}

typedef struct member_check {
    const mp_h5r *r;
    const char *group;
    mp_model *m;
    const mp_named_tensor *bufs;
    int nbufs;
} member_check;

/* Each member of /params or /buffers must be one of the model's. */
static mp_status known_member(const char *name, void *arg)
{
    member_check *mc = arg;
    bool found = false;
    if (strcmp(mc->group, "/params") == 0)
        found = mp_params_find(&mc->m->params, name) >= 0;
    for (int j = 0; !found && j < mc->nbufs; j++)
        found = strcmp(mc->bufs[j].name, name) == 0;
    if (!found)
        return mp_fail(MP_ECKPT, "%s: %s/%s is not part of this model (a checkpoint of another "
                       "model?)", mp_h5r_path(mc->r), mc->group, name);
    return MP_OK;
}

/* Parameter dataset `path` (shape of v) into x, the master or the model copy it loads into
 * (stored_values), whose model copy has dtype `copy`. The values are checked while FP32, as
 * written; one that the half copy cannot hold (beyond fp16's 65504: an O0 or bf16 run's
 * weights, loaded at fp16 by eval, sample, checkpoint.init or O3) is told from a damaged file.
 * Into a half x (O3, or a forward-only model) they are rounded by mp_convert, as the masters'
 * copy is. */
static mp_status read_param(mp_h5r *r, const char *path, const mp_param_view *v,
                            const mp_tensor *x, mp_dtype copy)
{
    int64_t n = mp_tensor_numel(x);
    float *f = x->dtype == MP_F32 ? x->data
                                  : mp_alloc((size_t)n * sizeof(float) + 1, MP_MEM_WORKSPACE);
    mp_status st = mp_h5r_array(r, path, v->ndim, v->shape, f, MP_F32);
    if (st == MP_OK)
        st = check_values(r, path, f, MP_F32, n, false);
    double lim = copy == MP_F32 ? INFINITY : mp_dtype_overflow(copy); /* FP32 values fit */
    for (int64_t i = 0; st == MP_OK && i < n; i++)
        if (fabs((double)f[i]) >= lim)
            st = mp_fail(MP_ECKPT, "%s: %s holds %g at element %lld, beyond %s's range (largest "
                         "%g): load it %s", mp_h5r_path(r), path, (double)f[i], (long long)i,
                         mp_dtype_name(copy), mp_dtype_max(copy),
                         copy == MP_F16 ? "with amp.half = \"bf16\" or at O0" : "at O0");
    if (f != x->data) {
        if (st == MP_OK)
            mp_convert(x->data, x->dtype, f, MP_F32, (size_t)n);
        mp_free(f);
    }
    return st;
}

/* read_weights into host tensors: the parameters (FP32 masters, or the model at O3) and the
 * persistent buffers bufs[0..nbufs). */
static mp_status read_weights_host(mp_h5r *r, mp_model *m, mp_named_tensor *bufs, int nbufs)
{
    mp_params *p = &m->params;
    char path[256];
    for (int i = 0; i < p->count; i++) {
        const mp_param_view *v = &p->views[i];
        mp_tensor x = stored_values(p, i);
        snprintf(path, sizeof path, "/params/%s", v->name);
        int found = mp_h5r_find(r, path);
        if (found < 0)
            return MP_ECKPT;
        if (found == 0)
            return mp_fail(MP_ECKPT, "%s: has no parameter %s (a checkpoint of another model?)",
                           mp_h5r_path(r), v->name);
        MP_TRY(read_param(r, path, v, &x, mp_params_value(p, i).dtype));
    }
    for (int k = 0; k < MP_NGROUPS; k++) { /* the half copies, as the optimizer writes them */
        mp_param_group *g = &p->groups[k];
        if (g->master.data && g->master.data != g->model.data)
            mp_convert((char *)g->model.data + (size_t)g->lo * mp_dtype_size(g->model.dtype),
                       g->model.dtype, g->master.data, g->master.dtype,
                       (size_t)mp_tensor_numel(&g->master));
    }
    member_check mc = {r, "/params", m, bufs, nbufs}; /* nothing more than the model */
    MP_TRY(mp_h5r_members(r, "/params", known_member, &mc));
    if (nbufs == 0)
        return MP_OK;
    mc.group = "/buffers";
    MP_TRY(mp_h5r_members(r, "/buffers", known_member, &mc));
    for (int j = 0; j < nbufs; j++) {
        const mp_tensor *b = &bufs[j].t;
        snprintf(path, sizeof path, "/buffers/%.200s", bufs[j].name); /* names < 96 */
        MP_TRY(mp_h5r_array(r, path, b->ndim, b->shape, b->data, b->dtype));
        MP_TRY(check_values(r, path, b->data, b->dtype, mp_tensor_numel(b),
                            strstr(bufs[j].name, "running_var") != NULL));
    }
    return MP_OK;
}

static mp_status read_weights(mp_h5r *r, mp_model *m)
{
    mp_named_tensor bufs[MP_MAX_PARAMS];
    int nbufs = mp_model_buffers(m, bufs, MP_MAX_PARAMS);
    if (nbufs > MP_MAX_PARAMS)
        return mp_fail(MP_EUSAGE, "model: more than %d BatchNorm buffers", MP_MAX_PARAMS);
    mp_tensor *ts[2 * MP_NGROUPS + MP_MAX_PARAMS];
    int n = 0;
    for (int k = 0; k < MP_NGROUPS; k++) {
        ts[n++] = &m->params.groups[k].model;
        ts[n++] = &m->params.groups[k].master;
    }
    for (int j = 0; j < nbufs; j++)
        ts[n++] = &bufs[j].t;
    mp_host_swap hs;
    MP_TRY(mp_host_begin(&hs, m->ops, ts, n, true));
    mp_status st = read_weights_host(r, m, bufs, nbufs);
    mp_status end = mp_host_end(&hs, st == MP_OK);
    return st != MP_OK ? st : end;
}

mp_status mp_checkpoint_open(const char *path, mp_h5r **r, char **kind)
{
    MP_TRY(mp_h5r_open(r, path));
    int64_t version = 0;
    mp_status st = mp_h5r_attr_int(*r, "/meta", "format_version", &version);
    if (st == MP_OK && version > MP_CKPT_FORMAT)
        st = mp_fail(MP_ECKPT, "%s: checkpoint format version %lld is newer than this mpdist "
                     "reads (%d); use a newer mpdist", path, (long long)version, MP_CKPT_FORMAT);
    if (st == MP_OK && version < 1)
        st = mp_fail(MP_ECKPT, "%s: invalid checkpoint format version %lld", path,
                     (long long)version);
    if (st == MP_OK && version >= MP_CKPT_FORMAT_DIGESTS)
        mp_h5r_require_digests(*r);
    char *k = NULL;
    if (st == MP_OK)
        st = mp_h5r_attr_string(*r, "/meta", "kind", &k);
    if (st == MP_OK)
        st = mp_checkpoint_check_attrs(*r, k);
    if (st == MP_OK && kind)
        *kind = k;
    else
        free(k);
    if (st != MP_OK) {
        mp_h5r_close(*r);
        *r = NULL;
    }
    return st;
}

/* *v = key's value (an int, or a bool when is_bool) in the config text /meta config was written
 * with, *known = whether it is there (files before that text have none). */
static mp_status stored_key(mp_h5r *r, const char *key, bool is_bool, int *v, bool *known)
{
    *known = false;
    if (!mp_h5r_has_attr(r, "/meta", "config"))
        return MP_OK;
    char *text = NULL;
    MP_TRY(mp_h5r_attr_string(r, "/meta", "config", &text));
    config_t cfg;
    config_init(&cfg);
    *known = config_read_string(&cfg, text) &&
             (is_bool ? config_lookup_bool(&cfg, key, v) : config_lookup_int(&cfg, key, v));
    config_destroy(&cfg);
    free(text);
    return MP_OK;
}

/* The attention heads of a gpt or vit preset, which no parameter's shape shows (the same
 * weights split into other heads compute another model): the config's must be the one /meta
 * config was written with. A file without that text (older ones) is not checked. */
static mp_status check_heads(mp_h5r *r, const mp_config *c)
{
    if (strcmp(c->model.preset, "gpt") != 0 && strcmp(c->model.preset, "vit") != 0)
        return MP_OK;
    int heads = 0;
    bool known = false;
    MP_TRY(stored_key(r, "model.heads", false, &heads, &known));
    if (known && heads != c->model.heads)
        return mp_fail(MP_ECKPT, "%s: written with model.heads = %d, the config has %lld (the "
                       "same parameter shapes, another attention: set model.heads to %d)",
                       mp_h5r_path(r), heads, (long long)c->model.heads, heads);
    return MP_OK;
}

/* /meta model must be the config's model: its parameters are read by the config's names. */
static mp_status check_model(mp_h5r *r, const mp_config *c)
{
    char *model = NULL;
    MP_TRY(mp_h5r_attr_string(r, "/meta", "model", &model));
    mp_status st = MP_OK;
    if (strcmp(model, c->model.preset) != 0)
        st = mp_fail(MP_ECKPT, "%s: written for model %s, the config has model.preset %s (a "
                     "checkpoint of another model?)", mp_h5r_path(r), model, c->model.preset);
    free(model);
    return st != MP_OK ? st : check_heads(r, c);
}

/* The stored values are FP32 at every opt level (the masters, or the model's own values at O0
 * and O3), and read_weights_host rounds them into the config's copies, so the file's precision
 * does not matter here: only --resume (check_precision) holds a run to it. */
mp_status mp_checkpoint_load_weights(mp_model *m, const char *path, const mp_config *c)
{
    mp_h5r *r;
    char *kind = NULL;
    MP_TRY(mp_checkpoint_open(path, &r, &kind));
    free(kind);
    mp_status st = check_model(r, c);
    if (st == MP_OK)
        st = read_weights(r, m);
    mp_h5r_close(r);
    return st;
}

static mp_status read_slots(mp_h5r *r, mp_train_state *t);

static mp_status read_optim(mp_h5r *r, mp_train_state *t)
{
    mp_host_swap hs;
    MP_TRY(mp_host_begin(&hs, t->ops, t->optim, t->noptim, true));
    mp_status st = read_slots(r, t);
    mp_status end = mp_host_end(&hs, st == MP_OK);
    return st != MP_OK ? st : end;
}

/* read_optim into host copies of the optimizer slots. */
static mp_status read_slots(mp_h5r *r, mp_train_state *t)
{
    mp_optimizer *o = t->opt;
    const mp_params *p = &t->model->params;
    char *name = NULL;
    MP_TRY(mp_h5r_attr_string(r, "/optim", "name", &name));
    bool same = strcmp(name, optim_name(o->args.kind)) == 0;
    if (!same) {
        mp_status st = mp_fail(MP_ECKPT, "%s: written with optimizer %s, but optim.name is %s",
                               mp_h5r_path(r), name, optim_name(o->args.kind));
        free(name);
        return st;
    }
    free(name);
    MP_TRY(mp_h5r_attr_int(r, "/optim", "steps", &o->steps));
    const char *s0 = slot_name(o, 0), *s1 = slot_name(o, 1);
    char slots[64], path[256];
    snprintf(slots, sizeof slots, "%s%s%s", s0 ? s0 : "", s1 ? " " : "", s1 ? s1 : "");
    char *have = NULL;
    MP_TRY(mp_h5r_attr_string(r, "/optim", "slots", &have));
    bool same_slots = strcmp(have, slots) == 0;
    if (!same_slots) {
        mp_status st = mp_fail(MP_ECKPT, "%s: written with optimizer slots \"%s\", this run keeps "
                               "\"%s\" (other optimizer settings, e.g. optim.momentum?)",
                               mp_h5r_path(r), have, slots);
        free(have);
        return st;
    }
    free(have);
    for (int i = 0; i < p->count; i++)
        for (int s = 0; s < 2; s++) {
            const mp_param_view *v = &p->views[i];
            mp_tensor *flat = &(s == 0 ? o->slot1 : o->slot2)[v->group];
            if (!flat->data)
                continue;
            mp_tensor x = slice(flat, v);
            snprintf(path, sizeof path, "/optim/%s/%s", v->name, slot_name(o, s));
            int found = mp_h5r_find(r, path);
            if (found < 0)
                return MP_ECKPT;
            if (found == 0)
                return mp_fail(MP_ECKPT, "%s: has no optimizer state %s (written with other "
                               "optimizer settings, e.g. optim.momentum = 0?)",
                               mp_h5r_path(r), path);
            MP_TRY(mp_h5r_array(r, path, v->ndim, v->shape, x.data, x.dtype));
            MP_TRY(check_values(r, path, x.data, x.dtype, mp_tensor_numel(&x),
                                strcmp(slot_name(o, s), "exp_avg_sq") == 0));
        }
    return MP_OK;
}

/* The scaler's state must be one a run can reach: a positive normal FP32 scale, counters that
 * are not negative, consecutive skips within the skipped steps within the steps taken. */
static mp_status check_scaler(const mp_h5r *r, const mp_scaler_state *s, int64_t step,
                              int64_t opt_steps)
{
    const char *path = mp_h5r_path(r);
    if (!isfinite(s->scale) || s->scale < FLT_MIN || s->scale > FLT_MAX)
        return mp_fail(MP_ECKPT, "%s: /scaler scale %g is not a positive normal FP32 value, which "
                       "no run writes (a damaged or edited checkpoint)", path, s->scale);
    if (s->growth_tracker < 0 || s->hysteresis_left < 0 || s->skipped_steps < 0 ||
        s->consecutive_skips < 0 || s->consecutive_skips > s->skipped_steps ||
        s->skipped_steps > step || opt_steps < 0 || opt_steps > step)
        return mp_fail(MP_ECKPT, "%s: /scaler and /optim hold counters no run writes after %lld "
                       "steps (growth_tracker %lld, hysteresis_left %lld, skipped_steps %lld, "
                       "consecutive_skips %lld, optimizer steps %lld)", path, (long long)step,
                       (long long)s->growth_tracker, (long long)s->hysteresis_left,
                       (long long)s->skipped_steps, (long long)s->consecutive_skips,
                       (long long)opt_steps);
    return MP_OK;
}

/* A resumed run keeps the opt level and (but at O0) amp.half it was written with: MP_ECKPT
 * naming both otherwise. */
static mp_status check_level(mp_h5r *r, const mp_config *c)
{
    char *level = NULL, *half = NULL;
    mp_status st = mp_h5r_attr_string(r, "/meta", "opt_level", &level);
    if (st == MP_OK)
        st = mp_h5r_attr_string(r, "/meta", "half", &half);
    if (st == MP_OK && (strcmp(level, c->amp.opt_level) != 0 ||
                        (strcmp(level, "O0") != 0 && strcmp(half, c->amp.half) != 0)))
        st = mp_fail(MP_ECKPT, "%s: written at opt level %s (%s), the config has %s (%s): resume "
                     "with the opt level and amp.half it was written with (or start a new run "
                     "from its weights; sample, eval and export take it at any opt level)",
                     mp_h5r_path(r), level, half, c->amp.opt_level, c->amp.half);
    free(level);
    free(half);
    return st;
}

/* A run resumes under the precision it was written with: the opt level, the half type (but at
 * O0) and whether the loss scale is dynamic come from the checkpoint's config, and a change
 * is refused rather than half applied (the scaler state would be the file's, the banner the
 * config's). */
static mp_status check_precision(mp_h5r *r, const mp_train_state *t)
{
    MP_TRY(check_level(r, t->cfg));
    MP_TRY(check_model(r, t->cfg));
    int64_t dynamic = 0;
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "dynamic", &dynamic));
    if ((dynamic != 0) != t->scaler_cfg->dynamic)
        return mp_fail(MP_ECKPT, "%s: written with a %s loss scale, the config's is %s: resume "
                       "with the amp.loss_scale it was written with", mp_h5r_path(r),
                       dynamic ? "dynamic" : "static",
                       t->scaler_cfg->dynamic ? "dynamic" : "static");
    return MP_OK;
}

static mp_status read_state(mp_h5r *r, mp_train_state *t)
{
    mp_scaler_state *s = t->scaler;
    mp_resume_point *at = t->start;
    const char *path = mp_h5r_path(r);
    MP_TRY(mp_h5r_attr_double(r, "/scaler", "scale", &s->scale));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "growth_tracker", &s->growth_tracker));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "hysteresis_left", &s->hysteresis_left));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "skipped_steps", &s->skipped_steps));
    MP_TRY(mp_h5r_attr_int(r, "/scaler", "consecutive_skips", &s->consecutive_skips));
    MP_TRY(mp_h5r_attr_int(r, "/meta", "step", &at->step));
    MP_TRY(mp_h5r_attr_int(r, "/meta", "world_size", &at->world_size));
    MP_TRY(mp_h5r_attr_int(r, "/meta", "global_batch", &at->global_batch));
    MP_TRY(mp_h5r_attr_int(r, "/data", "epoch", &at->epoch));
    MP_TRY(mp_h5r_attr_int(r, "/data", "position", &at->position));
    MP_TRY(mp_h5r_attr_int(r, "/rng", "seed", &at->seed));
    int shuffled = 0;
    bool known = false;
    MP_TRY(stored_key(r, "data.shuffle", true, &shuffled, &known));
    at->shuffled = known ? shuffled != 0 : -1;
    MP_TRY(check_scaler(r, s, at->step, t->opt->steps));
    if (!t->scaler_cfg->dynamic && s->scale != t->scaler_cfg->init_scale)
        return mp_fail(MP_ECKPT, "%s: written with a static loss scale of %g, the config's is %g:"
                       " resume with the amp.loss_scale it was written with", path, s->scale,
                       t->scaler_cfg->init_scale);
    int64_t n = 0;
    MP_TRY(mp_h5r_attr_int(r, "/data", "dataset_size", &n));
    if (n != t->dataset_size)
        return mp_fail(MP_ECKPT, "%s: written for a training set of %lld samples, this one has "
                       "%lld (data.path, data.train_limit or data.val_fraction changed?)", path,
                       (long long)n, (long long)t->dataset_size);
    if (at->seed != (int64_t)t->cfg->train.seed)
        return mp_fail(MP_ECKPT, "%s: written with train.seed %lld, the config has %llu: keep "
                       "the seed to resume (data order and dropout follow it)", path,
                       (long long)at->seed, (unsigned long long)t->cfg->train.seed);
    int64_t digest = 0; /* absent: written by an mpdist before it, or for token shards */
    if (t->dataset_digest && mp_h5r_has_attr(r, "/data", "dataset_digest"))
        MP_TRY(mp_h5r_attr_int(r, "/data", "dataset_digest", &digest));
    if (digest && (uint64_t)digest != t->dataset_digest)
        return mp_fail(MP_ECKPT, "%s: written for another training set of %lld samples (its "
                       "labels, file names or text differ: data.path, data.format or the data "
                       "changed?)", path, (long long)n);
    if (at->world_size < 1 || at->world_size > (1 << 24) || at->step < 0 || at->epoch < 0 ||
        at->position < 0 || at->position > n)
        return mp_fail(MP_ECKPT, "%s: /meta and /data hold an impossible position (step %lld, "
                       "epoch %lld, position %lld, world size %lld)", path, (long long)at->step,
                       (long long)at->epoch, (long long)at->position, (long long)at->world_size);
    int64_t shape[2] = {at->world_size, RNG_COLS}, want[RNG_COLS];
    int64_t *table = mp_alloc((size_t)at->world_size * RNG_COLS * sizeof(int64_t),
                              MP_MEM_WORKSPACE);
    mp_status st = mp_h5r_array(r, "/rng/state", 2, shape, table, MP_H5_I64);
    for (int64_t k = 0; k < at->world_size && st == MP_OK; k++) {
        rng_row(t, at, (int)k, want);
        if (memcmp(want, table + k * RNG_COLS, sizeof want) != 0)
            st = mp_fail(MP_ECKPT, "%s: rank %lld's generator state in /rng/state does not "
                         "match the resume point in /meta and /data (a damaged checkpoint)",
                         path, (long long)k);
    }
    mp_free(table);
    return st;
}

mp_status mp_checkpoint_load(mp_train_state *t, const char *path)
{
    mp_h5r *r;
    char *kind = NULL;
    MP_TRY(mp_checkpoint_open(path, &r, &kind));
    mp_status st = MP_OK;
    if (strcmp(kind, "full") != 0)
        st = mp_fail(MP_ECKPT, "%s: an exported weights file (kind %s), not a training "
                     "checkpoint: use it with mpdist eval --checkpoint", path, kind);
    free(kind);
    if (st == MP_OK)
        st = check_precision(r, t);
    if (st == MP_OK)
        st = read_weights(r, t->model);
    if (st == MP_OK)
        st = read_optim(r, t);
    if (st == MP_OK)
        st = read_state(r, t);
    mp_h5r_close(r);
    return st;
}
