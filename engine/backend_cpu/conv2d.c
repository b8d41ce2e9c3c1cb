/* 2-D convolution on the CPU: x (N, H, W, C), w (K, R, S, C / G), y (N, P, Q, K).
 * Each op runs in a working precision, FP32 (FP64 for FP64 tensors): tensors stored in another
 * type are converted whole, once, into a per-thread workspace that only grows (counted as
 * MP_MEM_WORKSPACE). Per chunk of images and per group, im2col gathers the NHWC patches into a
 * (rows, R * S * C/G) matrix and OpenBLAS sgemm/dgemm multiplies it with the group's weights;
 * backward data scatters the patch gradients back with col2im. A 1x1 kernel with unit stride
 * and no padding reads x as the patch matrix directly. Chunking and summation order are fixed,
 * so results are deterministic; each output element is rounded once to its dtype. */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/backend_cpu/cpu.h"

/* Patch-matrix elements per chunk (4 MiB in FP32): big enough for efficient GEMMs, small
 * enough to stay near the cache. At least one image per chunk. */
#define MP_CONV_COL_BUDGET ((int64_t)1 << 20)

typedef struct mp_conv_geom {
    int64_t n, h, w, c, k, r, s, p, q;
    int64_t groups, cg, kg;  /* groups, input and output channels per group */
    int64_t kdim;            /* r * s * cg: columns of the patch matrix */
    int64_t sh, sw, ph, pw, dh, dw;
    bool direct;             /* 1x1, unit stride, no padding: x is its own patch matrix */
    bool f64;                /* working precision FP64 (else FP32) */
    size_t esz;              /* bytes of a working element */
    int64_t chunk;           /* images per chunk */
} mp_conv_geom;

static _Thread_local void *mp_conv_ws;
static _Thread_local size_t mp_conv_ws_bytes;

static void *workspace(size_t bytes)
{
    if (bytes > mp_conv_ws_bytes) {
        mp_free(mp_conv_ws);
        mp_conv_ws = mp_alloc(bytes, MP_MEM_WORKSPACE);
        mp_conv_ws_bytes = bytes;
    }
    return mp_conv_ws;
}

static size_t round64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Checks the descriptor and the three tensors (image side xt, filter wt, output side yt) and
 * fills the geometry. */
static mp_status conv_geom(const mp_conv_desc *d, const mp_tensor *xt, const mp_tensor *wt,
                           const mp_tensor *yt, const char *op, mp_conv_geom *g)
{
    MP_CPU_REQUIRE(xt->ndim == 4 && wt->ndim == 4 && yt->ndim == 4, op);
    MP_CPU_REQUIRE(d->groups >= 1, op);
    MP_CPU_REQUIRE(d->stride[0] >= 1 && d->stride[1] >= 1, op);
    MP_CPU_REQUIRE(d->dilation[0] >= 1 && d->dilation[1] >= 1, op);
    MP_CPU_REQUIRE(d->pad[0] >= 0 && d->pad[1] >= 0, op);
    memset(g, 0, sizeof *g);
    g->n = xt->shape[0];
    g->h = xt->shape[1];
    g->w = xt->shape[2];
    g->c = xt->shape[3];
    g->k = wt->shape[0];
    g->r = wt->shape[1];
    g->s = wt->shape[2];
    g->groups = d->groups;
    g->sh = d->stride[0];
    g->sw = d->stride[1];
    g->ph = d->pad[0];
    g->pw = d->pad[1];
    g->dh = d->dilation[0];
    g->dw = d->dilation[1];
    MP_CPU_REQUIRE(g->n >= 0 && g->h >= 1 && g->w >= 1 && g->c >= 1, op);
    MP_CPU_REQUIRE(g->k >= 1 && g->r >= 1 && g->s >= 1, op);
    MP_CPU_REQUIRE(g->c % g->groups == 0 && g->k % g->groups == 0, op);
    g->cg = g->c / g->groups;
    g->kg = g->k / g->groups;
    MP_CPU_REQUIRE(wt->shape[3] == g->cg, op);
    int64_t eh = g->h + 2 * g->ph - g->dh * (g->r - 1) - 1;
    int64_t ew = g->w + 2 * g->pw - g->dw * (g->s - 1) - 1;
    MP_CPU_REQUIRE(eh >= 0 && ew >= 0, op);
    g->p = eh / g->sh + 1;
    g->q = ew / g->sw + 1;
    MP_CPU_REQUIRE(yt->shape[0] == g->n && yt->shape[1] == g->p && yt->shape[2] == g->q &&
                       yt->shape[3] == g->k,
                   op);
    g->f64 = xt->dtype == MP_F64;
    MP_CPU_REQUIRE(g->f64 == (wt->dtype == MP_F64) && g->f64 == (yt->dtype == MP_F64), op);
    g->esz = g->f64 ? sizeof(double) : sizeof(float);
    g->kdim = g->r * g->s * g->cg;
    g->direct = g->r == 1 && g->s == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    int64_t per_image = g->p * g->q * (g->direct ? 1 : g->kdim);
    MP_CPU_REQUIRE(g->p * g->q * g->kdim <= INT_MAX && g->h * g->w * g->c <= INT_MAX, op);
    g->chunk = MP_CONV_COL_BUDGET / per_image;
    if (g->chunk < 1)
        g->chunk = 1;
    if (g->chunk > g->n)
        g->chunk = g->n;
    return MP_OK;
}

/* Bytes of workspace t needs to be seen in the working precision (0 when it already is). */
static size_t work_bytes(const mp_conv_geom *g, const mp_tensor *t)
{
    bool native = t->dtype == (g->f64 ? MP_F64 : MP_F32);
    return native ? 0 : round64((size_t)mp_tensor_numel(t) * g->esz);
}

/* t in the working precision: its own storage, or `scratch` (work_bytes) after conversion
 * when `load` (otherwise scratch is left for the caller to fill). */
static char *as_work(const mp_conv_geom *g, const mp_tensor *t, char *scratch, bool load)
{
    if (t->dtype == (g->f64 ? MP_F64 : MP_F32))
        return t->data;
    if (load)
        mp_convert(scratch, MP_F32, t->data, t->dtype, (size_t)mp_tensor_numel(t));
    return scratch;
}

/* Rounds the working result back into t when it was computed in scratch. */
static void store_work(const mp_conv_geom *g, mp_tensor *t, const char *work)
{
    if (work != (const char *)t->data)
        mp_convert(t->data, t->dtype, work, g->f64 ? MP_F64 : MP_F32,
                   (size_t)mp_tensor_numel(t));
}

/* c = op(a) * op(b) + beta c in the working precision; row-major. */
static void work_gemm(const mp_conv_geom *g, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      const char *a, int64_t lda, const char *b, int64_t ldb, double beta,
                      char *c, int64_t ldc)
{
    CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
    if (g->f64)
        cblas_dgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, 1.0, (const double *)a,
                    (int)lda, (const double *)b, (int)ldb, beta, (double *)c, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, 1.0f, (const float *)a,
                    (int)lda, (const float *)b, (int)ldb, (float)beta, (float *)c, (int)ldc);
}

/* col (nb * P * Q, kdim) = the patches of images n0 .. n0 + nb - 1 for group grp; padding
 * reads as zero. Columns are ordered (r, s, c) like a filter row of w. */
static void im2col(const mp_conv_geom *g, const char *x, int64_t n0, int64_t nb, int64_t grp,
                   char *col)
{
    size_t run = (size_t)g->cg * g->esz;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t p = 0; p < g->p; p++)
            for (int64_t q = 0; q < g->q; q++) {
                char *row = col + (size_t)(((n * g->p + p) * g->q + q) * g->kdim) * g->esz;
                for (int64_t r = 0; r < g->r; r++) {
                    int64_t hh = p * g->sh - g->ph + r * g->dh;
                    char *dst = row + (size_t)(r * g->s) * run;
                    if (hh < 0 || hh >= g->h) {
                        memset(dst, 0, (size_t)g->s * run);
                        continue;
                    }
                    const char *src = x + (size_t)(((n0 + n) * g->h + hh) * g->w * g->c +
                                                   grp * g->cg) * g->esz;
                    for (int64_t s = 0; s < g->s; s++, dst += run) {
                        int64_t ww = q * g->sw - g->pw + s * g->dw;
                        if (ww < 0 || ww >= g->w)
                            memset(dst, 0, run);
                        else
                            memcpy(dst, src + (size_t)(ww * g->c) * g->esz, run);
                    }
                }
            }
}

static void add_run(bool f64, char *dst, const char *src, int64_t n)
{
    if (f64) {
        double *d = (double *)dst;
        const double *s = (const double *)src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
    } else {
        float *d = (float *)dst;
        const float *s = (const float *)src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
    }
}

/* The adjoint of im2col: adds each patch gradient of col into dx (images n0 .. n0 + nb - 1,
 * group grp) in a fixed order; padding positions are dropped. */
static void col2im(const mp_conv_geom *g, const char *col, int64_t n0, int64_t nb, int64_t grp,
                   char *dx)
{
    size_t run = (size_t)g->cg * g->esz;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t p = 0; p < g->p; p++)
            for (int64_t q = 0; q < g->q; q++) {
                const char *row =
                    col + (size_t)(((n * g->p + p) * g->q + q) * g->kdim) * g->esz;
                for (int64_t r = 0; r < g->r; r++) {
                    int64_t hh = p * g->sh - g->ph + r * g->dh;
                    if (hh < 0 || hh >= g->h)
                        continue;
                    char *dst = dx + (size_t)(((n0 + n) * g->h + hh) * g->w * g->c +
                                              grp * g->cg) * g->esz;
                    const char *src = row + (size_t)(r * g->s) * run;
                    for (int64_t s = 0; s < g->s; s++, src += run) {
                        int64_t ww = q * g->sw - g->pw + s * g->dw;
                        if (ww >= 0 && ww < g->w)
                            add_run(g->f64, dst + (size_t)(ww * g->c) * g->esz, src, g->cg);
                    }
                }
            }
}

/* Byte offset of element (image n0, group grp) of the image-side and output-side tensors. */
static size_t x_off(const mp_conv_geom *g, int64_t n0, int64_t grp)
{
    return (size_t)(n0 * g->h * g->w * g->c + grp * g->cg) * g->esz;
}

static size_t y_off(const mp_conv_geom *g, int64_t n0, int64_t grp)
{
    return (size_t)(n0 * g->p * g->q * g->k + grp * g->kg) * g->esz;
}

/* Bytes of the patch matrix of one chunk (0 on the direct path). */
static size_t col_bytes(const mp_conv_geom *g)
{
    return g->direct ? 0 : round64((size_t)(g->chunk * g->p * g->q * g->kdim) * g->esz);
}

mp_status mp_cpu_conv2d_forward(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                                mp_tensor *y)
{
    mp_conv_geom g;
    MP_TRY(conv_geom(d, x, w, y, "conv2d_forward", &g));
    if (g.n == 0)
        return MP_OK;
    size_t bx = work_bytes(&g, x), bw = work_bytes(&g, w), by = work_bytes(&g, y);
    char *ws = workspace(bx + bw + by + col_bytes(&g) + 64);
    const char *xw = as_work(&g, x, ws, true), *ww = as_work(&g, w, ws + bx, true);
    char *yw = as_work(&g, y, ws + bx + bw, false), *col = ws + bx + bw + by;
    int64_t pq = g.p * g.q;
    for (int64_t n0 = 0; n0 < g.n; n0 += g.chunk) {
        int64_t nb = g.n - n0 < g.chunk ? g.n - n0 : g.chunk;
        for (int64_t grp = 0; grp < g.groups; grp++) {
            const char *a = g.direct ? xw + x_off(&g, n0, grp) : col;
            if (!g.direct)
                im2col(&g, xw, n0, nb, grp, col);
            work_gemm(&g, false, true, nb * pq, g.kg, g.kdim, a, g.direct ? g.c : g.kdim,
                      ww + (size_t)(grp * g.kg * g.kdim) * g.esz, g.kdim, 0.0,
                      yw + y_off(&g, n0, grp), g.k);
        }
    }
    store_work(&g, y, yw);
    return MP_OK;
}

mp_status mp_cpu_conv2d_backward_data(const mp_conv_desc *d, const mp_tensor *dy,
                                      const mp_tensor *w, mp_tensor *dx)
{
    mp_conv_geom g;
    MP_TRY(conv_geom(d, dx, w, dy, "conv2d_backward_data", &g));
    if (g.n == 0)
        return MP_OK;
    size_t bdy = work_bytes(&g, dy), bw = work_bytes(&g, w), bdx = work_bytes(&g, dx);
    char *ws = workspace(bdy + bw + bdx + col_bytes(&g) + 64);
    const char *dyw = as_work(&g, dy, ws, true), *ww = as_work(&g, w, ws + bdy, true);
    char *dxw = as_work(&g, dx, ws + bdy + bw, false), *col = ws + bdy + bw + bdx;
    if (!g.direct)
        memset(dxw, 0, (size_t)mp_tensor_numel(dx) * g.esz);
    int64_t pq = g.p * g.q;
    for (int64_t n0 = 0; n0 < g.n; n0 += g.chunk) {
        int64_t nb = g.n - n0 < g.chunk ? g.n - n0 : g.chunk;
        for (int64_t grp = 0; grp < g.groups; grp++) {
            const char *wg = ww + (size_t)(grp * g.kg * g.kdim) * g.esz;
            if (g.direct) {
                work_gemm(&g, false, false, nb * pq, g.cg, g.kg, dyw + y_off(&g, n0, grp), g.k,
                          wg, g.kdim, 0.0, dxw + x_off(&g, n0, grp), g.c);
                continue;
            }
            work_gemm(&g, false, false, nb * pq, g.kdim, g.kg, dyw + y_off(&g, n0, grp), g.k,
                      wg, g.kdim, 0.0, col, g.kdim);
            col2im(&g, col, n0, nb, grp, dxw);
        }
    }
    store_work(&g, dx, dxw);
    return MP_OK;
}

mp_status mp_cpu_conv2d_backward_filter(const mp_conv_desc *d, const mp_tensor *x,
                                        const mp_tensor *dy, mp_tensor *dw)
{
    mp_conv_geom g;
    MP_TRY(conv_geom(d, x, dw, dy, "conv2d_backward_filter", &g));
    size_t bx = work_bytes(&g, x), bdy = work_bytes(&g, dy), bdw = work_bytes(&g, dw);
    char *ws = workspace(bx + bdy + bdw + col_bytes(&g) + 64);
    char *dww = as_work(&g, dw, ws + bx + bdy, false), *col = ws + bx + bdy + bdw;
    if (g.n == 0) {
        memset(dw->data, 0, (size_t)mp_tensor_bytes(dw)); /* all-zero bits are 0 in every dtype */
        return MP_OK;
    }
    const char *xw = as_work(&g, x, ws, true), *dyw = as_work(&g, dy, ws + bx, true);
    int64_t pq = g.p * g.q;
    for (int64_t n0 = 0; n0 < g.n; n0 += g.chunk) {
        int64_t nb = g.n - n0 < g.chunk ? g.n - n0 : g.chunk;
        for (int64_t grp = 0; grp < g.groups; grp++) {
            const char *b = g.direct ? xw + x_off(&g, n0, grp) : col;
            if (!g.direct)
                im2col(&g, xw, n0, nb, grp, col);
            work_gemm(&g, true, false, g.kg, g.kdim, nb * pq, dyw + y_off(&g, n0, grp), g.k, b,
                      g.direct ? g.c : g.kdim, n0 == 0 ? 0.0 : 1.0,
                      dww + (size_t)(grp * g.kg * g.kdim) * g.esz, g.kdim);
        }
    }
    store_work(&g, dw, dww);
    return MP_OK;
}
