/* The geometry of a 2-D convolution (mp_conv_desc) of x (N, H, W, C) with w (K, R, S, C / G)
 * into y (N, P, Q, K), written once for the layer and every backend: the descriptor's validity
 * rules, the output extent and the shape check of the three tensors, so that the layer, the CPU
 * and cuDNN accept exactly the same convolutions. */
#ifndef MP_CONV_GEOM_H
#define MP_CONV_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/hd.h"
#include "engine/ops.h"

typedef struct mp_conv_geom {
    int64_t n, h, w, c, k, r, s, p, q;
    int64_t groups, cg, kg; /* groups, input and output channels per group */
} mp_conv_geom;

/* d has stride and dilation >= 1, padding >= 0 and groups >= 1. */
MP_HD static inline bool mp_conv_desc_valid(const mp_conv_desc *d)
{
    return d->stride[0] >= 1 && d->stride[1] >= 1 && d->dilation[0] >= 1 &&
           d->dilation[1] >= 1 && d->pad[0] >= 0 && d->pad[1] >= 0 && d->groups >= 1;
}

/* The output length along an axis of length n for a kernel of size k (stride >= 1, pad >= 0,
 * dilation >= 1), PyTorch's (n + 2 pad - dilation (k - 1) - 1) / stride + 1; 0 when the dilated
 * kernel is longer than the padded axis (where C's truncating division would say 1). */
MP_HD static inline int64_t mp_conv_extent(int64_t n, int64_t k, int stride, int pad,
                                           int dilation)
{
    int64_t e = n + 2 * (int64_t)pad - (int64_t)dilation * (k - 1) - 1;
    return e < 0 ? 0 : e / stride + 1;
}

/* Fills *g from d, the image side xt (x or dx), the filter side wt (w or dw) and the output side
 * yt (y or dy); false for an invalid descriptor, a tensor that is not 4-D, an empty image, filter
 * or output (N = 0 is allowed), channels that do not divide by the groups, or shapes that do not
 * match. Dtypes are left to the caller. */
static inline bool mp_conv_geometry(const mp_conv_desc *d, const mp_tensor *xt,
                                    const mp_tensor *wt, const mp_tensor *yt, mp_conv_geom *g)
{
    if (!mp_conv_desc_valid(d) || xt->ndim != 4 || wt->ndim != 4 || yt->ndim != 4)
        return false;
    g->n = xt->shape[0], g->h = xt->shape[1], g->w = xt->shape[2], g->c = xt->shape[3];
    g->k = wt->shape[0], g->r = wt->shape[1], g->s = wt->shape[2];
    g->groups = d->groups;
    if (g->n < 0 || g->h < 1 || g->w < 1 || g->c < 1 || g->k < 1 || g->r < 1 || g->s < 1 ||
        g->c % g->groups != 0 || g->k % g->groups != 0)
        return false;
    g->cg = g->c / g->groups;
    g->kg = g->k / g->groups;
    g->p = mp_conv_extent(g->h, g->r, d->stride[0], d->pad[0], d->dilation[0]);
    g->q = mp_conv_extent(g->w, g->s, d->stride[1], d->pad[1], d->dilation[1]);
    return wt->shape[3] == g->cg && g->p >= 1 && g->q >= 1 && yt->shape[0] == g->n &&
           yt->shape[1] == g->p && yt->shape[2] == g->q && yt->shape[3] == g->k;
}

#endif
