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

void mp_params_alloc(mp_params *p, const mp_ops *ops, const mp_group_spec specs[MP_NGROUPS])
{
    p->ops = ops;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &p->groups[k];
        int64_t shape[1] = {g->total};
        g->spec = specs[k];
        g->model = mp_tensor_new(ops, specs[k].model, 1, shape, MP_MEM_WEIGHTS);
        g->grad = mp_tensor_new(ops, specs[k].grad, 1, shape, MP_MEM_GRADS);
        if (specs[k].model == MP_F32 || specs[k].model == MP_F64)
            g->master = g->model;
        else if (specs[k].master)
            g->master = mp_tensor_new(ops, MP_F32, 1, shape, MP_MEM_MASTER);
        else
            memset(&g->master, 0, sizeof g->master);
    }
}

static mp_tensor view_in(const mp_tensor *flat, const mp_param_view *v)
{
    if (!flat->data)
        return mp_tensor_view(NULL, flat->dtype, 0, NULL);
    char *base = (char *)flat->data + v->offset * (int64_t)mp_dtype_size(flat->dtype);
    return mp_tensor_view(base, flat->dtype, v->ndim, v->shape);
}

mp_tensor mp_params_value(const mp_params *p, int i)
{
    return view_in(&p->groups[p->views[i].group].model, &p->views[i]);
}

mp_tensor mp_params_grad(const mp_params *p, int i)
{
    return view_in(&p->groups[p->views[i].group].grad, &p->views[i]);
}

mp_tensor mp_params_master(const mp_params *p, int i)
{
    return view_in(&p->groups[p->views[i].group].master, &p->views[i]);
}

mp_tensor *mp_params_updated(mp_params *p, int group)
{
    mp_param_group *g = &p->groups[group];
    return g->master.data ? &g->master : &g->model;
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
