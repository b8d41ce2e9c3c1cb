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

int mp_preset_specs(const char *name, const int64_t *hidden, int nhidden, int64_t num_classes,
                    mp_layer_spec *specs)
{
    if (strcmp(name, "mlp") == 0)
        return mp_model_mlp_specs(specs, hidden, nhidden, num_classes);
    if (strcmp(name, "cnn") == 0)
        return cnn_specs(false, num_classes, specs);
    if (strcmp(name, "cnn_bn") == 0)
        return cnn_specs(true, num_classes, specs);
    return -1;
}
