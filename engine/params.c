/* The flat parameter groups and their named views. */
#include "engine/params.h"

#include "engine/ops.h"

#include <stdio.h>
#include <string.h>

#define MP_PARAM_ALIGN 16

int mp_params_add(mp_params *p, const char *name, int group, int ndim, const int64_t *shape)
{
    if (p->count >= MP_MAX_PARAMS || mp_params_find(p, name) >= 0 || ndim > MP_MAX_DIMS ||
        group < 0 || group >= MP_NGROUPS)
        return -1;
    mp_param_view *v = &p->views[p->count];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->ndim = ndim;
    v->group = group;
    v->numel = 1;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = shape[i];
        v->numel *= shape[i];
    }
    mp_param_group *g = &p->groups[group];
    v->offset = g->total;
    g->total += (v->numel + MP_PARAM_ALIGN - 1) / MP_PARAM_ALIGN * MP_PARAM_ALIGN;
    return p->count++;
}

void mp_params_shard(mp_params *p, int rank, int size)
{
    p->shard_rank = rank;
    p->shard_size = size;
    if (size <= 1)
        return;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &p->groups[k];
        int64_t unit = (int64_t)size * MP_PARAM_ALIGN;
        g->total = (g->total + unit - 1) / unit * unit;
        g->n = g->total / size;
        g->lo = (int64_t)rank * g->n;
    }
}

bool mp_params_sharded(const mp_params *p) { return p->shard_size > 1; }

void mp_params_alloc(mp_params *p, const mp_ops *ops, const mp_group_spec specs[MP_NGROUPS])
{
    p->ops = ops;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &p->groups[k];
        if (!mp_params_sharded(p)) {
            g->lo = 0;
            g->n = g->total;
        }
        int64_t shape[1] = {g->total}, block[1] = {g->n};
        g->spec = specs[k];
        g->model = mp_tensor_new(ops, specs[k].model, 1, shape, MP_MEM_WEIGHTS);
        if (specs[k].no_grad)
            g->grad = mp_tensor_view(NULL, specs[k].grad, 1, shape);
        else
            g->grad = mp_tensor_new(ops, specs[k].grad, 1, shape, MP_MEM_GRADS);
        if (specs[k].model == MP_F32 || specs[k].model == MP_F64)
            g->master = g->model;
        else if (specs[k].master)
            g->master = mp_tensor_new(ops, MP_F32, 1, block, MP_MEM_MASTER);
        else
            memset(&g->master, 0, sizeof g->master);
    }
}

/* Parameter v in flat, a group tensor that holds elements [lo, lo + numel(flat)); empty when
 * flat has no data or does not hold all of v. */
static mp_tensor view_in(const mp_tensor *flat, const mp_param_view *v, int64_t lo)
{
    if (!flat->data || v->offset < lo || v->offset + v->numel > lo + mp_tensor_numel(flat))
        return mp_tensor_view(NULL, flat->dtype, 0, NULL);
    char *base = (char *)flat->data + (v->offset - lo) * (int64_t)mp_dtype_size(flat->dtype);
    return mp_tensor_view(base, flat->dtype, v->ndim, v->shape);
}

bool mp_params_block_part(const mp_params *p, int i, int64_t *lo, int64_t *hi)
{
    const mp_param_view *v = &p->views[i];
    const mp_param_group *g = &p->groups[v->group];
    *lo = v->offset > g->lo ? v->offset : g->lo;
    *hi = v->offset + v->numel < g->lo + g->n ? v->offset + v->numel : g->lo + g->n;
    return *hi > *lo;
}

mp_tensor mp_params_slice(const mp_tensor *flat, int64_t lo, int64_t hi)
{
    int64_t shape[1] = {hi - lo};
    char *base = (char *)flat->data + lo * (int64_t)mp_dtype_size(flat->dtype);
    return mp_tensor_view(base, flat->dtype, 1, shape);
}

mp_tensor mp_params_value(const mp_params *p, int i)
{
    return view_in(&p->groups[p->views[i].group].model, &p->views[i], 0);
}

mp_tensor mp_params_grad(const mp_params *p, int i)
{
    return view_in(&p->groups[p->views[i].group].grad, &p->views[i], 0);
}

mp_tensor mp_params_master(const mp_params *p, int i)
{
    const mp_param_group *g = &p->groups[p->views[i].group];
    bool own = g->master.data && g->master.data != g->model.data; /* a separate block */
    return view_in(&g->master, &p->views[i], own ? g->lo : 0);
}

mp_tensor mp_params_updated(const mp_params *p, int group)
{
    const mp_param_group *g = &p->groups[group];
    if (g->master.data && g->master.data != g->model.data)
        return g->master;
    return mp_params_slice(&g->model, g->lo, g->lo + g->n);
}

int mp_params_find(const mp_params *p, const char *name)
{
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->views[i].name, name) == 0)
            return i;
    return -1;
}

int64_t mp_params_numel(const mp_params *p)
{
    int64_t n = 0;
    for (int i = 0; i < p->count; i++)
        n += p->views[i].numel;
    return n;
}

void mp_params_free(mp_params *p)
{
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &p->groups[k];
        if (g->master.data && g->master.data != g->model.data)
            mp_tensor_delete(p->ops, &g->master);
        if (p->ops) {
            mp_tensor_delete(p->ops, &g->model);
            mp_tensor_delete(p->ops, &g->grad);
        }
        memset(g, 0, sizeof *g);
    }
}
