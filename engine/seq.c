/* Sequence mechanics shared by the model and residual blocks; see seq.h. */
#include "engine/seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/attn_flash.h"
#include "engine/profile.h"
#include "engine/rng.h"

mp_status mp_seq_declare(const mp_seq *s, mp_params *p, const char *prefix)
{
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        for (int j = 0; j < l->nparams; j++) {
            char name[96];
            snprintf(name, sizeof name, "%s%s.%s", prefix, l->name, l->param_suffix[j]);
            int group = l->param_norm[j] ? MP_GROUP_NORM : MP_GROUP_WEIGHTS;
            if (mp_params_add(p, name, group, l->param_ndim[j], l->param_shape[j]) < 0)
                return mp_fail(MP_EUSAGE, "model: parameter name '%s' is used twice", name);
        }
        if (l->block) {
            char inner[96];
            snprintf(inner, sizeof inner, "%s%s.", prefix, l->name);
            for (int c = 0; c < l->block->nchild; c++) {
                mp_seq child = mp_block_child(l->block, c);
                MP_TRY(mp_seq_declare(&child, p, inner));
            }
        }
    }
    return MP_OK;
}

/* Elements a persistent buffer of n takes in the flat statistics: n rounded up to 16, so every
 * view starts 64-byte aligned (as the flat parameter buffers' views) and an overrun shows. */
static int64_t stats_padded(int64_t n) { return (n + 15) / 16 * 16; }

void mp_seq_bind(const mp_seq *s, const mp_params *p, int *k, const mp_tensor *stats,
                 int64_t *off)
{
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        for (int j = 0; j < l->nparams; j++, (*k)++) {
            l->w[j] = mp_params_value(p, *k);
            l->dw[j] = mp_params_grad(p, *k);
        }
        for (int j = 0; j < l->nbuffers; j++) {
            int64_t shape[1] = {l->buffer_numel[j]};
            if (l->buffer_persistent[j]) {
                char *at = (char *)stats->data + *off * (int64_t)mp_dtype_size(stats->dtype);
                l->buf[j] = mp_tensor_view(at, stats->dtype, 1, shape);
                *off += stats_padded(shape[0]);
            } else {
                l->buf[j] = mp_tensor_new(l->ops, stats->dtype, 1, shape, MP_MEM_WEIGHTS);
            }
        }
        for (int c = 0; l->block && c < l->block->nchild; c++) {
            mp_seq child = mp_block_child(l->block, c);
            mp_seq_bind(&child, p, k, stats, off);
        }
    }
}

int64_t mp_seq_stats_numel(const mp_seq *s)
{
    int64_t n = 0;
    for (int i = 0; i < s->n; i++) {
        const mp_layer *l = &s->layers[i];
        for (int j = 0; j < l->nbuffers; j++)
            n += l->buffer_persistent[j] ? stats_padded(l->buffer_numel[j]) : 0;
        for (int c = 0; l->block && c < l->block->nchild; c++) {
            mp_seq child = mp_block_child(l->block, c);
            n += mp_seq_stats_numel(&child);
        }
    }
    return n;
}

mp_dtype mp_seq_scratch_dtype(size_t elem) { return elem >= 8 ? MP_F64 : elem == 4 ? MP_F32 : MP_F16; }

/* A tensor of shape (ndim, shape) in dt at *dst, its storage planned (no data until the plan
 * is bound). */
static void take(mp_tensor *dst, mp_plan *plan, mp_dtype dt, int ndim, const int64_t *shape)
{
    *dst = mp_tensor_view(NULL, dt, ndim, shape);
    mp_plan_add(plan, dst);
}

static void batch_tensor(mp_tensor *dst, mp_plan *plan, mp_dtype dt, int64_t max_batch,
                         const int64_t shape[3])
{
    int64_t s[4] = {max_batch, shape[0], shape[1], shape[2]};
    take(dst, plan, dt, 4, s);
}

static void raise_widest(const int64_t shape[3], mp_dtype dt, int64_t *widest, size_t *elem)
{
    if (mp_shape_numel(shape) > *widest)
        *widest = mp_shape_numel(shape);
    if (mp_dtype_size(dt) > *elem)
        *elem = mp_dtype_size(dt);
}

/* A block's inner storage: its children's activations (each child takes an input of the
 * block's input dtype), gradient scratch sized for them, and the class's own tensors. */
static mp_dtype alloc_block(mp_layer *l, const mp_amp_policy *a, mp_dtype in, int64_t max_batch,
                            mp_plan *plan)
{
    mp_block *b = l->block;
    int64_t widest = mp_shape_numel(l->in_shape);
    size_t elem = mp_dtype_size(in);
    mp_dtype out = in;
    for (int c = 0; c < b->nchild; c++) {
        mp_seq child = mp_block_child(b, c);
        mp_dtype dt = mp_seq_alloc(&child, a, in, max_batch, &widest, &elem, plan);
        if (c == b->out_child)
            out = dt;
    }
    mp_dtype gdt = mp_seq_scratch_dtype(elem);
    int64_t gs[2] = {max_batch, widest};
    for (int i = 0; i < 2; i++)
        take(&b->gbuf[i], plan, gdt, 2, gs);
    batch_tensor(&b->out_tmp, plan, out, max_batch, l->out_shape);
    if (b->in_tmp_used)
        batch_tensor(&b->in_tmp, plan, in, max_batch, l->in_shape);
    return out;
}

mp_dtype mp_seq_alloc(const mp_seq *s, const mp_amp_policy *a, mp_dtype in, int64_t max_batch,
                      int64_t *widest, size_t *elem, mp_plan *plan)
{
    mp_dtype dt = in;
    raise_widest(s->n ? s->layers[0].in_shape : (int64_t[3]){1, 1, 1}, dt, widest, elem);
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        if (l->cls->cast_input && dt != a->compute)
            batch_tensor(&s->xcast[i], plan, a->compute, max_batch, l->in_shape);
        if (l->block)
            dt = alloc_block(l, a, dt, max_batch, plan);
        else if (l->cls->out_dtype)
            dt = l->cls->out_dtype(l, a, dt);
        batch_tensor(&s->acts[i], plan, dt, max_batch, l->out_shape);
        if (mp_shape_numel(l->save_shape) > 0)
            batch_tensor(&l->save, plan, l->save_fp32 ? mp_attn_flash_stats_dtype(dt) : dt,
                         max_batch, l->save_shape);
        raise_widest(l->out_shape, dt, widest, elem);
    }
    return dt;
}

/* Whether parameter k's separate FP32 master is sharded (ZeRO-1). */
static bool sharded_master(const mp_params *p, int k)
{
    const mp_param_group *g = &p->groups[p->views[k].group];
    return mp_params_sharded(p) && g->master.data && g->master.data != g->model.data;
}

/* Fills parameter k's values: drawn on the host, copied into backend memory, and rounded into
 * the model copy when the values are its FP32 master. A sharded master takes its block's part
 * of them from an FP32 copy of the whole parameter, which is rounded into the model copy the
 * same way. */
static mp_status init_param(mp_layer *l, int j, mp_params *p, uint64_t seed, int k)
{
    mp_rng r;
    mp_rng_seed(&r, seed, 0x1000u + (uint64_t)k);
    double bound = 1.0 / sqrt(l->fan_in > 0 ? l->fan_in : 1.0);
    int64_t from = 0, to = 0;
    bool shard = sharded_master(p, k), part = shard && mp_params_block_part(p, k, &from, &to);
    mp_tensor master = mp_params_master(p, k), whole = {0};
    if (shard)
        master = whole = mp_tensor_new(l->ops, MP_F32, l->w[j].ndim, l->w[j].shape,
                                       MP_MEM_WORKSPACE);
    mp_tensor *dst = master.data ? &master : &l->w[j];
    int64_t n = mp_tensor_numel(&l->w[j]);
    size_t bytes = (size_t)mp_tensor_bytes(dst);
    void *host = mp_alloc(bytes + 1, MP_MEM_WORKSPACE);
    for (int64_t e = 0; e < n; e++) {
        double v = l->param_init[j] == MP_INIT_ONES    ? 1.0
                   : l->param_init[j] == MP_INIT_ZEROS ? 0.0
                                                       : (2.0 * mp_rng_uniform(&r) - 1.0) * bound;
        mp_store(host, dst->dtype, (size_t)e, v);
    }
    mp_status st = l->ops->copy_in(dst->data, host, bytes);
    if (st == MP_OK)
        st = l->ops->sync(); /* the host block is freed next */
    mp_free(host);
    if (st == MP_OK && dst->data != l->w[j].data)
        st = l->ops->convert(dst, &l->w[j]);
    if (st == MP_OK && part) {
        const mp_param_group *g = &p->groups[p->views[k].group];
        st = l->ops->copy((float *)g->master.data + (from - g->lo),
                          (float *)whole.data + (from - p->views[k].offset),
                          (size_t)(to - from) * sizeof(float));
    }
    if (shard) {
        if (st == MP_OK)
            st = l->ops->sync(); /* the copies read `whole`, freed next */
        mp_tensor_delete(l->ops, &whole);
    }
    return st;
}

void mp_seq_seed(const mp_seq *s, uint64_t seed, int *k)
{
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        l->seed = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(*k + 1)); /* per-layer dropout masks */
        *k += l->nparams;
        for (int c = 0; l->block && c < l->block->nchild; c++) {
            mp_seq child = mp_block_child(l->block, c);
            mp_seq_seed(&child, seed, k);
        }
    }
}

void mp_seq_mask_step(const mp_seq *s, const int64_t *step)
{
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        l->mask_step = step;
        for (int c = 0; l->block && c < l->block->nchild; c++) {
            mp_seq child = mp_block_child(l->block, c);
            mp_seq_mask_step(&child, step);
        }
    }
}

mp_status mp_seq_init(const mp_seq *s, mp_params *p, uint64_t seed, int *k)
{
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        for (int j = 0; j < l->nparams; j++, (*k)++)
            MP_TRY(init_param(l, j, p, seed, *k));
        for (int j = 0; j < l->nbuffers; j++)
            MP_TRY(l->ops->fill(&l->buf[j], l->buffer_init[j]));
        for (int c = 0; l->block && c < l->block->nchild; c++) {
            mp_seq child = mp_block_child(l->block, c);
            MP_TRY(mp_seq_init(&child, p, seed, k));
        }
    }
    return MP_OK;
}

mp_status mp_seq_forward(const mp_seq *s, const mp_tensor *x, bool train, int64_t step,
                         mp_tensor *out)
{
    int64_t n = x->shape[0];
    mp_tensor cur = *x, in, y;
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        l->step = step;
        in = cur;
        if (s->xcast[i].data) {
            in = mp_tensor_batch(&s->xcast[i], n);
            double mark = train ? mp_profile_begin("cast") : 0.0;
            MP_TRY(l->ops->convert(&cur, &in));
            if (train)
                mp_profile_end(mark, "cast", MP_PROF_FORWARD);
        }
        y = mp_tensor_batch(&s->acts[i], n);
        double mark = train ? mp_profile_begin(l->name) : 0.0;
        MP_TRY(l->cls->forward(l, &in, &y, train));
        if (train)
            mp_profile_end_as(mark, l->cls->type, MP_PROF_FORWARD, l->name);
        cur = y;
    }
    *out = cur;
    return MP_OK;
}

/* Marks l and every layer inside it as running its forward again (or no longer). */
static void set_recomputing(mp_layer *l, bool on)
{
    l->recomputing = on;
    for (int c = 0; l->block && c < l->block->nchild; c++)
        for (int i = 0; i < l->block->n[c]; i++)
            set_recomputing(&l->block->layers[c][i], on);
}

mp_status mp_seq_backward(const mp_seq *s, const mp_tensor *x, const mp_tensor *dy,
                          mp_tensor *dx, mp_tensor scratch[2], const mp_layer_hook *done)
{
    int64_t n = x->shape[0];
    mp_tensor g = *dy, gx;
    int held = -1; /* the scratch buffer g is in; -1: the caller's dy, never written */
    for (int i = s->n - 1; i >= 0; i--) {
        mp_layer *l = &s->layers[i];
        mp_tensor xin = i == 0 ? *x : mp_tensor_batch(&s->acts[i - 1], n);
        if (s->xcast[i].data)
            xin = mp_tensor_batch(&s->xcast[i], n); /* already cast by forward */
        mp_tensor y = mp_tensor_batch(&s->acts[i], n);
        if (s->recompute && l->block) { /* its inner activations, from its input again */
            set_recomputing(l, true);
            double mark = mp_profile_begin("recompute");
            mp_status st = l->cls->forward(l, &xin, &y, true);
            mp_profile_end(mark, "recompute", MP_PROF_BACKWARD);
            set_recomputing(l, false);
            MP_TRY(st);
        }
        mp_tensor *gxp = NULL;
        if (i > 0) {
            const mp_tensor *orig = &s->acts[i - 1];
            const bool over = held >= 0 && l->cls->inplace_backward &&
                              g.dtype == orig->dtype && mp_tensor_row(&g) == mp_tensor_row(orig);
            if (!over)
                held = held == 0 ? 1 : 0;
            gx = mp_tensor_view(scratch[held].data, orig->dtype, orig->ndim, orig->shape);
            gx.shape[0] = n;
            gxp = &gx;
        } else {
            gxp = dx;
        }
        double mark = mp_profile_begin(l->name);
        MP_TRY(l->cls->backward(l, &xin, &y, &g, gxp));
        mp_profile_end_as(mark, l->cls->type, MP_PROF_BACKWARD, l->name);
        if (done) {
            mark = mp_profile_begin("gradient buckets");
            MP_TRY(done->fn(done->arg, i));
            mp_profile_end(mark, "gradient buckets", MP_PROF_BACKWARD);
        }
        if (i > 0)
            g = gx;
    }
    return MP_OK;
}

void mp_seq_buffers(const mp_seq *s, const char *prefix, mp_named_tensor *out, int *n, int max)
{
    for (int i = 0; i < s->n; i++) {
        const mp_layer *l = &s->layers[i];
        for (int j = 0; j < l->nbuffers; j++) {
            if (!l->buffer_persistent[j])
                continue;
            if (*n < max) {
                snprintf(out[*n].name, sizeof out[*n].name, "%s%s.%s", prefix, l->name,
                         l->buffer_suffix[j]);
                out[*n].t = l->buf[j];
            }
            (*n)++;
        }
        if (l->block) {
            char inner[96];
            snprintf(inner, sizeof inner, "%s%s.", prefix, l->name);
            for (int c = 0; c < l->block->nchild; c++) {
                mp_seq child = mp_block_child(l->block, c);
                mp_seq_buffers(&child, inner, out, n, max);
            }
        }
    }
}

/* Activation elements of a block's inner storage, as alloc_block takes it. */
static int64_t block_inner(const mp_layer *l, int64_t max_batch)
{
    int64_t widest = mp_shape_numel(l->in_shape), params = 0, acts = 0;
    for (int c = 0; c < l->block->nchild; c++) {
        mp_seq child = mp_block_child(l->block, c);
        mp_seq_count(&child, max_batch, &params, &acts);
        for (int k = 0; k < child.n; k++)
            if (mp_shape_numel(child.layers[k].out_shape) > widest)
                widest = mp_shape_numel(child.layers[k].out_shape);
    }
    /* as alloc_block: the gradient ping-pong, out_tmp and in_tmp */
    int64_t in_tmp = l->block->in_tmp_used ? mp_shape_numel(l->in_shape) : 0;
    return acts + max_batch * (2 * widest + mp_shape_numel(l->out_shape) + in_tmp);
}

void mp_seq_count(const mp_seq *s, int64_t max_batch, int64_t *params, int64_t *acts)
{
    int64_t shared = 0; /* recompute: the largest block's inner storage, once */
    for (int i = 0; i < s->n; i++) {
        const mp_layer *l = &s->layers[i];
        for (int j = 0; j < l->nparams; j++) {
            int64_t e = 1;
            for (int d = 0; d < l->param_ndim[j]; d++)
                e *= l->param_shape[j][d];
            *params += e;
        }
        *acts += max_batch * (mp_shape_numel(l->out_shape) + mp_shape_numel(l->save_shape));
        if (l->block) {
            int64_t inner = block_inner(l, max_batch);
            for (int c = 0; c < l->block->nchild; c++) { /* the children's parameters */
                mp_seq child = mp_block_child(l->block, c);
                int64_t unused = 0;
                mp_seq_count(&child, max_batch, params, &unused);
            }
            if (!s->recompute)
                *acts += inner;
            else if (inner > shared)
                shared = inner;
        }
    }
    *acts += shared;
}

void mp_seq_free(const mp_seq *s)
{
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        for (int j = 0; j < l->nbuffers; j++) {
            if (!l->buffer_persistent[j]) /* else a view of the model's statistics */
                mp_tensor_delete(l->ops, &l->buf[j]);
            l->buf[j] = (mp_tensor){0};
        }
        if (l->block) {
            for (int c = 0; c < l->block->nchild; c++) {
                mp_seq child = mp_block_child(l->block, c);
                mp_seq_free(&child);
            }
            free(l->block);
            l->block = NULL;
        }
    }
}
