/* 2-D convolution on the CPU: x (N, H, W, C), w (K, R, S, C / G), y (N, P, Q, K).
 * Each op runs in a working precision, FP32 (FP64 for FP64 tensors): tensors stored in another
 * type are converted into a per-thread workspace that only grows (counted as MP_MEM_WORKSPACE),
 * the image- and output-side ones a chunk of images at a time (chunk_images; the filter once
 * per chunk), so that each chunk's FP32 copies stay in the caches from the widening through
 * the convolution to the rounding. FP32 work goes to oneDNN where it is built in (conv_dnnl.c),
 * and so do half tensors of one dtype, unconverted, where oneDNN has fast kernels for them
 * (bf16: the forward whole, the data gradient in the backward's chunks); FP64 work, and FP32
 * work oneDNN cannot take, runs here: per chunk of images and per group, im2col gathers the
 * NHWC patches into a (rows, R * S * C/G) matrix and OpenBLAS sgemm/dgemm multiplies it with
 * the group's weights;
 * backward data scatters the patch gradients back with col2im. A 1x1 kernel with unit stride
 * and no padding reads x as the patch matrix directly. Chunking and summation order are fixed,
 * so results are deterministic; each output element is rounded once to its dtype. Both gradients
 * at once (conv2d_backward, what the layer calls) share one working copy of dy. */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/backend_cpu/conv_dnnl.h"
#include "engine/backend_cpu/cpu.h"
#include "engine/conv_geom.h"

/* Patch-matrix elements per chunk (4 MiB in FP32): big enough for efficient GEMMs, small
 * enough to stay near the cache. At least one image per chunk. */
#define MP_CONV_COL_BUDGET ((int64_t)1 << 20)

/* The shapes (mp_conv_geom) and what the CPU adds to them. */
typedef struct conv_plan {
    mp_conv_geom g;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t kdim;            /* r * s * cg: columns of the patch matrix */
    bool direct;             /* 1x1, unit stride, no padding: x is its own patch matrix */
    bool f64;                /* working precision FP64 (else FP32) */
    size_t esz;              /* bytes of a working element */
    int64_t chunk;           /* images per chunk */
} conv_plan;

static void *workspace(size_t bytes) { return mp_cpu_workspace(MP_CPU_WS_CONV, bytes); }

static size_t round64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Checks the descriptor, the three tensors (image side xt, filter wt, output side yt) and
 * their dtypes, and fills the plan. */
static mp_status conv_setup(const mp_conv_desc *d, const mp_tensor *xt, const mp_tensor *wt,
                            const mp_tensor *yt, const char *op, conv_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    const mp_conv_geom *g = &pl->g;
    MP_CPU_REQUIRE(mp_conv_geometry(d, xt, wt, yt, &pl->g), op);
    pl->f64 = xt->dtype == MP_F64;
    MP_CPU_REQUIRE(pl->f64 == (wt->dtype == MP_F64) && pl->f64 == (yt->dtype == MP_F64), op);
    pl->sh = d->stride[0], pl->sw = d->stride[1];
    pl->ph = d->pad[0], pl->pw = d->pad[1];
    pl->dh = d->dilation[0], pl->dw = d->dilation[1];
    pl->esz = pl->f64 ? sizeof(double) : sizeof(float);
    pl->kdim = g->r * g->s * g->cg;
    pl->direct = g->r == 1 && g->s == 1 && pl->sh == 1 && pl->sw == 1 && pl->ph == 0 &&
                 pl->pw == 0;
    int64_t per_image = g->p * g->q * (pl->direct ? 1 : pl->kdim);
    MP_CPU_REQUIRE(g->p * g->q * pl->kdim <= INT_MAX && g->h * g->w * g->c <= INT_MAX, op);
    pl->chunk = MP_CONV_COL_BUDGET / per_image;
    if (pl->chunk < 1)
        pl->chunk = 1;
    if (pl->chunk > g->n)
        pl->chunk = g->n;
    return MP_OK;
}

/* Bytes of workspace t needs to be seen in the working precision (0 when it already is). */
static size_t work_bytes(const conv_plan *pl, const mp_tensor *t)
{
    bool native = t->dtype == (pl->f64 ? MP_F64 : MP_F32);
    return native ? 0 : round64((size_t)mp_tensor_numel(t) * pl->esz);
}

/* t in the working precision: its own storage, or `scratch` (work_bytes) after conversion
 * when `load` (otherwise scratch is left for the caller to fill). */
static char *as_work(const conv_plan *pl, const mp_tensor *t, char *scratch, bool load)
{
    if (t->dtype == (pl->f64 ? MP_F64 : MP_F32))
        return t->data;
    if (load)
        mp_cpu_convert_bulk(scratch, MP_F32, t->data, t->dtype, (size_t)mp_tensor_numel(t));
    return scratch;
}

/* Rounds the working result back into t when it was computed in scratch. */
static void store_work(const conv_plan *pl, mp_tensor *t, const char *work)
{
    if (work != (const char *)t->data)
        mp_cpu_convert_bulk(t->data, t->dtype, work, pl->f64 ? MP_F64 : MP_F32,
                            (size_t)mp_tensor_numel(t));
}

/* c = op(a) * op(b) + beta c in the working precision; row-major. */
static void work_gemm(const conv_plan *pl, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      const char *a, int64_t lda, const char *b, int64_t ldb, double beta,
                      char *c, int64_t ldc)
{
    CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
    if (pl->f64)
        cblas_dgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, 1.0, (const double *)a,
                    (int)lda, (const double *)b, (int)ldb, beta, (double *)c, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, oa, ob, (int)m, (int)n, (int)k, 1.0f, (const float *)a,
                    (int)lda, (const float *)b, (int)ldb, (float)beta, (float *)c, (int)ldc);
}

/* col (nb * P * Q, kdim) = the patches of images n0 .. n0 + nb - 1 for group grp; padding
 * reads as zero. Columns are ordered (r, s, c) like a filter row of w. */
static void im2col(const conv_plan *pl, const char *x, int64_t n0, int64_t nb, int64_t grp,
                   char *col)
{
    const mp_conv_geom *g = &pl->g;
    size_t run = (size_t)g->cg * pl->esz;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t p = 0; p < g->p; p++)
            for (int64_t q = 0; q < g->q; q++) {
                char *row = col + (size_t)(((n * g->p + p) * g->q + q) * pl->kdim) * pl->esz;
                for (int64_t r = 0; r < g->r; r++) {
                    int64_t hh = p * pl->sh - pl->ph + r * pl->dh;
                    char *dst = row + (size_t)(r * g->s) * run;
                    if (hh < 0 || hh >= g->h) {
                        memset(dst, 0, (size_t)g->s * run);
                        continue;
                    }
                    const char *src = x + (size_t)(((n0 + n) * g->h + hh) * g->w * g->c +
                                                   grp * g->cg) * pl->esz;
                    for (int64_t s = 0; s < g->s; s++, dst += run) {
                        int64_t ww = q * pl->sw - pl->pw + s * pl->dw;
                        if (ww < 0 || ww >= g->w)
                            memset(dst, 0, run);
                        else
                            memcpy(dst, src + (size_t)(ww * g->c) * pl->esz, run);
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
static void col2im(const conv_plan *pl, const char *col, int64_t n0, int64_t nb, int64_t grp,
                   char *dx)
{
    const mp_conv_geom *g = &pl->g;
    size_t run = (size_t)g->cg * pl->esz;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t p = 0; p < g->p; p++)
            for (int64_t q = 0; q < g->q; q++) {
                const char *row =
                    col + (size_t)(((n * g->p + p) * g->q + q) * pl->kdim) * pl->esz;
                for (int64_t r = 0; r < g->r; r++) {
                    int64_t hh = p * pl->sh - pl->ph + r * pl->dh;
                    if (hh < 0 || hh >= g->h)
                        continue;
                    char *dst = dx + (size_t)(((n0 + n) * g->h + hh) * g->w * g->c +
                                              grp * g->cg) * pl->esz;
                    const char *src = row + (size_t)(r * g->s) * run;
                    for (int64_t s = 0; s < g->s; s++, src += run) {
                        int64_t ww = q * pl->sw - pl->pw + s * pl->dw;
                        if (ww >= 0 && ww < g->w)
                            add_run(pl->f64, dst + (size_t)(ww * g->c) * pl->esz, src, g->cg);
                    }
                }
            }
}

/* Byte offset of element (image n0, group grp) of the image-side and output-side tensors. */
static size_t x_off(const conv_plan *pl, int64_t n0, int64_t grp)
{
    const mp_conv_geom *g = &pl->g;
    return (size_t)(n0 * g->h * g->w * g->c + grp * g->cg) * pl->esz;
}

static size_t y_off(const conv_plan *pl, int64_t n0, int64_t grp)
{
    const mp_conv_geom *g = &pl->g;
    return (size_t)(n0 * g->p * g->q * g->k + grp * g->kg) * pl->esz;
}

/* The patch matrix of one chunk, in its own workspace slot (NULL on the direct path), asked
 * for only when im2col runs. */
static char *col_matrix(const conv_plan *pl)
{
    const mp_conv_geom *g = &pl->g;
    if (pl->direct)
        return NULL;
    return mp_cpu_workspace(MP_CPU_WS_CONV_COL,
                            round64((size_t)(pl->chunk * g->p * g->q * pl->kdim) * pl->esz));
}

/* Half tensors all of one dtype go to oneDNN as they are (no widening, no workspace) when it
 * has fast kernels for them: out from a and b as mp_cpu_dnnl_conv says. Forward and backward
 * data only: oneDNN 2.6's AMX bf16 weight gradient took 250 ms a call on resnet20's shapes
 * (against about 1 ms for the other two), so the weight gradient widens to FP32. */
static bool native_half(const conv_plan *pl, mp_dnnl_kind kind, const mp_conv_desc *d,
                        const mp_tensor *a, const mp_tensor *b, mp_tensor *out)
{
    mp_dtype dt = out->dtype;
    return (dt == MP_F16 || dt == MP_BF16) && a->dtype == dt && b->dtype == dt &&
           mp_cpu_dnnl_conv(kind, dt, d, &pl->g, a->data, b->data, out->data);
}

/* Images per chunk for an op over n images whose working copies take per_image FP32 bytes an
 * image: n when nothing is widened (widen false: FP32 or FP64 work on tensors stored so),
 * else as many as fit MP_CPU_CONV_HALF_CHUNK_BYTES (at least one), evened out over the chunks.
 * Each chunk is convolved as a batch of its own: every output is the same FP32 sum of
 * products rounded once, but oneDNN may add a sum in another order for another batch size, so
 * the last bits can differ from an unchunked call's (they repeat for a given batch, chunk and
 * thread count). The filter gradient adds the chunks' FP32 sums in chunk order and rounds once
 * (backward). */
static int64_t chunk_images(int64_t n, bool widen, int64_t per_image)
{
    if (!widen || n == 0)
        return n;
    int64_t nb = per_image > 0 ? MP_CPU_CONV_HALF_CHUNK_BYTES / per_image : n;
    if (nb < 1)
        nb = 1;
    int64_t chunks = (n + nb - 1) / nb;
    return (n + chunks - 1) / chunks;
}

/* True when t is stored in another type than FP32, the working precision of half work. */
static bool widened(const mp_tensor *t) { return t->dtype != MP_F32; }

/* FP32 bytes of one image of t. */
static int64_t image_bytes(const mp_tensor *t) { return mp_tensor_row(t) * (int64_t)sizeof(float); }

/* An op from a whole image-side or output-side tensor `in` and the filter w to `out`. */
typedef mp_status (*conv_op)(const mp_conv_desc *d, const mp_tensor *in, const mp_tensor *w,
                             mp_tensor *out);

/* op over the chunks of nb images of in and out (w whole each time). */
static mp_status by_chunks(conv_op op, const mp_conv_desc *d, const mp_tensor *in,
                           const mp_tensor *w, mp_tensor *out, int64_t nb)
{
    int64_t n = in->shape[0];
    for (int64_t n0 = 0; n0 < n; n0 += nb) {
        int64_t m = n - n0 < nb ? n - n0 : nb;
        mp_tensor ic = mp_tensor_rows(in, n0, m), oc = mp_tensor_rows(out, n0, m);
        MP_TRY(op(d, &ic, w, &oc));
    }
    return MP_OK;
}

/* Images per chunk of the backward ops, whose image side xs (x or dx, one shape) and dy are
 * given: chunks only when dy is widened, and sized for two image-side tensors (x and dx) and
 * dy, so that the filter gradient alone, the data gradient alone and both at once all take the
 * same chunks (conv2d_backward must give the single ops' bits). */
static int64_t backward_chunk(const mp_tensor *xs, const mp_tensor *dy, bool f64)
{
    return chunk_images(dy->shape[0], !f64 && widened(dy), 2 * image_bytes(xs) + image_bytes(dy));
}

/* The forward over one chunk (all of x and y). */
static mp_status forward_whole(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                               mp_tensor *y)
{
    conv_plan pl;
    MP_TRY(conv_setup(d, x, w, y, "conv2d_forward", &pl));
    const mp_conv_geom *g = &pl.g;
    size_t bx = work_bytes(&pl, x), bw = work_bytes(&pl, w), by = work_bytes(&pl, y);
    char *ws = workspace(bx + bw + by + 64);
    const char *xw = as_work(&pl, x, ws, true), *ww = as_work(&pl, w, ws + bx, true);
    char *yw = as_work(&pl, y, ws + bx + bw, false);
    if (!pl.f64 && mp_cpu_dnnl_conv(MP_DNNL_FWD, MP_F32, d, g, xw, ww, yw)) {
        store_work(&pl, y, yw);
        return MP_OK;
    }
    char *col = col_matrix(&pl);
    int64_t pq = g->p * g->q;
    for (int64_t n0 = 0; n0 < g->n; n0 += pl.chunk) {
        int64_t nb = g->n - n0 < pl.chunk ? g->n - n0 : pl.chunk;
        for (int64_t grp = 0; grp < g->groups; grp++) {
            const char *a = pl.direct ? xw + x_off(&pl, n0, grp) : col;
            if (!pl.direct)
                im2col(&pl, xw, n0, nb, grp, col);
            work_gemm(&pl, false, true, nb * pq, g->kg, pl.kdim, a, pl.direct ? g->c : pl.kdim,
                      ww + (size_t)(grp * g->kg * pl.kdim) * pl.esz, pl.kdim, 0.0,
                      yw + y_off(&pl, n0, grp), g->k);
        }
    }
    store_work(&pl, y, yw);
    return MP_OK;
}

mp_status mp_cpu_conv2d_forward(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                                mp_tensor *y)
{
    conv_plan pl;
    MP_TRY(conv_setup(d, x, w, y, "conv2d_forward", &pl));
    if (pl.g.n == 0 || native_half(&pl, MP_DNNL_FWD, d, x, w, y))
        return MP_OK;
    int64_t nb = chunk_images(pl.g.n, !pl.f64 && (widened(x) || widened(y)),
                              image_bytes(x) + image_bytes(y));
    return by_chunks(forward_whole, d, x, w, y, nb);
}

/* dxw = conv_transpose(dyw, ww), all in the working precision (dxw whole, overwritten). */
static void data_work(const conv_plan *pl, const mp_conv_desc *d, const char *dyw, const char *ww,
                      char *dxw)
{
    const mp_conv_geom *g = &pl->g;
    if (!pl->f64 && mp_cpu_dnnl_conv(MP_DNNL_BWD_DATA, MP_F32, d, g, dyw, ww, dxw))
        return;
    char *col = col_matrix(pl);
    if (!pl->direct)
        memset(dxw, 0, (size_t)(g->n * g->h * g->w * g->c) * pl->esz);
    int64_t pq = g->p * g->q;
    for (int64_t n0 = 0; n0 < g->n; n0 += pl->chunk) {
        int64_t nb = g->n - n0 < pl->chunk ? g->n - n0 : pl->chunk;
        for (int64_t grp = 0; grp < g->groups; grp++) {
            const char *wg = ww + (size_t)(grp * g->kg * pl->kdim) * pl->esz;
            if (pl->direct) {
                work_gemm(pl, false, false, nb * pq, g->cg, g->kg, dyw + y_off(pl, n0, grp), g->k,
                          wg, pl->kdim, 0.0, dxw + x_off(pl, n0, grp), g->c);
                continue;
            }
            work_gemm(pl, false, false, nb * pq, pl->kdim, g->kg, dyw + y_off(pl, n0, grp), g->k,
                      wg, pl->kdim, 0.0, col, pl->kdim);
            col2im(pl, col, n0, nb, grp, dxw);
        }
    }
}

/* dww = the correlation of xw with dyw, all in the working precision (overwritten). */
static void filter_work(const conv_plan *pl, const mp_conv_desc *d, const char *xw,
                        const char *dyw, char *dww)
{
    const mp_conv_geom *g = &pl->g;
    if (!pl->f64 && mp_cpu_dnnl_conv(MP_DNNL_BWD_WEIGHTS, MP_F32, d, g, xw, dyw, dww))
        return;
    char *col = col_matrix(pl);
    int64_t pq = g->p * g->q;
    for (int64_t n0 = 0; n0 < g->n; n0 += pl->chunk) {
        int64_t nb = g->n - n0 < pl->chunk ? g->n - n0 : pl->chunk;
        for (int64_t grp = 0; grp < g->groups; grp++) {
            const char *b = pl->direct ? xw + x_off(pl, n0, grp) : col;
            if (!pl->direct)
                im2col(pl, xw, n0, nb, grp, col);
            work_gemm(pl, true, false, g->kg, pl->kdim, nb * pq, dyw + y_off(pl, n0, grp), g->k,
                      b, pl->direct ? g->c : pl->kdim, n0 == 0 ? 0.0 : 1.0,
                      dww + (size_t)(grp * g->kg * pl->kdim) * pl->esz, pl->kdim);
        }
    }
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The data gradient over one chunk (all of dy and dx). */
static mp_status data_whole(const mp_conv_desc *d, const mp_tensor *dy, const mp_tensor *w,
                            mp_tensor *dx)
{
    conv_plan pl;
    MP_TRY(conv_setup(d, dx, w, dy, "conv2d_backward_data", &pl));
    if (native_half(&pl, MP_DNNL_BWD_DATA, d, dy, w, dx))
        return MP_OK;
    size_t bdy = work_bytes(&pl, dy), bw = work_bytes(&pl, w), bdx = work_bytes(&pl, dx);
    char *ws = workspace(bdy + bw + bdx + 64);
    const char *dyw = as_work(&pl, dy, ws, true), *ww = as_work(&pl, w, ws + bdy, true);
    char *dxw = as_work(&pl, dx, ws + bdy + bw, false);
    data_work(&pl, d, dyw, ww, dxw);
    store_work(&pl, dx, dxw);
    return MP_OK;
}

mp_status mp_cpu_conv2d_backward_data(const mp_conv_desc *d, const mp_tensor *dy,
                                      const mp_tensor *w, mp_tensor *dx)
{
    conv_plan pl;
    MP_TRY(conv_setup(d, dx, w, dy, "conv2d_backward_data", &pl));
    if (pl.g.n == 0)
        return MP_OK;
    return by_chunks(data_whole, d, dy, w, dx, backward_chunk(dx, dy, pl.f64));
}

/* Both gradients from one working copy of dy: the workspace holds dy, then x and dw for the
 * filter gradient, then, once dw is stored, w and dx in their place for the data gradient:
 * dy's working copy and the larger single op's other tensors, no more than that op alone. */
static mp_status backward_whole(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                               const mp_tensor *dy, mp_tensor *dw, mp_tensor *dx, const char *op)
{
    conv_plan pl, pd;
    MP_TRY(conv_setup(d, x, dw, dy, op, &pl));
    if (dx)
        MP_TRY(conv_setup(d, dx, w, dy, op, &pd));
    size_t bdy = work_bytes(&pl, dy), bx = work_bytes(&pl, x), bw = dx ? work_bytes(&pd, w) : 0;
    size_t rest = max_size(bx + work_bytes(&pl, dw), dx ? bw + work_bytes(&pd, dx) : 0);
    char *ws = workspace(bdy + rest + 64);
    const char *dyw = as_work(&pl, dy, ws, true);
    char *dww = as_work(&pl, dw, ws + bdy + bx, false);
    filter_work(&pl, d, as_work(&pl, x, ws + bdy, true), dyw, dww);
    store_work(&pl, dw, dww);
    if (!dx || native_half(&pd, MP_DNNL_BWD_DATA, d, dy, w, dx))
        return MP_OK;
    const char *ww = as_work(&pd, w, ws + bdy, true);
    char *dxw = as_work(&pd, dx, ws + bdy + bw, false);
    data_work(&pd, d, dyw, ww, dxw);
    store_work(&pd, dx, dxw);
    return MP_OK;
}

/* Both gradients (dx NULL: the filter's alone), a chunk of images at a time when dy is widened
 * (backward_chunk: the data gradient alone takes the same chunks). Each chunk's filter gradient
 * goes to an FP32 block, the blocks are added in chunk order into an FP32 sum (the first
 * chunk's block is the sum), and the sum is rounded once into dw. */
static mp_status backward(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                          const mp_tensor *dy, mp_tensor *dw, mp_tensor *dx, const char *op)
{
    conv_plan pl, pd;
    MP_TRY(conv_setup(d, x, dw, dy, op, &pl));
    if (dx) /* the whole dx's shape: the chunks' own checks cannot see its batch */
        MP_TRY(conv_setup(d, dx, w, dy, op, &pd));
    int64_t n = pl.g.n;
    if (n == 0) {
        memset(dw->data, 0, (size_t)mp_tensor_bytes(dw)); /* all-zero bits are 0 in every dtype */
        return MP_OK;
    }
    int64_t nb = backward_chunk(x, dy, pl.f64);
    if (nb == n)
        return backward_whole(d, x, w, dy, dw, dx, op);
    size_t k = (size_t)mp_tensor_numel(dw);
    float *sum = mp_cpu_workspace(MP_CPU_WS_CONV_SUM, round64(k * sizeof(float)) * 2);
    float *part = sum + round64(k * sizeof(float)) / sizeof(float);
    mp_tensor st = mp_tensor_view(sum, MP_F32, dw->ndim, dw->shape);
    mp_tensor pt = mp_tensor_view(part, MP_F32, dw->ndim, dw->shape);
    for (int64_t n0 = 0; n0 < n; n0 += nb) {
        int64_t m = n - n0 < nb ? n - n0 : nb;
        mp_tensor xc = mp_tensor_rows(x, n0, m), dyc = mp_tensor_rows(dy, n0, m);
        mp_tensor dxc = dx ? mp_tensor_rows(dx, n0, m) : (mp_tensor){0};
        MP_TRY(backward_whole(d, &xc, w, &dyc, n0 == 0 ? &st : &pt, dx ? &dxc : NULL, op));
        if (n0 > 0)
            for (size_t i = 0; i < k; i++)
                sum[i] += part[i];
    }
    mp_cpu_convert_bulk(dw->data, dw->dtype, sum, MP_F32, k);
    return MP_OK;
}

mp_status mp_cpu_conv2d_backward(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                                 const mp_tensor *dy, mp_tensor *dw, mp_tensor *dx)
{
    return backward(d, x, w, dy, dw, dx, "conv2d_backward");
}

mp_status mp_cpu_conv2d_backward_filter(const mp_conv_desc *d, const mp_tensor *x,
                                        const mp_tensor *dy, mp_tensor *dw)
{
    return backward(d, x, NULL, dy, dw, NULL, "conv2d_backward_filter");
}
