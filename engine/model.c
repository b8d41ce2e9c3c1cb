/* The model builder and its forward/backward passes over a planned set of activations. */
#include "engine/model.h"

#include <math.h>
#include <string.h>

#include "engine/rng.h"

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

static mp_status layer_from_spec(mp_layer *l, const mp_ops *ops, const mp_layer_spec *s,
                                 int index, const int64_t in_shape[3])
{
    char name[48];
    if (s->name[0])
        snprintf(name, sizeof name, "%s", s->name);
    else
        snprintf(name, sizeof name, "layers.%d", index);
    const char *t = s->type;
    int k = (int)s->kernel, stride = (int)s->stride, pad = (int)s->pad;
    if (strcmp(t, "linear") == 0)
        return mp_layer_linear_init(l, ops, name, in_shape, s->out);
    if (strcmp(t, "relu") == 0)
        return mp_layer_relu_init(l, ops, name, in_shape);
    if (strcmp(t, "conv2d") == 0) {
        int dil = s->dilation > 1 ? (int)s->dilation : 1, groups = s->groups > 1 ? (int)s->groups : 1;
        mp_conv_desc d = {{stride ? stride : 1, stride ? stride : 1}, {pad, pad}, {dil, dil}, groups};
        int kernel[2] = {k, k};
        return mp_layer_conv2d_init(l, ops, name, in_shape, s->out, kernel, &d, s->bias);
    }
    if (strcmp(t, "batchnorm") == 0)
        return mp_layer_batchnorm_init(l, ops, name, in_shape, s->eps > 0 ? s->eps : 1e-5,
                                       s->momentum);
    if (strcmp(t, "maxpool") == 0 || strcmp(t, "avgpool") == 0) {
        mp_pool_desc d = {{k, k}, {stride ? stride : k, stride ? stride : k}, {pad, pad},
                          strcmp(t, "maxpool") == 0};
        return mp_layer_pool_init(l, ops, name, in_shape, &d);
    }
    if (strcmp(t, "gavgpool") == 0)
        return mp_layer_global_avgpool_init(l, ops, name, in_shape);
    if (strcmp(t, "dropout") == 0)
        return mp_layer_dropout_init(l, ops, name, in_shape, s->p);
    if (strcmp(t, "flatten") == 0)
        return mp_layer_flatten_init(l, ops, name, in_shape);
    return mp_fail(MP_EUSAGE, "model layer %d: unknown type '%s'", index, t);
}

mp_status mp_model_plan(const mp_layer_spec *specs, int nspecs, const int64_t in_shape[3],
                        int64_t max_batch, int64_t *param_elems, int64_t *act_elems)
{
    *param_elems = *act_elems = 0;
    if (nspecs < 1 || nspecs > MP_MAX_LAYERS)
        return mp_fail(MP_EUSAGE, "model: needs 1 to %d layers (got %d)", MP_MAX_LAYERS, nspecs);
    const int64_t *shape = in_shape;
    int64_t widest = mp_shape_numel(in_shape);
    static _Thread_local mp_layer l[MP_MAX_LAYERS];
    for (int i = 0; i < nspecs; i++) {
        MP_TRY(layer_from_spec(&l[i], NULL, &specs[i], i, shape));
        for (int j = 0; j < l[i].nparams; j++) {
            int64_t e = 1;
            for (int d = 0; d < l[i].param_ndim[j]; d++)
                e *= l[i].param_shape[j][d];
            *param_elems += e;
        }
        shape = l[i].out_shape;
        *act_elems += max_batch * mp_shape_numel(shape);
        if (mp_shape_numel(shape) > widest)
            widest = mp_shape_numel(shape);
    }
    *act_elems += 2 * max_batch * widest;
    return MP_OK;
}

static mp_group_spec group_spec(const mp_amp_policy *a, mp_group_id g)
{
    mp_group_spec s;
    if (g == MP_GROUP_NORM) {
        s.model = s.grad = a->norm;
        s.master = a->master_weights;
    } else {
        s.model = a->cast_weights ? a->compute : a->weights;
        s.grad = a->weights;
        s.master = a->master_weights || a->cast_weights;
    }
    return s;
}

static mp_status declare_params(mp_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mp_layer *l = &m->layers[i];
        for (int j = 0; j < l->nparams; j++) {
            char name[96];
            snprintf(name, sizeof name, "%s.%s", l->name, l->param_suffix[j]);
            int group = l->param_norm[j] ? MP_GROUP_NORM : MP_GROUP_WEIGHTS;
            if (mp_params_add(&m->params, name, group, l->param_ndim[j], l->param_shape[j]) < 0)
                return mp_fail(MP_EUSAGE, "model: parameter name '%s' is used twice", name);
        }
    }
    mp_group_spec specs[MP_NGROUPS] = {group_spec(&m->amp, MP_GROUP_WEIGHTS),
                                       group_spec(&m->amp, MP_GROUP_NORM)};
    mp_params_alloc(&m->params, specs);
    int k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        mp_layer *l = &m->layers[i];
        for (int j = 0; j < l->nparams; j++, k++) {
            l->w[j] = mp_params_value(&m->params, k);
            l->dw[j] = mp_params_grad(&m->params, k);
        }
        for (int j = 0; j < l->nbuffers; j++) {
            int64_t shape[1] = {l->buffer_numel[j]};
            l->buf[j] = mp_tensor_alloc(MP_F32, 1, shape, MP_MEM_WEIGHTS);
        }
    }
    return MP_OK;
}

/* The dtype a layer produces from an input of dtype `in` under the model's policy: GEMM/conv
 * layers the compute dtype, every other layer its input's (BatchNorm always computes in FP32
 * with FP32 statistics and rounds its output once). */
static mp_dtype output_dtype(const mp_model *m, const mp_layer *l, mp_dtype in)
{
    const char *type = l->cls->type;
    if (strcmp(type, "linear") == 0 || strcmp(type, "conv2d") == 0)
        return m->amp.compute;
    return in;
}

static bool is_gemm(const mp_layer *l)
{
    return strcmp(l->cls->type, "linear") == 0 || strcmp(l->cls->type, "conv2d") == 0;
}

static void alloc_activations(mp_model *m, int64_t widest)
{
    mp_dtype dt = m->amp.input;
    size_t widest_elem = mp_dtype_size(dt);
    for (int i = 0; i < m->nlayers; i++) {
        mp_layer *l = &m->layers[i];
        int64_t in[4] = {m->max_batch, l->in_shape[0], l->in_shape[1], l->in_shape[2]};
        if (is_gemm(l) && dt != m->amp.compute)
            m->xcast[i] = mp_tensor_alloc(m->amp.compute, 4, in, MP_MEM_ACTIVATIONS);
        dt = output_dtype(m, l, dt);
        if (mp_dtype_size(dt) > widest_elem)
            widest_elem = mp_dtype_size(dt);
        int64_t s[4] = {m->max_batch, l->out_shape[0], l->out_shape[1], l->out_shape[2]};
        m->acts[i] = mp_tensor_alloc(dt, 4, s, MP_MEM_ACTIVATIONS);
    }
    /* Activation gradients take their activation's dtype: sized for the widest element. */
    int64_t ds[2] = {m->max_batch, widest};
    for (int i = 0; i < 2; i++)
        m->dbuf[i] = mp_tensor_alloc(widest_elem == 4 ? MP_F32 : MP_F16, 2, ds,
                                     MP_MEM_ACTIVATIONS);
}

mp_status mp_model_build(mp_model *m, const mp_ops *ops, const mp_layer_spec *specs, int nspecs,
                         const int64_t in_shape[3], int64_t num_classes, int64_t max_batch,
                         const mp_amp_policy *amp)
{
    memset(m, 0, sizeof *m);
    if (nspecs < 1 || nspecs > MP_MAX_LAYERS)
        return mp_fail(MP_EUSAGE, "model: needs 1 to %d layers (got %d)", MP_MAX_LAYERS, nspecs);
    m->ops = ops;
    m->amp = amp ? *amp : mp_amp_resolve(MP_O0, MP_F16, true, false, 1.0, false);
    m->max_batch = max_batch;
    m->num_classes = num_classes;
    memcpy(m->in_shape, in_shape, sizeof m->in_shape);
    const int64_t *shape = in_shape;
    int64_t widest = mp_shape_numel(in_shape);
    for (int i = 0; i < nspecs; i++) {
        MP_TRY(layer_from_spec(&m->layers[i], ops, &specs[i], i, shape));
        m->nlayers = i + 1;
        shape = m->layers[i].out_shape;
        if (mp_shape_numel(shape) > widest)
            widest = mp_shape_numel(shape);
    }
    if (mp_shape_numel(shape) != num_classes)
        return mp_fail(MP_EUSAGE,
                       "model: the last layer (%s) produces %lld features but the data has %lld "
                       "classes",
                       m->layers[nspecs - 1].name, (long long)mp_shape_numel(shape),
                       (long long)num_classes);
    mp_status st = declare_params(m);
    if (st != MP_OK) {
        mp_model_free(m);
        return st;
    }
    alloc_activations(m, widest);
    return MP_OK;
}

mp_dtype mp_model_input_dtype(const mp_model *m) { return m->amp.input; }

void mp_model_init(mp_model *m, uint64_t seed)
{
    m->seed = seed;
    int k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        mp_layer *l = &m->layers[i];
        l->seed = seed;
        double bound = 1.0 / sqrt(l->fan_in > 0 ? l->fan_in : 1.0);
        for (int j = 0; j < l->nparams; j++, k++) {
            mp_rng r;
            mp_rng_seed(&r, seed, 0x1000u + (uint64_t)k);
            mp_tensor master = mp_params_master(&m->params, k);
            mp_tensor *dst = master.data ? &master : &l->w[j];
            int64_t n = mp_tensor_numel(&l->w[j]);
            for (int64_t e = 0; e < n; e++) {
                double v = l->param_init[j] == MP_INIT_ONES    ? 1.0
                           : l->param_init[j] == MP_INIT_ZEROS ? 0.0
                                                               : (2.0 * mp_rng_uniform(&r) - 1.0) * bound;
                mp_store(dst->data, dst->dtype, (size_t)e, v);
            }
            if (dst->data != l->w[j].data)
                mp_convert(l->w[j].data, l->w[j].dtype, dst->data, dst->dtype, (size_t)n);
        }
        for (int j = 0; j < l->nbuffers; j++) {
            float *b = l->buf[j].data;
            for (int64_t e = 0; e < l->buffer_numel[j]; e++)
                b[e] = (float)l->buffer_init[j];
        }
    }
}

/* The input layer i reads: x cast into the compute dtype for a GEMM/conv layer at O1. */
static mp_status layer_input(mp_model *m, int i, const mp_tensor *x, mp_tensor *out)
{
    *out = *x;
    if (!m->xcast[i].data)
        return MP_OK;
    *out = mp_tensor_batch(&m->xcast[i], x->shape[0]);
    return m->ops->convert(x, out);
}

mp_status mp_model_forward(mp_model *m, const mp_tensor *x, bool train, const mp_tensor **logits)
{
    int64_t n = x->shape[0];
    if (n < 1 || n > m->max_batch)
        return mp_fail(MP_EINTERNAL, "model: batch of %lld outside 1..%lld", (long long)n,
                       (long long)m->max_batch);
    mp_tensor cur = *x, in, y;
    for (int i = 0; i < m->nlayers; i++) {
        m->layers[i].step = m->step;
        MP_TRY(layer_input(m, i, &cur, &in));
        y = mp_tensor_batch(&m->acts[i], n);
        MP_TRY(m->layers[i].cls->forward(&m->layers[i], &in, &y, train));
        cur = y;
    }
    m->logits = cur;
    *logits = &m->logits;
    return MP_OK;
}

mp_status mp_model_backward(mp_model *m, const mp_tensor *x, const mp_tensor *dlogits)
{
    int64_t n = x->shape[0];
    mp_tensor dy = *dlogits, dx;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        mp_layer *l = &m->layers[i];
        mp_tensor xin = i == 0 ? *x : mp_tensor_batch(&m->acts[i - 1], n);
        if (m->xcast[i].data)
            xin = mp_tensor_batch(&m->xcast[i], n); /* already cast by forward */
        mp_tensor y = mp_tensor_batch(&m->acts[i], n);
        mp_tensor *dxp = NULL;
        if (i > 0) {
            const mp_tensor *orig = &m->acts[i - 1];
            dx = mp_tensor_view(m->dbuf[i & 1].data, orig->dtype, orig->ndim, orig->shape);
            dx.shape[0] = n;
            dxp = &dx;
        }
        MP_TRY(l->cls->backward(l, &xin, &y, &dy, dxp));
        if (dxp)
            dy = dx;
    }
    return MP_OK;
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
    fprintf(out, "%-16s %-9s %-22s %12s\n", "layer", "type", "output", "params");
    shape_str(m->in_shape, sh, sizeof sh);
    fprintf(out, "%-16s %-9s %-22s %12s\n", "input", "", sh, "");
    for (int i = 0; i < m->nlayers; i++) {
        const mp_layer *l = &m->layers[i];
        int64_t np = 0;
        for (int j = 0; j < l->nparams; j++)
            np += mp_tensor_numel(&l->w[j]);
        shape_str(l->out_shape, sh, sizeof sh);
        fprintf(out, "%-16s %-9s %-22s %12lld\n", l->name, l->cls->type, sh, (long long)np);
    }
    int64_t total = mp_params_numel(&m->params);
    fprintf(out, "total parameters: %lld\n", (long long)total);
}

void mp_model_free(mp_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mp_tensor_free(&m->acts[i]);
        mp_tensor_free(&m->xcast[i]);
        for (int j = 0; j < m->layers[i].nbuffers; j++)
            mp_tensor_free(&m->layers[i].buf[j]);
    }
    for (int i = 0; i < 2; i++)
        mp_tensor_free(&m->dbuf[i]);
    mp_params_free(&m->params);
    memset(m, 0, sizeof *m);
}
