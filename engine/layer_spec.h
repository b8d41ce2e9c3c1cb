/* A layer as a config describes it, before it is built (engine/layer_list.h names the types and
 * the keys each takes). */
#ifndef MP_LAYER_SPEC_H
#define MP_LAYER_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* One layer as a config describes it (model.layers): its type, one of engine/layer_list.h,
 * and the settings of every type side by side, each read only by the types that take it (the
 * registry's key lists; zero or false where a config does not set it). */
typedef struct mp_layer_spec {
    char type[16];
    char name[48];    /* parameter name prefix; "" means "layers.<index>" */
    int64_t out;      /* linear: output features; conv2d: output channels */
    int64_t kernel;   /* conv2d, maxpool, avgpool: square kernel or window */
    int64_t stride;   /* conv2d (default 1), pools (0: the window) */
    int64_t pad;      /* conv2d, pools */
    int64_t dilation; /* conv2d (0 or 1: none) */
    int64_t groups;   /* conv2d (0 or 1: dense) */
    bool bias;        /* conv2d: with a bias */
    double p;         /* dropout probability (wide blocks: optional) */
    int64_t width;    /* bottleneck: inner width */
    double eps, momentum; /* batchnorm; layernorm and transformer: eps */
    int64_t heads;    /* attention, transformer */
    bool causal;      /* attention, transformer */
    char attention[8]; /* attention, transformer: "flash" (or "": the tiled ops) | "matrix" */
    bool per_token;   /* linear: over the last dimension of each position */
    bool tie;         /* linear (per token): share the first embedding layer's weight */
    int64_t vocab;    /* embedding: vocabulary (0: the data's number of classes) */
} mp_layer_spec;

/* Whether attention in layer s runs the tiled ops (its "attention" setting is not "matrix"). */
static inline bool mp_layer_spec_flash(const mp_layer_spec *s)
{
    return strcmp(s->attention, "matrix") != 0;
}

#endif
