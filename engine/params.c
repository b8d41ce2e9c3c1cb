/* The flat parameter and gradient buffers and their named views. */
#include "engine/params.h"

#include <stdio.h>
#include <string.h>

#define MP_PARAM_ALIGN 16

int mp_params_add(mp_params *p, const char *name, int ndim, const int64_t *shape)
{
    if (p->count >= MP_MAX_PARAMS || mp_params_find(p, name) >= 0 || ndim > MP_MAX_DIMS)
        return -1;
    mp_param_view *v = &p->views[p->count];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->ndim = ndim;
    v->numel = 1;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = shape[i];
        v->numel *= shape[i];
    }
    v->offset = p->total;
    p->total += (v->numel + MP_PARAM_ALIGN - 1) / MP_PARAM_ALIGN * MP_PARAM_ALIGN;
    return p->count++;
}

void mp_params_alloc(mp_params *p)
{
    int64_t shape[1] = {p->total};
    p->data = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_WEIGHTS);
    p->grad = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_GRADS);
}

static mp_tensor view_in(const mp_tensor *flat, const mp_param_view *v)
{
    char *base = (char *)flat->data + v->offset * (int64_t)mp_dtype_size(flat->dtype);
    return mp_tensor_view(base, flat->dtype, v->ndim, v->shape);
}

mp_tensor mp_params_value(const mp_params *p, int i) { return view_in(&p->data, &p->views[i]); }

mp_tensor mp_params_grad(const mp_params *p, int i) { return view_in(&p->grad, &p->views[i]); }

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
    mp_tensor_free(&p->data);
    mp_tensor_free(&p->grad);
}
