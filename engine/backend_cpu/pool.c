/* 2-D max and average pooling on the CPU over NHWC tensors (mp_pool_desc). Max pooling ignores
 * padding, takes the first maximum of each window in row-major order (a NaN wins over numbers,
 * so it propagates) and routes the gradient to it; average pooling divides by the full window
 * area, padded zeros included (PyTorch's count_include_pad=True). Backward gathers, for each
 * input element, the contributions of every window covering it in an accumulator and rounds
 * once, so overlapping windows do not round repeatedly in half precision; dx must not alias x
 * or dy. x, y, dy and dx share one dtype. Channels are processed in blocks of MP_POOL_CBLOCK
 * with the accumulators on the stack. */
#include <math.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/pool_geom.h"

#define MP_POOL_CBLOCK 64

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* best[j], at[j] = the first maximum of the window [hs, he) x [ws, we) of channel c0 + j of
 * image xn (H, W, C), and its flat position h * W + w. NaN beats any number. */
#define WINDOW_MAX(ACC, LD, xn, g, hs, he, ws, we, c0, nc, best, at)                          \
    do {                                                                                      \
        for (int64_t j = 0; j < (nc); j++) {                                                  \
            best[j] = LD((xn)[((hs) * (g)->W + (ws)) * (g)->C + (c0) + j]);                   \
            at[j] = (hs) * (g)->W + (ws);                                                     \
        }                                                                                     \
        for (int64_t hh = (hs); hh < (he); hh++)                                              \
            for (int64_t ww = (ws); ww < (we); ww++)                                          \
                for (int64_t j = 0; j < (nc); j++) {                                          \
                    ACC v = LD((xn)[(hh * (g)->W + ww) * (g)->C + (c0) + j]);                 \
                    if (v > best[j] || (isnan(v) && !isnan(best[j]))) {                       \
                        best[j] = v;                                                          \
                        at[j] = hh * (g)->W + ww;                                             \
                    }                                                                         \
                }                                                                             \
    } while (0)

#define POOL_FWD(T, ACC, LD, ST, is_max, g, x, y)                                             \
    do {                                                                                      \
        const T *xx = (x)->data;                                                              \
        T *yy = (y)->data;                                                                    \
        const ACC area = (ACC)((g)->kh * (g)->kw);                                            \
        for (int64_t n = 0; n < (g)->N; n++) {                                                \
            const T *xn = xx + n * (g)->H * (g)->W * (g)->C;                                  \
            for (int64_t p = 0; p < (g)->P; p++)                                              \
                for (int64_t q = 0; q < (g)->Q; q++) {                                        \
                    int64_t hs, he, ws, we;                                                   \
                    mp_pool_span(p, (g)->sh, (g)->ph, (g)->kh, (g)->H, &hs, &he);              \
                    mp_pool_span(q, (g)->sw, (g)->pw, (g)->kw, (g)->W, &ws, &we);              \
                    T *out = yy + ((n * (g)->P + p) * (g)->Q + q) * (g)->C;                   \
                    for (int64_t c0 = 0; c0 < (g)->C; c0 += MP_POOL_CBLOCK) {                 \
                        int64_t nc = min64((g)->C - c0, MP_POOL_CBLOCK);                      \
                        ACC acc[MP_POOL_CBLOCK];                                              \
                        int64_t at[MP_POOL_CBLOCK];                                           \
                        if (is_max) {                                                         \
                            WINDOW_MAX(ACC, LD, xn, g, hs, he, ws, we, c0, nc, acc, at);      \
                            (void)at; /* the position matters only to backward */            \
                        } else {                                                              \
                            for (int64_t j = 0; j < nc; j++)                                  \
                                acc[j] = 0;                                                   \
                            for (int64_t hh = hs; hh < he; hh++)                              \
                                for (int64_t ww = ws; ww < we; ww++)                          \
                                    for (int64_t j = 0; j < nc; j++)                          \
                                        acc[j] += LD(xn[(hh * (g)->W + ww) * (g)->C + c0 + j]); \
                            for (int64_t j = 0; j < nc; j++)                                  \
                                acc[j] /= area;                                               \
                        }                                                                     \
                        for (int64_t j = 0; j < nc; j++)                                      \
                            out[c0 + j] = ST(acc[j]);                                         \
                    }                                                                         \
                }                                                                             \
        }                                                                                     \
    } while (0)

mp_status mp_cpu_pool_forward(const mp_pool_desc *d, const mp_tensor *x, mp_tensor *y)
{
    mp_pool_geom g;
    MP_CPU_REQUIRE(mp_pool_geometry(d, x, &g), "pool_forward");
    MP_CPU_REQUIRE(mp_pool_shaped(y, &g, g.P, g.Q) && y->dtype == x->dtype, "pool_forward");
    MP_CPU_DISPATCH(x->dtype, POOL_FWD, d->max, &g, x, y);
    return MP_OK;
}

#define POOL_BWD(T, ACC, LD, ST, is_max, g, x, dy, dx)                                        \
    do {                                                                                      \
        const T *xx = (x)->data, *dd = (dy)->data;                                            \
        T *out = (dx)->data;                                                                  \
        const ACC area = (ACC)((g)->kh * (g)->kw);                                            \
        for (int64_t n = 0; n < (g)->N; n++) {                                                \
            const T *xn = xx + n * (g)->H * (g)->W * (g)->C;                                  \
            for (int64_t h = 0; h < (g)->H; h++)                                              \
                for (int64_t w = 0; w < (g)->W; w++) {                                        \
                    int64_t plo, phi, qlo, qhi;                                               \
                    mp_pool_covering(h, (g)->sh, (g)->ph, (g)->kh, (g)->P, &plo, &phi);               \
                    mp_pool_covering(w, (g)->sw, (g)->pw, (g)->kw, (g)->Q, &qlo, &qhi);               \
                    T *o = out + ((n * (g)->H + h) * (g)->W + w) * (g)->C;                    \
                    for (int64_t c0 = 0; c0 < (g)->C; c0 += MP_POOL_CBLOCK) {                 \
                        int64_t nc = min64((g)->C - c0, MP_POOL_CBLOCK);                      \
                        ACC acc[MP_POOL_CBLOCK], best[MP_POOL_CBLOCK];                        \
                        int64_t at[MP_POOL_CBLOCK];                                           \
                        for (int64_t j = 0; j < nc; j++)                                      \
                            acc[j] = 0;                                                       \
                        for (int64_t p = plo; p <= phi; p++)                                  \
                            for (int64_t q = qlo; q <= qhi; q++) {                            \
                                const T *g_ = dd + ((n * (g)->P + p) * (g)->Q + q) * (g)->C;  \
                                if (!(is_max)) {                                              \
                                    for (int64_t j = 0; j < nc; j++)                          \
                                        acc[j] += LD(g_[c0 + j]);                             \
                                    continue;                                                 \
                                }                                                             \
                                int64_t hs, he, ws, we;                                       \
                                mp_pool_span(p, (g)->sh, (g)->ph, (g)->kh, (g)->H, &hs, &he);  \
                                mp_pool_span(q, (g)->sw, (g)->pw, (g)->kw, (g)->W, &ws, &we);  \
                                WINDOW_MAX(ACC, LD, xn, g, hs, he, ws, we, c0, nc, best, at); \
                                for (int64_t j = 0; j < nc; j++)                              \
                                    if (at[j] == h * (g)->W + w)                              \
                                        acc[j] += LD(g_[c0 + j]);                             \
                            }                                                                 \
                        for (int64_t j = 0; j < nc; j++)                                      \
                            o[c0 + j] = ST((is_max) ? acc[j] : acc[j] / area);                \
                    }                                                                         \
                }                                                                             \
        }                                                                                     \
    } while (0)

mp_status mp_cpu_pool_backward(const mp_pool_desc *d, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx)
{
    mp_pool_geom g;
    MP_CPU_REQUIRE(mp_pool_geometry(d, x, &g), "pool_backward");
    MP_CPU_REQUIRE(mp_pool_shaped(y, &g, g.P, g.Q) && mp_pool_shaped(dy, &g, g.P, g.Q),
                   "pool_backward");
    MP_CPU_REQUIRE(mp_pool_shaped(dx, &g, g.H, g.W), "pool_backward");
    MP_CPU_REQUIRE(dy->dtype == x->dtype && dx->dtype == x->dtype, "pool_backward");
    MP_CPU_DISPATCH(x->dtype, POOL_BWD, d->max, &g, x, dy, dx);
    return MP_OK;
}
