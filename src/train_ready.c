/* When backward completes each gradient (see train_ready.h). */
#include "src/train_ready.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dtype.h"
#include "engine/profile.h"

mp_status mp_ready_times_init(mp_ready_times *r, mp_grad_sync *sync)
{
    memset(r, 0, sizeof *r);
    int n = sync->params->count > 0 ? sync->params->count : 1;
    r->sync = sync;
    r->now = calloc((size_t)n, sizeof *r->now);
    r->sum = calloc((size_t)n, sizeof *r->sum);
    if (!r->now || !r->sum) {
        mp_ready_times_free(r);
        return mp_fail(MP_EINTERNAL, "log.profile: out of memory for the gradients' ready times");
    }
    return MP_OK;
}

void mp_ready_times_begin(mp_ready_times *r)
{
    r->pending = r->sync->params->count - 1;
    r->t0 = mp_profile_now();
}

/* Parameters from first_param up to the pending one completed at time t. */
static void complete(mp_ready_times *r, int first_param, double t)
{
    for (; r->pending >= first_param && r->pending >= 0; r->pending--)
        r->now[r->pending] = t - r->t0;
}

mp_status mp_ready_times_ready(void *arg, int first_param)
{
    mp_ready_times *r = arg;
    complete(r, first_param, mp_profile_now());
    return mp_grad_sync_ready(r->sync, first_param);
}

void mp_ready_times_end(mp_ready_times *r)
{
    complete(r, 0, mp_profile_now());
    if (!r->warm) {
        r->warm = true;
        return;
    }
    for (int i = 0; i < r->sync->params->count; i++)
        r->sum[i] += r->now[i];
    r->steps++;
}

/* Parameter i's slot in its group's buffers: up to the next parameter's offset in the group (or
 * the group's end), alignment padding included, as a bucket's range includes it. */
static int64_t slot(const mp_params *p, int i)
{
    const mp_param_view *v = &p->views[i];
    for (int k = i + 1; k < p->count; k++)
        if (p->views[k].group == v->group)
            return p->views[k].offset - v->offset;
    return p->groups[v->group].total - v->offset;
}

void mp_ready_times_report(const mp_ready_times *r, mp_metrics *m, int64_t micro_batches)
{
    const mp_grad_sync *s = r->sync;
    const mp_params *p = s->params;
    if (r->steps == 0 || p->count == 0)
        return;
    mp_backward_param *ps = calloc((size_t)p->count, sizeof *ps);
    mp_backward_bucket *bs = calloc((size_t)s->nbuckets + 1, sizeof *bs);
    double ms = 1e3 / (double)r->steps;
    for (int j = 0; ps && j < p->count; j++) { /* backward's order: the last parameter first */
        int i = p->count - 1 - j;
        const mp_param_view *v = &p->views[i];
        ps[j] = (mp_backward_param){
            .name = v->name, .group = v->group == MP_GROUP_NORM ? "norm" : "weights",
            .elements = v->numel,
            .bytes = slot(p, i) * (int64_t)mp_dtype_size(s->wire[v->group]),
            .ready_ms = ms * r->sum[i]};
    }
    for (int i = 0; bs && i < s->nbuckets; i++) {
        const mp_bucket *b = &s->buckets[i];
        bs[i] = (mp_backward_bucket){
            .bytes = (b->hi - b->lo) * (int64_t)mp_dtype_size(s->wire[b->group]),
            .params = b->nparams, .ready_ms = ms * r->sum[b->first_param]};
    }
    if (!ps || !bs) /* like the metrics' own write errors: said once, training goes on */
        fprintf(stderr, "mpdist: log.profile: out of memory for the backward record; not written\n");
    else
        mp_metrics_backward(m, &(mp_backward_record){
                                   .steps = r->steps, .micro_batches = micro_batches,
                                   .bucket_mb = (double)s->cfg.bucket_bytes / 1048576.0,
                                   .first_bucket_mb = (double)s->cfg.first_bucket_bytes / 1048576.0,
                                   .nparams = p->count, .nbuckets = s->nbuckets,
                                   .params = ps, .buckets = bs});
    free(ps);
    free(bs);
}

void mp_ready_times_free(mp_ready_times *r)
{
    free(r->now);
    free(r->sum);
    r->now = r->sum = NULL;
}
