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
    if (strcmp(s->type, "linear") == 0)
        return mp_layer_linear_init(l, ops, name, in_shape, s->out);
    if (strcmp(s->type, "relu") == 0)
        return mp_layer_relu_init(l, ops, name, in_shape);
    return mp_fail(MP_EUSAGE, "model layer %d: unknown type '%s'", index, s->type);
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

static mp_status declare_params(mp_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        mp_layer *l = &m->layers[i];
        for (int j = 0; j < l->nparams; j++) {
            char name[96];
            snprintf(name, sizeof name, "%s.%s", l->name, l->param_suffix[j]);
            if (mp_params_add(&m->params, name, l->param_ndim[j], l->param_shape[j]) < 0)
                return mp_fail(MP_EUSAGE, "model: parameter name '%s' is used twice", name);
        }
    }
    mp_params_alloc(&m->params);
    int k = 0;
    for (int i = 0; i < m->nlayers; i++)
        for (int j = 0; j < m->layers[i].nparams; j++, k++) {
            m->layers[i].w[j] = mp_params_value(&m->params, k);
            m->layers[i].dw[j] = mp_params_grad(&m->params, k);
        }
    return MP_OK;
}

mp_status mp_model_build(mp_model *m, const mp_ops *ops, const mp_layer_spec *specs, int nspecs,
                         const int64_t in_shape[3], int64_t num_classes, int64_t max_batch)
{
    memset(m, 0, sizeof *m);
    if (nspecs < 1 || nspecs > MP_MAX_LAYERS)
        return mp_fail(MP_EUSAGE, "model: needs 1 to %d layers (got %d)", MP_MAX_LAYERS, nspecs);
    m->ops = ops;
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
    for (int i = 0; i < m->nlayers; i++) {
        int64_t s[4] = {max_batch, m->layers[i].out_shape[0], m->layers[i].out_shape[1],
                        m->layers[i].out_shape[2]};
        m->acts[i] = mp_tensor_alloc(MP_F32, 4, s, MP_MEM_ACTIVATIONS);
    }
    int64_t ds[2] = {max_batch, widest};
    for (int i = 0; i < 2; i++)
        m->dbuf[i] = mp_tensor_alloc(MP_F32, 2, ds, MP_MEM_ACTIVATIONS);
    return MP_OK;
}

void mp_model_init(mp_model *m, uint64_t seed)
{
    int k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        mp_layer *l = &m->layers[i];
        double bound = 1.0 / sqrt(l->fan_in > 0 ? l->fan_in : 1.0);
        for (int j = 0; j < l->nparams; j++, k++) {
            mp_rng r;
            mp_rng_seed(&r, seed, 0x1000u + (uint64_t)k);
            int64_t n = mp_tensor_numel(&l->w[j]);
            for (int64_t e = 0; e < n; e++)
                mp_store(l->w[j].data, l->w[j].dtype, (size_t)e,
                         (2.0 * mp_rng_uniform(&r) - 1.0) * bound);
        }
    }
}

mp_status mp_model_forward(mp_model *m, const mp_tensor *x, bool train, const mp_tensor **logits)
{
    int64_t n = x->shape[0];
    if (n < 1 || n > m->max_batch)
        return mp_fail(MP_EINTERNAL, "model: batch of %lld outside 1..%lld", (long long)n,
                       (long long)m->max_batch);
    const mp_tensor *cur = x;
    mp_tensor ys[MP_MAX_LAYERS];
    for (int i = 0; i < m->nlayers; i++) {
        ys[i] = mp_tensor_batch(&m->acts[i], n);
        MP_TRY(m->layers[i].cls->forward(&m->layers[i], cur, &ys[i], train));
        cur = &ys[i];
    }
    m->logits = ys[m->nlayers - 1];
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
        mp_tensor y = mp_tensor_batch(&m->acts[i], n);
        mp_tensor *dxp = NULL;
        if (i > 0) {
            dx = m->dbuf[i & 1];
            dx.ndim = xin.ndim;
            memcpy(dx.shape, xin.shape, sizeof dx.shape);
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
    fprintf(out, "%-16s %-8s %-22s %12s\n", "layer", "type", "output", "params");
    shape_str(m->in_shape, sh, sizeof sh);
    fprintf(out, "%-16s %-8s %-22s %12s\n", "input", "", sh, "");
    for (int i = 0; i < m->nlayers; i++) {
        const mp_layer *l = &m->layers[i];
        int64_t np = 0;
        for (int j = 0; j < l->nparams; j++)
            np += mp_tensor_numel(&l->w[j]);
        shape_str(l->out_shape, sh, sizeof sh);
        fprintf(out, "%-16s %-8s %-22s %12lld\n", l->name, l->cls->type, sh, (long long)np);
    }
    int64_t total = mp_params_numel(&m->params);
    fprintf(out, "total parameters: %lld (%.2f MiB FP32 weights, %.2f MiB gradients)\n",
            (long long)total, (double)total * 4 / 1048576.0, (double)total * 4 / 1048576.0);
}

void mp_model_free(mp_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        mp_tensor_free(&m->acts[i]);
    for (int i = 0; i < 2; i++)
        mp_tensor_free(&m->dbuf[i]);
    mp_params_free(&m->params);
    memset(m, 0, sizeof *m);
}
