/* Gradient buckets (see buckets.h). Invariants: a group's buckets partition [0, total) of its
 * buffer; every rank plans the same buckets and starts them in the same order (the order of
 * `buckets`), which the collectives on the transport require. */
#include "comm/buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/clock.h"

int mp_buckets_plan(const mp_params *p, const size_t wire_bytes[MP_NGROUPS], int64_t bucket_bytes,
                    int64_t first_bucket_bytes, mp_bucket *out)
{
    int n = 0;
    mp_bucket open[MP_NGROUPS];
    int closed[MP_NGROUPS] = {0};
    for (int g = 0; g < MP_NGROUPS; g++)
        open[g] = (mp_bucket){.group = g, .lo = p->groups[g].total, .hi = p->groups[g].total};
    for (int i = p->count - 1; i >= 0; i--) { /* reverse declaration order: backward's order */
        int g = p->views[i].group;
        mp_bucket *b = &open[g];
        b->lo = p->views[i].offset;
        b->first_param = i;
        b->nparams++;
        int64_t cap = closed[g] ? bucket_bytes : first_bucket_bytes;
        if ((b->hi - b->lo) * (int64_t)wire_bytes[g] >= cap) {
            out[n++] = *b;
            closed[g]++;
            *b = (mp_bucket){.group = g, .lo = b->lo, .hi = b->lo};
        }
    }
    for (int g = 0; g < MP_NGROUPS; g++)
        if (open[g].nparams > 0) {
            open[g].lo = 0; /* the group's first parameter sits at offset 0 */
            out[n++] = open[g];
        }
    for (int i = 1; i < n; i++) /* insertion sort, first_param highest first */
        for (int j = i; j > 0 && out[j].first_param > out[j - 1].first_param; j--) {
            mp_bucket t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

mp_status mp_grad_sync_init(mp_grad_sync *s, mp_comm *comm, const mp_ops *ops, mp_params *p,
                            const mp_grad_sync_config *cfg)
{
    memset(s, 0, sizeof *s);
    if (cfg->bucket_bytes < 1 || cfg->first_bucket_bytes < 1 || !(cfg->predivide > 0))
        return mp_fail(MP_EUSAGE, "comm: bucket sizes and predivide must be positive");
    s->comm = comm;
    s->ops = ops;
    s->params = p;
    s->cfg = *cfg;
    size_t wire_bytes[MP_NGROUPS];
    for (int g = 0; g < MP_NGROUPS; g++) {
        mp_tensor *grad = &p->groups[g].grad;
        s->wire[g] = cfg->wire >= 0 ? (mp_dtype)cfg->wire : grad->dtype;
        wire_bytes[g] = mp_dtype_size(s->wire[g]);
        if (s->wire[g] != grad->dtype && p->groups[g].total > 0 && comm->size > 1) {
            int64_t shape[1] = {p->groups[g].total};
            s->wirebuf[g] = mp_tensor_new(ops, s->wire[g], 1, shape, MP_MEM_GRADS);
        }
    }
    for (int g = 0; g < MP_NGROUPS && cfg->accumulate; g++) {
        const mp_tensor *grad = &p->groups[g].grad;
        int64_t shape[1] = {p->groups[g].total};
        if (shape[0] > 0)
            s->acc[g] = mp_tensor_new(ops, grad->dtype == MP_F64 ? MP_F64 : MP_F32, 1, shape,
                                      MP_MEM_GRADS);
    }
    s->buckets = mp_alloc((size_t)(p->count + MP_NGROUPS) * sizeof *s->buckets, MP_MEM_WORKSPACE);
    s->nbuckets = mp_buckets_plan(p, wire_bytes, cfg->bucket_bytes, cfg->first_bucket_bytes,
                                  s->buckets);
    for (int i = 0; i < s->nbuckets; i++) {
        mp_bucket *b = &s->buckets[i];
        snprintf(b->what, sizeof b->what, "%s of gradient bucket %d/%d (%s, %lld elements)",
                 cfg->shard ? "reduce-scatter" : "allreduce", i + 1, s->nbuckets,
                 mp_dtype_name(s->wire[b->group]), (long long)(b->hi - b->lo));
    }
    return MP_OK;
}

void mp_grad_sync_begin(mp_grad_sync *s, bool accumulated)
{
    s->add_acc = accumulated && s->cfg.accumulate;
    s->next = 0;
    s->t_first = 0.0;
    s->comm_ms = s->exposed_ms = 0.0;
    s->timed = false;
    for (int i = 0; i < s->nbuckets; i++)
        s->buckets[i].ticket = 0;
}

static mp_tensor slice(const mp_tensor *flat, int64_t lo, int64_t hi)
{
    int64_t shape[1] = {hi - lo};
    char *base = (char *)flat->data + lo * (int64_t)mp_dtype_size(flat->dtype);
    return mp_tensor_view(base, flat->dtype, 1, shape);
}

/* The part of bucket b that reaches the ranks: all of it, or with cfg.shard this rank's piece
 * of it (elements of the group's buffer). */
static void received(const mp_grad_sync *s, const mp_bucket *b, int64_t *lo, int64_t *hi)
{
    *lo = b->lo;
    *hi = b->hi;
    if (!s->cfg.shard)
        return;
    const mp_param_group *g = &s->params->groups[b->group];
    *lo = g->lo > *lo ? g->lo : *lo;
    *hi = g->lo + g->n < *hi ? g->lo + g->n : *hi;
    if (*hi < *lo)
        *hi = *lo;
}

/* The step's first start, now: its time, and where the host will not wait for the sums
 * (NCCL) the marks of the set this step reuses (the marked step two before) read as this
 * step's comm_ms and exposed_ms, and this step's first mark recorded. */
static mp_status first_start(mp_grad_sync *s, double now)
{
    s->t_first = now;
    s->marked = false;
    if (!mp_comm_device_orders(s->comm))
        return MP_OK;
    void **m = s->mark[s->set];
    if (s->pending[s->set]) {
        double exposed = 0.0;
        s->pending[s->set] = false;
        MP_TRY(s->ops->mark_elapsed(m[0], m[2], &s->comm_ms));
        MP_TRY(s->ops->mark_elapsed(m[1], m[2], &exposed));
        s->exposed_ms = exposed > 0.0 ? exposed : 0.0;
        s->timed = true;
    }
    MP_TRY(s->ops->mark_record(&m[0]));
    s->marked = true;
    return MP_OK;
}

static mp_status start_bucket(mp_grad_sync *s, int i)
{
    mp_bucket *b = &s->buckets[i];
    mp_tensor g = slice(&s->params->groups[b->group].grad, b->lo, b->hi), w = g;
    if (s->add_acc) {
        mp_tensor a = slice(&s->acc[b->group], b->lo, b->hi);
        MP_TRY(s->ops->add(&g, &a, &g));
    }
    if (s->comm->size == 1)
        return MP_OK;
    if (s->wirebuf[b->group].data) {
        w = slice(&s->wirebuf[b->group], b->lo, b->hi);
        MP_TRY(s->ops->convert(&g, &w));
    }
    if (s->t_first == 0.0)
        MP_TRY(first_start(s, mp_now()));
    size_t n = (size_t)(b->hi - b->lo);
    mp_coll coll = s->cfg.shard ? mp_coll_blocks(MP_COLL_REDUCE_SCATTER, w.data, n,
                                                 s->wire[b->group],
                                                 (size_t)s->params->groups[b->group].n,
                                                 (size_t)b->lo, b->what)
                                : mp_coll_of(MP_COLL_ALLREDUCE, w.data, n, s->wire[b->group],
                                             MP_REDOP_SUM, b->what);
    return mp_comm_coll_start(s->comm, s->ops, &coll, &b->ticket);
}

mp_status mp_grad_sync_accumulate(mp_grad_sync *s, bool first)
{
    if (!s->cfg.accumulate)
        return mp_fail(MP_EINTERNAL, "comm: gradient accumulation was not set up");
    for (int g = 0; g < MP_NGROUPS; g++) {
        const mp_tensor *grad = &s->params->groups[g].grad;
        if (!s->acc[g].data)
            continue;
        MP_TRY(first ? s->ops->convert(grad, &s->acc[g])
                     : s->ops->add(&s->acc[g], grad, &s->acc[g]));
    }
    return MP_OK;
}

mp_status mp_grad_sync_ready(void *arg, int first_param)
{
    mp_grad_sync *s = arg;
    if (!s->cfg.overlap || (s->comm->size == 1 && !s->add_acc))
        return MP_OK;
    while (s->next < s->nbuckets && s->buckets[s->next].first_param >= first_param)
        MP_TRY(start_bucket(s, s->next++));
    return MP_OK;
}

mp_status mp_grad_sync_finish(mp_grad_sync *s)
{
    if (s->nbuckets == 0 || (s->comm->size == 1 && !s->add_acc))
        return MP_OK;
    s->t_backward = mp_now();
    if (s->comm->size > 1 && s->next < s->nbuckets && s->t_first == 0.0)
        MP_TRY(first_start(s, s->t_backward)); /* no overlap: the first start is now */
    if (s->marked)
        MP_TRY(s->ops->mark_record(&s->mark[s->set][1]));
    while (s->next < s->nbuckets)
        MP_TRY(start_bucket(s, s->next++));
    if (s->comm->size == 1)
        return MP_OK;
    bool waited = false;
    MP_TRY(mp_comm_coll_order(s->comm, s->buckets[s->nbuckets - 1].ticket, &waited));
    double done = mp_now();
    if (s->marked) {
        MP_TRY(s->ops->mark_record(&s->mark[s->set][2]));
        s->marked = false;
        s->pending[s->set] = true;
        s->set ^= 1;
    }
    for (int i = 0; i < s->nbuckets; i++) {
        mp_bucket *b = &s->buckets[i];
        int64_t lo, hi;
        received(s, b, &lo, &hi);
        if (s->wirebuf[b->group].data && hi > lo) {
            mp_tensor g = slice(&s->params->groups[b->group].grad, lo, hi);
            mp_tensor w = slice(&s->wirebuf[b->group], lo, hi);
            MP_TRY(s->ops->convert(&w, &g));
        }
    }
    if (!waited) /* the host never waited: the device's times, read at the first start */
        return MP_OK;
    s->timed = true;
    s->comm_ms = 1e3 * (done - s->t_first);
    s->exposed_ms = 1e3 * (done - (s->t_backward > s->t_first ? s->t_backward : s->t_first));
    return MP_OK;
}

double mp_grad_sync_pre_scale(const mp_grad_sync *s)
{
    return s->comm->size > 1 ? 1.0 / s->cfg.predivide : 1.0;
}

double mp_grad_sync_post_scale(const mp_grad_sync *s)
{
    return s->comm->size > 1 ? s->cfg.predivide / s->comm->size : 1.0;
}

void mp_grad_sync_unmarked(mp_grad_sync *s)
{
    if (!s->pending[s->set ^ 1])
        return;
    s->pending[s->set] = false;
    s->set ^= 1;
}

void mp_grad_sync_free(mp_grad_sync *s)
{
    for (int g = 0; g < MP_NGROUPS; g++) {
        if (s->ops) {
            mp_tensor_delete(s->ops, &s->wirebuf[g]);
            mp_tensor_delete(s->ops, &s->acc[g]);
        }
    }
    for (int i = 0; i < 6 && s->ops; i++) {
        s->ops->mark_free(s->mark[i / 3][i % 3]);
        s->mark[i / 3][i % 3] = NULL;
    }
    mp_free(s->buckets);
    s->buckets = NULL;
    s->nbuckets = 0;
}
