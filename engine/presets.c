/* The built-in model presets. */
#include "engine/presets.h"

#include <stdio.h>
#include <string.h>

static mp_layer_spec *add(mp_layer_spec *specs, int *n, const char *type, const char *name)
{
    mp_layer_spec *s = &specs[(*n)++];
    memset(s, 0, sizeof *s);
    snprintf(s->type, sizeof s->type, "%s", type);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->bias = true;
    s->eps = 1e-5;
    s->momentum = 0.1;
    return s;
}

static int cnn_specs(bool bn, int64_t num_classes, mp_layer_spec *specs)
{
    int n = 0;
    const int64_t channels[2] = {32, 64};
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "conv%d", i + 1);
        mp_layer_spec *c = add(specs, &n, "conv2d", name);
        c->out = channels[i];
        c->kernel = 3;
        c->pad = 1;
        c->bias = !bn;
        if (bn) {
            snprintf(name, sizeof name, "bn%d", i + 1);
            add(specs, &n, "batchnorm", name);
        }
        snprintf(name, sizeof name, "relu%d", i + 1);
        add(specs, &n, "relu", name);
        snprintf(name, sizeof name, "pool%d", i + 1);
        add(specs, &n, "maxpool", name)->kernel = 2;
    }
    add(specs, &n, "flatten", "flatten");
    add(specs, &n, "linear", "fc1")->out = 128;
    add(specs, &n, "relu", "relu3");
    add(specs, &n, "dropout", "drop")->p = 0.25;
    add(specs, &n, "linear", "fc2")->out = num_classes;
    return n;
}

static void stem(mp_layer_spec *specs, int *n, int64_t channels, bool bn)
{
    mp_layer_spec *c = add(specs, n, "conv2d", "conv1");
    c->out = channels;
    c->kernel = 3;
    c->pad = 1;
    c->bias = false;
    if (bn) {
        add(specs, n, "batchnorm", "bn1");
        add(specs, n, "relu", "relu1");
    }
}

static int head(mp_layer_spec *specs, int n, int64_t num_classes)
{
    add(specs, &n, "gavgpool", "pool");
    add(specs, &n, "linear", "fc")->out = num_classes;
    return n;
}

/* Three stages of `per` blocks of `kind` with out[s] channels, strides 1, 2, 2. */
static int stages(mp_layer_spec *specs, int n, const char *kind, int64_t per, const int64_t out[3],
                  const int64_t width[3], int64_t groups, double p)
{
    for (int s = 0; s < 3; s++)
        for (int64_t b = 0; b < per; b++) {
            char name[48];
            snprintf(name, sizeof name, "layer%d.%lld", s + 1, (long long)b);
            mp_layer_spec *l = add(specs, &n, kind, name);
            l->out = out[s];
            l->stride = (s > 0 && b == 0) ? 2 : 1;
            l->width = width[s];
            l->groups = groups;
            l->p = p;
        }
    return n;
}

/* depth transformer blocks blocks.<i> of `heads` heads, then the final LayerNorm ln_f; -1 with
 * the reason ("model.<key>: ...") when they do not fit a model or the heads do not divide dim. */
static int blocks(mp_layer_spec *specs, int n, const mp_preset_args *a, bool causal)
{
    int64_t depth = a->depth ? a->depth : 4, heads = a->heads ? a->heads : 1;
    if (depth > MP_MAX_LAYERS - 8) {
        mp_fail(MP_EUSAGE, "model.depth: at most %d transformer blocks (got %lld)",
                MP_MAX_LAYERS - 8, (long long)depth);
        return -1;
    }
    if (a->dim % heads != 0) {
        mp_fail(MP_EUSAGE, "model.heads: %lld heads do not divide the token width model.dim = "
                "%lld", (long long)heads, (long long)a->dim);
        return -1;
    }
    for (int64_t i = 0; i < depth; i++) {
        char name[48];
        snprintf(name, sizeof name, "blocks.%lld", (long long)i);
        mp_layer_spec *b = add(specs, &n, "transformer", name);
        b->heads = a->heads;
        b->causal = causal;
        b->p = a->dropout;
        snprintf(b->attention, sizeof b->attention, "%s", a->matrix_attention ? "matrix" : "flash");
    }
    add(specs, &n, "layernorm", "ln_f");
    return n;
}

/* Xiao et al.'s convolutional stem ("Early convolutions help transformers see better"): three
 * 3x3 stride-2 convolutions (32, 64, 128 channels, each with BatchNorm and ReLU) take 28x28 to
 * 4x4; the caller's 1x1 convolution then gives the tokens their width. */
static void conv_stem(mp_layer_spec *specs, int *n)
{
    for (int i = 0; i < 3; i++) {
        char name[24];
        snprintf(name, sizeof name, "stem.conv%d", i + 1);
        mp_layer_spec *c = add(specs, n, "conv2d", name);
        c->out = 32 << i;
        c->kernel = 3;
        c->stride = 2;
        c->pad = 1;
        c->bias = false;
        snprintf(name, sizeof name, "stem.bn%d", i + 1);
        add(specs, n, "batchnorm", name);
        snprintf(name, sizeof name, "stem.relu%d", i + 1);
        add(specs, n, "relu", name);
    }
}

static int vit_specs(const mp_preset_args *a, int64_t num_classes, mp_layer_spec *specs)
{
    int n = 0;
    if (a->conv_stem)
        conv_stem(specs, &n);
    mp_layer_spec *patch = add(specs, &n, "conv2d", "patch");
    patch->out = a->dim;
    patch->kernel = a->conv_stem ? 1 : a->patch ? a->patch : 7;
    patch->stride = patch->kernel;
    add(specs, &n, "posembed", "pos");
    if ((n = blocks(specs, n, a, false)) < 0)
        return -1;
    add(specs, &n, "gavgpool", "pool");
    add(specs, &n, "linear", "head")->out = num_classes;
    return n;
}

static int gpt_specs(const mp_preset_args *a, int64_t num_classes, mp_layer_spec *specs)
{
    int n = 0;
    add(specs, &n, "embedding", "wte")->out = a->dim;
    add(specs, &n, "posembed", "wpe");
    if (a->dropout > 0)
        add(specs, &n, "dropout", "drop")->p = a->dropout;
    if ((n = blocks(specs, n, a, true)) < 0)
        return -1;
    mp_layer_spec *h = add(specs, &n, "linear", "head");
    h->out = num_classes;
    h->tie = true;
    return n;
}

/* The blocks per stage n of a network of depth = per * n + base (n >= 1), or -1 with the
 * reason: a depth not of that form, or one whose 3n blocks plus the 5 layers of stem and head
 * are more than a model may hold. */
static int64_t blocks_per_stage(const char *name, int64_t depth, int64_t per, int64_t base)
{
    if (depth < per + base || (depth - base) % per) {
        mp_fail(MP_EUSAGE,
                "model.depth: %s needs depth = %lldn + %lld with n >= 1 (got %lld)", name,
                (long long)per, (long long)base, (long long)depth);
        return -1;
    }
    int64_t n = (depth - base) / per, most = (MP_MAX_LAYERS - 5) / 3;
    if (n > most) {
        mp_fail(MP_EUSAGE,
                "model.depth: %s of depth %lld has %lld blocks per stage, %lld layers in all; "
                "a model holds at most %d layers (depth at most %lld)",
                name, (long long)depth, (long long)n, (long long)(3 * n + 5), MP_MAX_LAYERS,
                (long long)(most * per + base));
        return -1;
    }
    return n;
}

int mp_preset_specs(const char *name, const mp_preset_args *a, int64_t num_classes,
                    mp_layer_spec *specs)
{
    int n = 0;
    if (strcmp(name, "mlp") == 0)
        return mp_model_mlp_specs(specs, a->hidden, a->nhidden, num_classes);
    if (strcmp(name, "cnn") == 0)
        return cnn_specs(false, num_classes, specs);
    if (strcmp(name, "cnn_bn") == 0)
        return cnn_specs(true, num_classes, specs);
    if (strcmp(name, "resnet20") == 0) {
        int64_t per = blocks_per_stage(name, a->depth ? a->depth : 20, 6, 2);
        if (per < 0)
            return -1;
        const int64_t out[3] = {16, 32, 64}, none[3] = {0, 0, 0};
        stem(specs, &n, 16, true);
        return head(specs, stages(specs, n, "basic", per, out, none, 1, 0.0), num_classes);
    }
    if (strcmp(name, "wrn") == 0) {
        int64_t per = blocks_per_stage(name, a->depth ? a->depth : 16, 6, 4), k = a->widen;
        if (per < 0)
            return -1;
        const int64_t out[3] = {16 * k, 32 * k, 64 * k}, none[3] = {0, 0, 0};
        stem(specs, &n, 16, false);
        n = stages(specs, n, "wide", per, out, none, 1, a->dropout);
        add(specs, &n, "batchnorm", "bn_final");
        add(specs, &n, "relu", "relu_final");
        return head(specs, n, num_classes);
    }
    if (strcmp(name, "resnext") == 0) {
        int64_t per = blocks_per_stage(name, a->depth ? a->depth : 29, 9, 2);
        int64_t c = a->cardinality, w = a->width;
        if (per < 0)
            return -1;
        const int64_t out[3] = {256, 512, 1024}, width[3] = {c * w, 2 * c * w, 4 * c * w};
        stem(specs, &n, 64, true);
        return head(specs, stages(specs, n, "bottleneck", per, out, width, c, 0.0),
                    num_classes);
    }
    if (strcmp(name, "vit") == 0)
        return vit_specs(a, num_classes, specs);
    if (strcmp(name, "gpt") == 0)
        return gpt_specs(a, num_classes, specs);
    mp_fail(MP_EUSAGE, "model.preset: unknown preset '%s'", name);
    return -1;
}
