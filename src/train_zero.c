/* ZeRO-1's whole view of the sharded state (train.h, mp_train_gather): each rank owns block
 * [lo, lo + n) of every flat group's FP32 master and optimizer slots; the code that reads or
 * writes them by parameter (checkpoints, check_finite, the resume broadcast) sees whole-group
 * copies gathered from the owners; a synchronous save instead gathers one parameter at a time
 * (mp_train_whole_part). Invariant: while t->whole.on, the shards are in t->whole and
 * every [lo, lo + n) spans its group; otherwise nothing of the copies is left. */
#include <string.h>

#include "src/train.h"

mp_status mp_train_whole_part(void *arg, int part, int i, float *buf)
{
    mp_trainer *t = arg;
    const mp_params *p = &t->model.params;
    const mp_param_view *v = &p->views[i];
    const mp_param_group *g = &p->groups[v->group];
    const mp_tensor *own = part == 0   ? &g->master
                           : part == 1 ? &t->opt.slot1[v->group]
                                       : &t->opt.slot2[v->group];
    if (own->dtype != MP_F32 || mp_tensor_numel(own) != g->n)
        return mp_fail(MP_EINTERNAL, "checkpoint: %s: part %d is not an FP32 block", v->name,
                       part);
    for (int r = 0; r < t->comm->size; r++) { /* rank r holds [r n, (r + 1) n) */
        int64_t a = v->offset > r * g->n ? v->offset : r * g->n;
        int64_t b = v->offset + v->numel < (r + 1) * g->n ? v->offset + v->numel : (r + 1) * g->n;
        if (a >= b)
            continue;
        if (r == t->comm->rank)
            memcpy(buf + (a - v->offset), (const float *)own->data + (a - g->lo),
                   (size_t)(b - a) * sizeof(float));
        MP_TRY(mp_comm_bcast(t->comm, buf + (a - v->offset), (size_t)(b - a) * sizeof(float), r,
                             "checkpoint: a block of a sharded parameter from its owner"));
    }
    return MP_OK;
}

/* The sharded tensors of group k that are swapped: the separate master and the slots. */
static int sharded_tensors(mp_trainer *t, int k, mp_tensor **live, mp_tensor **aside)
{
    mp_param_group *g = &t->model.params.groups[k];
    int n = 0;
    if (g->master.data && g->master.data != g->model.data) {
        live[n] = &g->master;
        aside[n++] = &t->whole.master[k];
    }
    if (t->opt.slot1[k].data) {
        live[n] = &t->opt.slot1[k];
        aside[n++] = &t->whole.slot1[k];
    }
    if (t->opt.slot2[k].data) {
        live[n] = &t->opt.slot2[k];
        aside[n++] = &t->whole.slot2[k];
    }
    return n;
}

mp_status mp_train_gather(mp_trainer *t)
{
    mp_params *p = &t->model.params;
    if (!mp_params_sharded(p) || t->whole.on)
        return MP_OK;
    for (int k = 0; k < MP_NGROUPS; k++) { /* first, so that ungather restores them whatever */
        t->whole.lo[k] = p->groups[k].lo;
        t->whole.n[k] = p->groups[k].n;
    }
    t->whole.on = true;
    uint64_t ticket = 0;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &p->groups[k];
        mp_tensor *live[3], *aside[3];
        int m = g->total > 0 ? sharded_tensors(t, k, live, aside) : 0;
        for (int j = 0; j < m; j++) {
            int64_t shape[1] = {g->total};
            size_t elem = mp_dtype_size(live[j]->dtype);
            *aside[j] = *live[j];
            *live[j] = mp_tensor_new(t->ops, aside[j]->dtype, 1, shape, MP_MEM_WORKSPACE);
            MP_TRY(t->ops->copy((char *)live[j]->data + (size_t)g->lo * elem, aside[j]->data,
                                (size_t)g->n * elem));
            mp_coll c = mp_coll_blocks(MP_COLL_ALLGATHER, live[j]->data, (size_t)g->total,
                                       live[j]->dtype, (size_t)g->n, 0,
                                       "all-gather of the sharded optimizer state");
            MP_TRY(mp_comm_coll_start(t->comm, t->ops, &c, &ticket));
        }
        g->lo = 0;
        g->n = g->total;
    }
    return ticket ? mp_comm_coll_wait(t->comm, ticket) : MP_OK;
}

mp_status mp_train_ungather(mp_trainer *t, bool keep)
{
    if (!t->whole.on)
        return MP_OK;
    mp_params *p = &t->model.params;
    mp_status st = MP_OK;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &p->groups[k];
        g->lo = t->whole.lo[k];
        g->n = t->whole.n[k];
        mp_tensor *live[3], *aside[3];
        int m = g->total > 0 ? sharded_tensors(t, k, live, aside) : 0;
        for (int j = 0; j < m; j++) {
            size_t elem = mp_dtype_size(live[j]->dtype);
            if (keep && st == MP_OK && aside[j]->data)
                st = t->ops->copy(aside[j]->data, (char *)live[j]->data + (size_t)g->lo * elem,
                                  (size_t)g->n * elem);
        }
        mp_status synced = t->ops->sync(); /* the copies read the whole copies, freed next */
        st = st != MP_OK ? st : synced;
        for (int j = 0; j < m; j++) {
            if (!aside[j]->data) /* not swapped: gather stopped before it */
                continue;
            mp_tensor_delete(t->ops, live[j]);
            *live[j] = *aside[j];
            memset(aside[j], 0, sizeof *aside[j]);
        }
    }
    t->whole.on = false;
    return st;
}
