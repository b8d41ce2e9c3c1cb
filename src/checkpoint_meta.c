/* What a checkpoint's attributes may hold: every value is checked against what a run could have
 * written before any of it is used (mp_checkpoint_open calls this for every command that reads
 * a checkpoint: inspect, eval, sample, export, --resume). Each rule says why a value is
 * impossible, so a hand-edited, damaged or foreign file fails with one line naming the
 * attribute. The checks that need the config (the optimizer's settings, the scale of a static
 * scaler, the dataset) are made where the config is known (src/checkpoint.c). */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint.h"

#define MAX_STEPS ((int64_t)1 << 53)  /* a step counter no run reaches */
#define MAX_WORLD ((int64_t)1 << 24)  /* ranks */
#define MAX_BATCH ((int64_t)1 << 40)  /* samples a step */

typedef struct meta {
    int64_t step, epoch, world, global;
} meta;

static mp_status bad(const mp_h5r *r, const char *obj, const char *name, long long v,
                     const char *rule)
{
    return mp_fail(MP_ECKPT, "%s: %s %s %lld, which no run writes (%s; a damaged or edited "
                   "checkpoint)", mp_h5r_path(r), obj, name, v, rule);
}

/* Attribute `name` of `obj` as an integer in [lo, hi]. */
static mp_status int_in(mp_h5r *r, const char *obj, const char *name, int64_t lo, int64_t hi,
                        const char *rule, int64_t *v)
{
    MP_TRY(mp_h5r_attr_int(r, obj, name, v));
    if (*v < lo || *v > hi)
        return bad(r, obj, name, (long long)*v, rule);
    return MP_OK;
}

/* Attribute `name` of `obj`, a string that must be one of `allowed` (NULL-terminated). */
static mp_status one_of(mp_h5r *r, const char *obj, const char *name,
                        const char *const *allowed, char **out)
{
    char *v = NULL;
    MP_TRY(mp_h5r_attr_string(r, obj, name, &v));
    for (int i = 0; allowed[i]; i++)
        if (strcmp(v, allowed[i]) == 0) {
            if (out)
                *out = v;
            else
                free(v);
            return MP_OK;
        }
    char list[200] = "";
    for (int i = 0; allowed[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "",
                 allowed[i]);
    mp_status st = mp_fail(MP_ECKPT, "%s: %s %s \"%.40s\", which no run writes (one of %s; a "
                           "damaged or edited checkpoint)", mp_h5r_path(r), obj, name, v, list);
    free(v);
    return st;
}

/* /meta: the kind, precision, model name and where the run stood. */
static mp_status check_meta(mp_h5r *r, meta *m)
{
    static const char *const kinds[] = {"full", "export", NULL};
    static const char *const levels[] = {"O0", "O1", "O2", "O3", NULL};
    static const char *const halves[] = {"fp16", "bf16", NULL};
    MP_TRY(one_of(r, "/meta", "kind", kinds, NULL));
    MP_TRY(one_of(r, "/meta", "opt_level", levels, NULL));
    MP_TRY(one_of(r, "/meta", "half", halves, NULL));
    char *model = NULL;
    MP_TRY(mp_h5r_attr_string(r, "/meta", "model", &model));
    bool ok = model[0] && strlen(model) < 64 &&
              strspn(model, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(model);
    if (!ok) {
        mp_status st = mp_fail(MP_ECKPT, "%s: /meta model \"%.40s\" is not a model name (a "
                               "damaged or edited checkpoint)", mp_h5r_path(r), model);
        free(model);
        return st;
    }
    free(model);
    MP_TRY(int_in(r, "/meta", "step", 0, MAX_STEPS, "a step count >= 0", &m->step));
    MP_TRY(int_in(r, "/meta", "epoch", 0, m->step, "0 to the step: an epoch takes a step at "
                  "least", &m->epoch));
    MP_TRY(int_in(r, "/meta", "world_size", 1, MAX_WORLD, "1 to 2^24 ranks", &m->world));
    MP_TRY(int_in(r, "/meta", "global_batch", 1, MAX_BATCH, "1 to 2^40 samples a step",
                  &m->global));
    if (m->global % m->world != 0)
        return bad(r, "/meta", "global_batch", (long long)m->global,
                   "a multiple of /meta world_size");
    return MP_OK;
}

/* /data: the resume point and the batch it was taken with agree with /meta. */
static mp_status check_data(mp_h5r *r, const meta *m)
{
    int64_t epoch, position, size, batch, accum, world;
    MP_TRY(int_in(r, "/data", "epoch", m->epoch, m->epoch, "/meta epoch", &epoch));
    MP_TRY(int_in(r, "/data", "dataset_size", 1, MAX_STEPS, "at least one sample", &size));
    MP_TRY(int_in(r, "/data", "position", 0, size, "0 to /data dataset_size", &position));
    MP_TRY(int_in(r, "/data", "batch_size", 1, MAX_BATCH, "at least one sample a rank", &batch));
    accum = 1; /* files of the first format version have no accum_steps: one micro-batch */
    if (mp_h5r_has_attr(r, "/data", "accum_steps"))
        MP_TRY(int_in(r, "/data", "accum_steps", 1, 1 << 20, "at least one micro-batch", &accum));
    MP_TRY(int_in(r, "/data", "world_size", m->world, m->world, "/meta world_size", &world));
    if (batch * accum * world != m->global)
        return bad(r, "/meta", "global_batch", (long long)m->global,
                   "/data batch_size x accum_steps x world_size");
    return MP_OK;
}

/* /scaler: a positive normal FP32 scale and counters a run can reach in /meta step steps. */
static mp_status check_scaler_attrs(mp_h5r *r, const meta *m)
{
    double scale = 0.0;
    int64_t v, skipped;
    MP_TRY(mp_h5r_attr_double(r, "/scaler", "scale", &scale));
    if (!isfinite(scale) || scale < FLT_MIN || scale > FLT_MAX)
        return mp_fail(MP_ECKPT, "%s: /scaler scale %g is not a positive normal FP32 value, which "
                       "no run writes (a damaged or edited checkpoint)", mp_h5r_path(r), scale);
    MP_TRY(int_in(r, "/scaler", "dynamic", 0, 1, "0 or 1", &v));
    MP_TRY(int_in(r, "/scaler", "growth_tracker", 0, m->step, "0 to the step", &v));
    MP_TRY(int_in(r, "/scaler", "hysteresis_left", 0, 1000, "0 to amp.hysteresis, at most 1000",
                  &v));
    MP_TRY(int_in(r, "/scaler", "skipped_steps", 0, m->step, "0 to the step", &skipped));
    MP_TRY(int_in(r, "/scaler", "consecutive_skips", 0, skipped, "0 to the skipped steps", &v));
    return MP_OK;
}

typedef struct slot_walk {
    mp_h5r *r;
    const char *slots, *param;
} slot_walk;

/* A member of /optim/<param>: one of the optimizer's slots. */
static mp_status known_slot(const char *name, void *arg)
{
    const slot_walk *w = arg;
    size_t n = strlen(name);
    for (const char *s = w->slots; *s; s += strcspn(s, " "), s += *s == ' ')
        if (strncmp(s, name, n) == 0 && (s[n] == ' ' || s[n] == '\0'))
            return MP_OK;
    return mp_fail(MP_ECKPT, "%s: /optim/%s/%s is not a slot of this optimizer (/optim slots "
                   "\"%s\"; a damaged or edited checkpoint)", mp_h5r_path(w->r), w->param, name,
                   w->slots);
}

/* A member of /optim: a parameter's group, whose members are slots. */
static mp_status param_slots(const char *name, void *arg)
{
    slot_walk *w = arg;
    char path[300];
    snprintf(path, sizeof path, "/optim/%s", name);
    w->param = name;
    return mp_h5r_members(w->r, path, known_slot, w);
}

/* /optim: a known optimizer, its slots the ones it keeps, steps within the run's. */
static mp_status check_optim(mp_h5r *r, const meta *m)
{
    static const char *const names[] = {"sgd", "adam", "adamw", NULL};
    static const char *const sgd_slots[] = {"", "momentum_buffer", NULL};
    static const char *const adam_slots[] = {"exp_avg exp_avg_sq", NULL};
    char *name = NULL, *slots = NULL;
    int64_t steps;
    MP_TRY(one_of(r, "/optim", "name", names, &name));
    bool sgd = strcmp(name, "sgd") == 0;
    free(name);
    MP_TRY(int_in(r, "/optim", "steps", 0, m->step, "0 to the step", &steps));
    MP_TRY(one_of(r, "/optim", "slots", sgd ? sgd_slots : adam_slots, &slots));
    slot_walk w = {r, slots, NULL};
    mp_status st = mp_h5r_members(r, "/optim", param_slots, &w);
    free(slots);
    return st;
}

mp_status mp_checkpoint_check_attrs(mp_h5r *r, const char *kind)
{
    meta m;
    MP_TRY(check_meta(r, &m));
    if (strcmp(kind, "full") != 0)
        return MP_OK;
    MP_TRY(check_data(r, &m));
    MP_TRY(check_scaler_attrs(r, &m));
    return check_optim(r, &m);
}
