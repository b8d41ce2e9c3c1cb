/* The model builder and its forward/backward passes over a planned set of activations. */
#include "engine/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"
#include "engine/seq.h"

int mp_model_mlp_specs(mp_layer_spec *specs, const int64_t *hidden, int nhidden,
                       int64_t num_classes)
{
    int n = 0;
    for (int i = 0; i <= nhidden; i++) {
        mp_layer_spec *fc = &specs[n++];
        memset(fc, 0, sizeof *fc);
        snprintf(fc->type, sizeof fc->type, "linear");
        snprintf(fc->name, sizeof fc->name, "fc%d", i + 1);
        fc->out = i < nhidden ? hidden[i] : num_classes;
        if (i == nhidden)
            break;
        mp_layer_spec *act = &specs[n++];
        memset(act, 0, sizeof *act);
        snprintf(act->type, sizeof act->type, "relu");
        snprintf(act->name, sizeof act->name, "relu%d", i + 1);
    }
    return n;
}

/* The registry's types and their make functions (engine/layer_list.h). */
static const struct {
    const char *type;
    mp_layer_make *make;
} LAYER_TYPES[] = {
#define MP_LAYER(type, make, nrequired, keys) {#type, make},
#include "engine/layer_list.h"
};

static mp_status layer_from_spec(mp_layer *l, const mp_ops *ops, const mp_layer_spec *s,
                                 int index, const int64_t in_shape[3])
{
    char name[48];
    if (s->name[0])
        snprintf(name, sizeof name, "%s", s->name);
    else
        snprintf(name, sizeof name, "layers.%d", index);
    for (size_t i = 0; i < sizeof LAYER_TYPES / sizeof LAYER_TYPES[0]; i++)
        if (strcmp(s->type, LAYER_TYPES[i].type) == 0)
            return LAYER_TYPES[i].make(l, ops, name, s, in_shape);
    return mp_fail(MP_EUSAGE, "model layer %d: unknown type '%s'", index, s->type);
}

/* Ties each linear layer whose spec asks for it to the first embedding layer. */
static mp_status tie_heads(mp_layer *layers, const mp_layer_spec *specs, int n)
{
    mp_layer *embedding = NULL;
    for (int i = 0; i < n; i++) {
        if (!embedding && strcmp(layers[i].cls->type, "embedding") == 0)
            embedding = &layers[i];
        if (!specs[i].tie)
            continue;
        if (!embedding)
            return mp_fail(MP_EUSAGE, "layer %s: tie needs an embedding layer before it",
                           layers[i].name);
        MP_TRY(mp_layer_linear_tie(&layers[i], embedding));
    }
    return MP_OK;
}

/* The layers of specs over in_shape into layers[0..*n); an embedding's vocabulary defaults to
 * num_classes (the data's ids are below it) and may not be smaller, and it may only be the
 * first layer. */
static mp_status build_layers(mp_layer *layers, int *n, const mp_ops *ops,
                              const mp_layer_spec *specs, int nspecs, const int64_t in_shape[3],
                              int64_t num_classes, bool fuse)
{
    const int64_t *shape = in_shape;
    *n = 0;
    for (int i = 0; i < nspecs; i++) {
        mp_layer_spec s = specs[i];
        if (s.vocab == 0)
            s.vocab = num_classes;
        if (s.heads == 0)
            s.heads = 1;
        if (s.heads > 1024)
            return mp_fail(MP_EUSAGE, "model layer %d: heads must be 1 to 1024 (got %lld)", i,
                           (long long)s.heads);
        MP_TRY(layer_from_spec(&layers[i], ops, &s, i, shape));
        *n = i + 1;
        bool embedding = strcmp(layers[i].cls->type, "embedding") == 0;
        if (i > 0 && embedding)
            return mp_fail(MP_EUSAGE, "layer %s: an embedding must be the first layer (its "
                           "input is token ids, which have no gradient)", layers[i].name);
        if (embedding && s.vocab < num_classes) /* else an id past it fails the first step */
            return mp_fail(MP_EUSAGE, "layer %s: vocab %lld is less than data.num_classes "
                           "(%lld), the range of the data's token ids: give at least %lld, or 0 "
                           "for data.num_classes", layers[i].name, (long long)s.vocab,
                           (long long)num_classes, (long long)num_classes);
        shape = layers[i].out_shape;
    }
    MP_TRY(tie_heads(layers, specs, nspecs));
    if (fuse)
        mp_layers_fuse(layers, n);
    return MP_OK;
}

static mp_seq top(mp_model *m)
{
    mp_seq s = {m->layers, m->nlayers, m->acts, m->xcast, m->recompute};
    return s;
}

mp_status mp_model_plan(const mp_layer_spec *specs, int nspecs, const int64_t in_shape[3],
                        int64_t num_classes, int64_t max_batch, int64_t *param_elems,
                        int64_t *act_elems)
{
    return mp_model_plan_recompute(specs, nspecs, in_shape, num_classes, max_batch, false,
                                   param_elems, act_elems);
}

mp_status mp_model_plan_recompute(const mp_layer_spec *specs, int nspecs,
                                  const int64_t in_shape[3], int64_t num_classes,
                                  int64_t max_batch, bool recompute, int64_t *param_elems,
                                  int64_t *act_elems)
{
    *param_elems = *act_elems = 0;
    if (nspecs < 1 || nspecs > MP_MAX_LAYERS)
        return mp_fail(MP_EUSAGE, "model: needs 1 to %d layers (got %d)", MP_MAX_LAYERS, nspecs);
    static _Thread_local mp_layer l[MP_MAX_LAYERS];
    int64_t widest = mp_shape_numel(in_shape);
    mp_seq s = {l, 0, NULL, NULL, recompute};
    mp_status st = build_layers(l, &s.n, NULL, specs, nspecs, in_shape, num_classes, true);
    for (int i = 0; i < s.n; i++)
        if (mp_shape_numel(l[i].out_shape) > widest)
            widest = mp_shape_numel(l[i].out_shape);
    if (st == MP_OK) {
        mp_seq_count(&s, max_batch, param_elems, act_elems);
        *act_elems += 2 * max_batch * widest;
    }
    mp_seq_free(&s);
    return st;
}

/* Group g's dtypes under policy a; a forward-only model has no gradient buffer and no separate
 * FP32 master (a checkpoint's FP32 values load straight into its half copy, rounded as the
 * masters' copy is: mp_convert). */
static mp_group_spec group_spec(const mp_amp_policy *a, mp_group_id g, bool forward_only)
{
    mp_group_spec s = {.no_grad = forward_only};
    if (g == MP_GROUP_NORM) {
        s.model = s.grad = a->norm;
        s.master = a->master_weights;
    } else {
        s.model = a->cast_weights ? a->compute : a->weights;
        s.grad = a->weights;
        s.master = a->master_weights || a->cast_weights;
    }
    s.master = s.master && !forward_only;
    return s;
}

/* The dtype of m's batches: FP32 token ids for an embedding, else the policy's input dtype. */
static mp_dtype input_dtype(const mp_model *m)
{
    return m->nlayers && strcmp(m->layers[0].cls->type, "embedding") == 0 ? MP_F32
                                                                          : m->amp.input;
}

mp_status mp_model_build(mp_model *m, const mp_ops *ops, const mp_layer_spec *specs, int nspecs,
                         const int64_t in_shape[3], int64_t num_classes, int64_t max_batch,
                         const mp_amp_policy *amp)
{
    return mp_model_build_opts(m, ops, specs, nspecs, in_shape, num_classes, max_batch, amp,
                               NULL);
}

/* The plan of m's activations and activation-gradient ping-pong over a training step
 * (engine/plan.h): forward, the loss reading the logits, backward (with recomputation, each
 * block's forward again inside it); placed, not yet bound to memory. A forward_only model's plan
 * ends at the loss: what only backward uses gets no storage. */
static void plan_activations(mp_model *m)
{
    mp_seq s = top(m);
    mp_plan *p = &m->plan;
    int64_t widest = 0;
    size_t elem = 0;
    mp_seq_alloc(&s, &m->amp, m->input, m->max_batch, &widest, &elem, p);
    int64_t ds[2] = {m->max_batch, widest};
    for (int i = 0; i < 2; i++) { /* activation gradients: sized for the widest element */
        m->dbuf[i] = mp_tensor_view(NULL, mp_seq_scratch_dtype(elem), 2, ds);
        if (!m->forward_only)
            mp_plan_add(p, &m->dbuf[i]);
    }
    p->drop_unwalked = m->forward_only;
    const mp_tensor *logits = mp_seq_plan_forward(&s, NULL, p);
    m->forward_end = p->tick;
    mp_plan_read(p, logits, ++p->tick); /* the loss */
    if (m->forward_only) {
        mp_plan_place(p);
        return;
    }
    for (int i = 0; i < 2; i++)
        mp_plan_write(p, &m->dbuf[i], p->tick + 1);
    mp_seq_plan_backward(&s, NULL, p, m->backward_end);
    for (int i = 0; i < 2; i++)
        mp_plan_read(p, &m->dbuf[i], p->tick);
    mp_plan_place(p);
}

/* The planned activations in one arena of backend memory. */
static void alloc_activations(mp_model *m)
{
    mp_plan *p = &m->plan;
    plan_activations(m);
    if (p->size > 0) {
        m->arena = m->ops->mem_alloc(p->size, MP_MEM_ACTIVATIONS);
        if (!m->arena) {
            fprintf(stderr, "mpdist: %s\n", mp_error_message());
            abort();
        }
    }
    mp_plan_bind(p, m->arena);
}

mp_status mp_model_plan_bytes(const mp_layer_spec *specs, int nspecs, const int64_t in_shape[3],
                              int64_t num_classes, int64_t max_batch, const mp_amp_policy *amp,
                              const mp_model_opts *o, int64_t *act_bytes)
{
    *act_bytes = 0;
    if (nspecs < 1 || nspecs > MP_MAX_LAYERS)
        return mp_fail(MP_EUSAGE, "model: needs 1 to %d layers (got %d)", MP_MAX_LAYERS, nspecs);
    mp_model *m = calloc(1, sizeof *m);
    if (!m)
        return mp_fail(MP_EINTERNAL, "model: out of host memory planning the activations");
    m->amp = *amp;
    m->max_batch = max_batch;
    m->forward_only = o && o->forward_only;
    m->recompute = o && o->recompute && !m->forward_only;
    m->plan.apart = o && o->unplanned;
    mp_status st = build_layers(m->layers, &m->nlayers, NULL, specs, nspecs, in_shape,
                                num_classes, !(o && o->unfused));
    if (st == MP_OK) {
        m->input = input_dtype(m);
        plan_activations(m);
        *act_bytes = (int64_t)m->plan.size;
    }
    mp_seq s = top(m);
    mp_seq_free(&s);
    mp_plan_free(&m->plan);
    free(m);
    return st;
}

mp_status mp_model_build_opts(mp_model *m, const mp_ops *ops, const mp_layer_spec *specs,
                              int nspecs, const int64_t in_shape[3], int64_t num_classes,
                              int64_t max_batch, const mp_amp_policy *amp,
                              const mp_model_opts *o)
{
    memset(m, 0, sizeof *m);
    m->forward_only = o && o->forward_only;
    m->recompute = o && o->recompute && !m->forward_only;
    if (nspecs < 1 || nspecs > MP_MAX_LAYERS)
        return mp_fail(MP_EUSAGE, "model: needs 1 to %d layers (got %d)", MP_MAX_LAYERS, nspecs);
    m->ops = ops;
    m->amp = amp ? *amp : mp_amp_resolve(MP_O0, MP_F16, true, false, 1.0, false);
    m->max_batch = max_batch;
    m->num_classes = num_classes;
    memcpy(m->in_shape, in_shape, sizeof m->in_shape);
    mp_status st = build_layers(m->layers, &m->nlayers, ops, specs, nspecs, in_shape,
                                num_classes, !(o && o->unfused));
    const int64_t *shape = m->nlayers ? m->layers[m->nlayers - 1].out_shape : in_shape;
    if (st == MP_OK && shape[2] != num_classes)
        st = mp_fail(MP_EUSAGE,
                     "model: the last layer (%s) produces %lld features but the data has %lld "
                     "classes",
                     m->layers[m->nlayers - 1].name, (long long)shape[2],
                     (long long)num_classes);
    m->positions = shape[0] * shape[1];
    m->input = input_dtype(m);
    mp_seq s = top(m);
    if (st == MP_OK)
        st = mp_seq_declare(&s, &m->params, "");
    if (st != MP_OK) {
        mp_model_free(m);
        return st;
    }
    bool fwd = m->forward_only;
    mp_group_spec groups[MP_NGROUPS] = {group_spec(&m->amp, MP_GROUP_WEIGHTS, fwd),
                                        group_spec(&m->amp, MP_GROUP_NORM, fwd)};
    if (o && o->shard_size > 1)
        mp_params_shard(&m->params, o->shard_rank, o->shard_size);
    mp_params_alloc(&m->params, m->ops, groups);
    /* FP32 statistics, FP64 for an FP64 model (gradient checks). */
    mp_dtype sdt = m->params.groups[MP_GROUP_NORM].spec.model == MP_F64 ? MP_F64 : MP_F32;
    int64_t ns[1] = {mp_seq_stats_numel(&s)};
    if (ns[0] > 0) {
        m->stats = mp_tensor_new(m->ops, sdt, 1, ns, MP_MEM_WEIGHTS);
        m->stats_saved = mp_tensor_new(m->ops, sdt, 1, ns, MP_MEM_WORKSPACE);
    } else {
        m->stats = mp_tensor_view(NULL, sdt, 1, ns);
    }
    int k = 0;
    int64_t off = 0;
    for (int i = 0; i < m->nlayers; i++) { /* layer by layer, to note where each one starts */
        mp_seq one = {&m->layers[i], 1, NULL, NULL, false};
        m->first_param[i] = k;
        mp_seq_bind(&one, &m->params, &k, &m->stats, &off);
    }
    m->plan.apart = o && o->unplanned;
    alloc_activations(m);
    return MP_OK;
}

int mp_model_buffers(mp_model *m, mp_named_tensor *out, int max)
{
    mp_seq s = top(m);
    int n = 0;
    mp_seq_buffers(&s, "", out, &n, max);
    return n;
}

mp_dtype mp_model_input_dtype(const mp_model *m) { return m->input; }

mp_status mp_model_stats_save(mp_model *m)
{
    if (!m->stats_saved.data)
        return MP_OK;
    return m->ops->copy(m->stats_saved.data, m->stats.data, (size_t)mp_tensor_bytes(&m->stats));
}

mp_status mp_model_stats_revert(mp_model *m, const mp_amp_state *st)
{
    if (!m->stats_saved.data)
        return MP_OK;
    return m->ops->amp_revert(st, &m->stats_saved, &m->stats);
}

void mp_model_seed(mp_model *m, uint64_t seed)
{
    m->seed = seed;
    mp_seq s = top(m);
    int k = 0;
    mp_seq_seed(&s, seed, &k);
}

void mp_model_mask_step(mp_model *m, const int64_t *step)
{
    mp_seq s = top(m);
    mp_seq_mask_step(&s, step);
}

mp_status mp_model_init(mp_model *m, uint64_t seed)
{
    mp_model_seed(m, seed);
    mp_seq s = top(m);
    int k = 0;
    return mp_seq_init(&s, &m->params, seed, &k);
}

mp_status mp_model_forward(mp_model *m, const mp_tensor *x, bool train, const mp_tensor **logits)
{
    int64_t n = x->shape[0];
    if (n < 1 || n > m->max_batch)
        return mp_fail(MP_EINTERNAL, "model: batch of %lld outside 1..%lld", (long long)n,
                       (long long)m->max_batch);
    mp_seq s = top(m);
    mp_tensor out;
    MP_TRY(mp_seq_forward(&s, x, train, m->step, &out));
    int64_t shape[2] = {n * m->positions, m->num_classes};
    m->logits = mp_tensor_view(out.data, out.dtype, 2, shape);
    *logits = &m->logits;
    return MP_OK;
}

/* After top-level layer i's backward every parameter from its first on has its gradient. */
static mp_status layer_done(void *arg, int i)
{
    mp_model *m = arg;
    return m->grads_ready(m->grads_ready_arg, m->first_param[i]);
}

mp_status mp_model_backward(mp_model *m, const mp_tensor *x, const mp_tensor *dlogits)
{
    if (m->forward_only)
        return mp_fail(MP_EINTERNAL, "model: built for the forward pass alone (evaluation), "
                       "it has no storage for a backward pass");
    mp_seq s = top(m);
    mp_layer_hook hook = {layer_done, m};
    return mp_seq_backward(&s, x, dlogits, NULL, m->dbuf, m->grads_ready ? &hook : NULL);
}

/* check_batch of l, then of its blocks' children, depth first. */
static mp_status check_layer(const mp_layer *l, int64_t n, bool train)
{
    if (l->cls->check_batch)
        MP_TRY(l->cls->check_batch(l, n, train));
    for (int c = 0; l->block && c < l->block->nchild; c++)
        for (int i = 0; i < l->block->n[c]; i++)
            MP_TRY(check_layer(&l->block->layers[c][i], n, train));
    return MP_OK;
}

mp_status mp_model_check_batch(const mp_model *m, int64_t n, bool train)
{
    for (int i = 0; i < m->nlayers; i++)
        MP_TRY(check_layer(&m->layers[i], n, train));
    return MP_OK;
}

static int64_t layer_params(mp_layer *l)
{
    int64_t np = 0;
    for (int j = 0; j < l->nparams; j++) {
        int64_t e = 1;
        for (int d = 0; d < l->param_ndim[j]; d++)
            e *= l->param_shape[j][d];
        np += e;
    }
    for (int c = 0; l->block && c < l->block->nchild; c++)
        for (int i = 0; i < l->block->n[c]; i++)
            np += layer_params(&l->block->layers[c][i]);
    return np;
}

static void shape_str(const int64_t s[3], char *buf, size_t cap)
{
    if (s[0] == 1 && s[1] == 1)
        snprintf(buf, cap, "(N, %lld)", (long long)s[2]);
    else
        snprintf(buf, cap, "(N, %lld, %lld, %lld)", (long long)s[0], (long long)s[1],
                 (long long)s[2]);
}

void mp_model_summary(const mp_model *m, FILE *out)
{
    char sh[64];
    fprintf(out, "%-16s %-11s %-22s %12s\n", "layer", "type", "output", "params");
    shape_str(m->in_shape, sh, sizeof sh);
    fprintf(out, "%-16s %-11s %-22s %12s\n", "input", "", sh, "");
    for (int i = 0; i < m->nlayers; i++) {
        const mp_layer *l = &m->layers[i];
        int64_t np = layer_params((mp_layer *)l);
        shape_str(l->out_shape, sh, sizeof sh);
        fprintf(out, "%-16s %-11s %-22s %12lld\n", l->name, l->cls->type, sh, (long long)np);
    }
    int64_t total = mp_params_numel(&m->params);
    fprintf(out, "total parameters: %lld\n", (long long)total);
}

void mp_model_free(mp_model *m)
{
    mp_seq s = top(m);
    mp_seq_free(&s);
    if (m->ops && m->stats_saved.data) {
        mp_tensor_delete(m->ops, &m->stats);
        mp_tensor_delete(m->ops, &m->stats_saved);
    }
    mp_params_free(&m->params);
    if (m->arena)
        m->ops->mem_free(m->arena);
    mp_plan_free(&m->plan);
    memset(m, 0, sizeof *m);
}
