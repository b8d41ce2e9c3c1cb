/* The geometry of a 2-D pooling (mp_pool_desc) over x (N, H, W, C), written once for every
 * backend (MP_HD): the validity rules, the output size, the shape checks, each window's valid
 * span and the windows that cover a row, so the CPU and the GPU pool over exactly the same windows. */
#ifndef MP_POOL_GEOM_H
#define MP_POOL_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/hd.h"
#include "engine/ops.h"

typedef struct mp_pool_geom {
    int64_t N, H, W, C, P, Q;
    int kh, kw, sh, sw, ph, pw;
} mp_pool_geom;

/* Fills *g from d and x (N, H, W, C); false for an invalid descriptor (padding above half the
 * window) or an empty output. */
static inline bool mp_pool_geometry(const mp_pool_desc *d, const mp_tensor *x, mp_pool_geom *g)
{
    if (x->ndim != 4 || d->window[0] < 1 || d->window[1] < 1 || d->stride[0] < 1 ||
        d->stride[1] < 1 || d->pad[0] < 0 || d->pad[1] < 0 || 2 * d->pad[0] > d->window[0] ||
        2 * d->pad[1] > d->window[1])
        return false;
    g->N = x->shape[0], g->H = x->shape[1], g->W = x->shape[2], g->C = x->shape[3];
    g->kh = d->window[0], g->kw = d->window[1];
    g->sh = d->stride[0], g->sw = d->stride[1];
    g->ph = d->pad[0], g->pw = d->pad[1];
    if (g->H + 2 * (int64_t)g->ph < g->kh || g->W + 2 * (int64_t)g->pw < g->kw)
        return false;
    g->P = (g->H + 2 * (int64_t)g->ph - g->kh) / g->sh + 1;
    g->Q = (g->W + 2 * (int64_t)g->pw - g->kw) / g->sw + 1;
    return g->N >= 1 && g->C >= 1;
}

/* t is (N, h, w, C) of the geometry's batch and channels. */
static inline bool mp_pool_shaped(const mp_tensor *t, const mp_pool_geom *g, int64_t h, int64_t w)
{
    return t->ndim == 4 && t->shape[0] == g->N && t->shape[1] == h && t->shape[2] == w &&
           t->shape[3] == g->C;
}

/* The valid rows [*lo, *hi) of window p (stride s, padding pad, size k) along an axis of
 * length n. */
MP_HD static inline void mp_pool_span(int64_t p, int s, int pad, int k, int64_t n, int64_t *lo,
                                      int64_t *hi)
{
    int64_t start = p * s - pad;
    *lo = start > 0 ? start : 0;
    *hi = start + k < n ? start + k : n;
}

/* The windows [*lo, *hi] covering row h along an axis with P windows (stride s, padding pad,
 * size k). */
MP_HD static inline void mp_pool_covering(int64_t h, int s, int pad, int k, int64_t P,
                                          int64_t *lo, int64_t *hi)
{
    int64_t first = h + pad - k, last = (h + pad) / s;
    *lo = first < 0 ? 0 : first / s + 1;
    *hi = last < P - 1 ? last : P - 1;
}

#endif
