/* 2-D max and average pooling on the CPU over NHWC tensors (mp_pool_desc). Max pooling ignores
 * padding, takes the first maximum of each window in row-major order (a NaN wins over numbers,
 * so it propagates) and routes the gradient to it; average pooling divides by the full window
 * area, padded zeros included (PyTorch's count_include_pad=True). x, y, dy and dx share one
 * dtype; dx must not alias x or dy.
 *
 * One image at a time (the images spread over the threads, each wholly on one): half data is
 * widened in bulk (mp_convert) into the accumulator type, the windows run over whole channel
 * rows (loops the compiler vectorises), and results are rounded once, in bulk. Backward
 * scatters: each window's gradient goes to its maximum (or, averaging, to every element of it)
 * in an accumulator per input element, the windows taken in row-major order, so an element
 * covered by several windows adds their contributions in the same order as a gather over the
 * windows covering it would, and rounds once. Max pooling whose windows tile
 * the input exactly (2x2 stride 2, the common case) finds each window's maximum from y instead,
 * in one pass without the accumulator, with the same bits. */
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/vector_clones.h"
#include "engine/pool_geom.h"

/* Whether v replaces best as a window's maximum: larger, or the first NaN. */
#define MAX_TAKES(v, best) ((v) > (best) || ((v) != (v) && (best) == (best)))

/* best[c], at[c] (when at is not NULL) = the first maximum of channel c over the window
 * [hs, he) x [ws, we) of image xn (H, W, C) in the accumulator type, and its flat position
 * h * W + w. */
#define WINDOW_MAX(ACC, xn, g, hs, he, ws, we, best, at)                                      \
    do {                                                                                      \
        const int64_t wc_ = (g)->C;                                                            \
        const ACC *first_ = (xn) + ((hs) * (g)->W + (ws)) * wc_;                               \
        for (int64_t c = 0; c < wc_; c++)                                                      \
            best[c] = first_[c];                                                              \
        if (at)                                                                               \
            for (int64_t c = 0; c < wc_; c++)                                                  \
                at[c] = (hs) * (g)->W + (ws);                                      \
        for (int64_t hh = (hs); hh < (he); hh++)                                              \
            for (int64_t ww = (hh == (hs) ? (ws) + 1 : (ws)); ww < (we); ww++) {              \
                const ACC *v_ = (xn) + (hh * (g)->W + ww) * wc_;                               \
                const int64_t pos_ = hh * (g)->W + ww;                             \
                if (at)                                                                       \
                    for (int64_t c = 0; c < wc_; c++) {                                        \
                        bool take_ = MAX_TAKES(v_[c], best[c]);                               \
                        best[c] = take_ ? v_[c] : best[c];                                    \
                        at[c] = take_ ? pos_ : at[c];                                         \
                    }                                                                         \
                else                                                                          \
                    for (int64_t c = 0; c < wc_; c++)                                          \
                        best[c] = MAX_TAKES(v_[c], best[c]) ? v_[c] : best[c];                \
            }                                                                                 \
    } while (0)

#define POOL_FWD(T, ACC, LD, ST, is_max, g, x, y)                                             \
    do {                                                                                      \
        (void)sizeof(T);                                                                      \
        (void)LD;                                                                             \
        (void)ST;                                                                             \
        const int64_t in_ = (g)->H * (g)->W * (g)->C, out_ = (g)->P * (g)->Q * (g)->C;        \
        const ACC area = (ACC)((g)->kh * (g)->kw);                                            \
        MP_CPU_PARALLEL_FOR((g)->N * in_)                                                     \
        for (int64_t n = 0; n < (g)->N; n++) {                                                \
            ACC *xbuf = mp_cpu_workspace(MP_CPU_WS_POOL, (size_t)(in_ + out_) * sizeof(ACC)); \
            ACC *ybuf = xbuf + in_;                                                           \
            const ACC *xn = MP_CPU_WIDEN(ACC, x, n * in_, in_, xbuf);                              \
            for (int64_t p = 0; p < (g)->P; p++)                                              \
                for (int64_t q = 0; q < (g)->Q; q++) {                                        \
                    int64_t hs, he, ws, we;                                                   \
                    mp_pool_span(p, (g)->sh, (g)->ph, (g)->kh, (g)->H, &hs, &he);              \
                    mp_pool_span(q, (g)->sw, (g)->pw, (g)->kw, (g)->W, &ws, &we);              \
                    ACC *o = ybuf + (p * (g)->Q + q) * (g)->C;                                \
                    if (is_max) {                                                             \
                        int64_t *none = NULL;                                                 \
                        WINDOW_MAX(ACC, xn, g, hs, he, ws, we, o, none);                      \
                        continue;                                                             \
                    }                                                                         \
                    for (int64_t c = 0; c < (g)->C; c++)                                      \
                        o[c] = 0;                                                             \
                    for (int64_t hh = hs; hh < he; hh++)                                      \
                        for (int64_t ww = ws; ww < we; ww++) {                                \
                            const ACC *v = xn + (hh * (g)->W + ww) * (g)->C;                  \
                            for (int64_t c = 0; c < (g)->C; c++)                              \
                                o[c] += v[c];                                                 \
                        }                                                                     \
                    for (int64_t c = 0; c < (g)->C; c++)                                      \
                        o[c] /= area;                                                         \
                }                                                                             \
            mp_convert(mp_cpu_at(y, n * out_), (y)->dtype, ybuf, MP_CPU_ACC_DTYPE(ACC),            \
                       (size_t)out_);                                                              \
        }                                                                                     \
    } while (0)

MP_VECTOR_CLONES
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
        (void)sizeof(T);                                                                      \
        (void)LD;                                                                             \
        (void)ST;                                                                             \
        const int64_t in_ = (g)->H * (g)->W * (g)->C, out_ = (g)->P * (g)->Q * (g)->C;        \
        const int64_t C_ = (g)->C;                                                            \
        size_t accs_ = (size_t)(2 * in_ + out_ + C_);                                         \
        const ACC area = (ACC)((g)->kh * (g)->kw);                                            \
        MP_CPU_PARALLEL_FOR((g)->N * in_)                                                     \
        for (int64_t n = 0; n < (g)->N; n++) {                                                \
            int64_t *at = mp_cpu_workspace(MP_CPU_WS_POOL,                                    \
                                           (size_t)C_ * sizeof(int64_t) + accs_ * sizeof(ACC)); \
            ACC *xbuf = (ACC *)(at + C_), *acc = xbuf + in_, *gbuf = acc + in_;               \
            ACC *best = gbuf + out_;                                                          \
            const ACC *xn = (is_max) ? MP_CPU_WIDEN(ACC, x, n * in_, in_, xbuf) : NULL;            \
            const ACC *gn = MP_CPU_WIDEN(ACC, dy, n * out_, out_, gbuf);                           \
            for (int64_t i = 0; i < in_; i++)                                                 \
                acc[i] = 0;                                                                   \
            for (int64_t p = 0; p < (g)->P; p++)                                              \
                for (int64_t q = 0; q < (g)->Q; q++) {                                        \
                    int64_t hs, he, ws, we;                                                   \
                    mp_pool_span(p, (g)->sh, (g)->ph, (g)->kh, (g)->H, &hs, &he);              \
                    mp_pool_span(q, (g)->sw, (g)->pw, (g)->kw, (g)->W, &ws, &we);              \
                    const ACC *gw = gn + (p * (g)->Q + q) * C_;                               \
                    if (is_max) {                                                             \
                        WINDOW_MAX(ACC, xn, g, hs, he, ws, we, best, at);                     \
                        for (int64_t c = 0; c < C_; c++)                                      \
                            acc[at[c] * C_ + c] += gw[c];                            \
                        continue;                                                             \
                    }                                                                         \
                    for (int64_t hh = hs; hh < he; hh++)                                      \
                        for (int64_t ww = ws; ww < we; ww++) {                                \
                            ACC *o = acc + (hh * (g)->W + ww) * C_;                           \
                            for (int64_t c = 0; c < C_; c++)                                  \
                                o[c] += gw[c];                                                \
                        }                                                                     \
                }                                                                             \
            if (!(is_max))                                                                    \
                for (int64_t i = 0; i < in_; i++)                                             \
                    acc[i] /= area;                                                           \
            mp_convert(mp_cpu_at(dx, n * in_), (dx)->dtype, acc, MP_CPU_ACC_DTYPE(ACC),            \
                       (size_t)in_);                                                               \
        }                                                                                     \
    } while (0)

/* 32 bytes from v to p; with nt (p 32-byte aligned), by non-temporal stores where the CPU has
 * them (SSE2, any x86-64): they skip the read of p's cache lines that a store which misses
 * cache makes, and leave them out of the cache. The writer calls pool_store_fence() before
 * anything else reads p. */
static inline __attribute__((always_inline)) void pool_store32(void *p, const void *v, bool nt)
{
#if defined(__x86_64__)
    if (nt) {
        __m128i lo, hi;
        memcpy(&lo, v, sizeof lo);
        memcpy(&hi, (const char *)v + sizeof lo, sizeof hi);
        _mm_stream_si128((__m128i *)p, lo);
        _mm_stream_si128((__m128i *)p + 1, hi);
        return;
    }
#endif
    (void)nt;
    memcpy(p, v, 32);
}

static inline void pool_store_fence(bool nt)
{
#if defined(__x86_64__)
    if (nt)
        _mm_sfence();
#endif
    (void)nt;
}

/* Tiled max-pool routing for accumulator type ACC (UINT: its bits). A window's element v[c]
 * gets 0 + g[c] in channel c where it is the window's maximum m[c] and no earlier element of
 * the window was, else +0. v[c] is the maximum when its bits are m[c]'s, or when both are NaN:
 * the forward took the first element of the window with the maximum's value, so no earlier
 * element has its bits, and the first NaN when there is one. Integer masks and no branches.
 * key_<SFX>: a value's bits, any NaN made the quiet NaN; vkey_<SFX> the same for a vector.
 * route_block_<SFX>: channels c .. c + width - 1 of a window (kh x kw, element (a, b) at
 * (a W + b) C of od and v) as one 32-byte vector (GCC's vector extension), the elements already
 * taken held in a register across the window; nt: od by non-temporal stores (pool_store32).
 * route_tail_<SFX>: channel c alone, the same operations. */
#define MP_POOL_ROUTE(ACC, UINT, SFX, ABS, INF, QNAN)                                         \
    typedef UINT vu_##SFX __attribute__((vector_size(32)));                                   \
    typedef ACC vf_##SFX __attribute__((vector_size(32)));                                    \
    static inline UINT key_##SFX(UINT u) { return (u & (ABS)) > (INF) ? (QNAN) : u; }         \
    static inline vu_##SFX vkey_##SFX(vu_##SFX u)                                             \
    {                                                                                         \
        const vu_##SFX is_nan = (vu_##SFX)((u & (ABS)) > (INF));                              \
        return (u & ~is_nan) | ((UINT)(QNAN) & is_nan);                                       \
    }                                                                                         \
    static inline __attribute__((always_inline)) void route_block_##SFX(                      \
        ACC *restrict od, const ACC *restrict v, const ACC *restrict m, const ACC *restrict g, \
        int64_t c, int64_t C, int64_t W, int64_t kh, int64_t kw, bool nt)                     \
    {                                                                                         \
        vu_##SFX mb, gb, vb, taken = {0};                                                     \
        vf_##SFX gs;                                                                          \
        memcpy(&mb, m + c, sizeof mb);                                                        \
        memcpy(&gs, g + c, sizeof gs);                                                        \
        gs = (ACC)0 + gs;                                                                     \
        memcpy(&gb, &gs, sizeof gb);                                                          \
        mb = vkey_##SFX(mb);                                                                  \
        for (int64_t a = 0; a < kh; a++)                                                      \
            for (int64_t b = 0; b < kw; b++) {                                                \
                const int64_t at = (a * W + b) * C + c;                                       \
                memcpy(&vb, v + at, sizeof vb);                                               \
                const vu_##SFX hit = (vu_##SFX)(vkey_##SFX(vb) == mb) & ~taken;               \
                const vu_##SFX o = gb & hit;                                                  \
                pool_store32(od + at, &o, nt);                                                \
                taken |= hit;                                                                 \
            }                                                                                 \
    }                                                                                         \
    static inline __attribute__((always_inline)) void route_tail_##SFX(                       \
        ACC *restrict od, const ACC *restrict v, const ACC *restrict m, const ACC *restrict g, \
        int64_t c, int64_t C, int64_t W, int64_t kh, int64_t kw)                              \
    {                                                                                         \
        UINT mb, gb, vb, taken = 0;                                                           \
        const ACC gs = (ACC)0 + g[c];                                                         \
        memcpy(&mb, &m[c], sizeof mb);                                                        \
        memcpy(&gb, &gs, sizeof gb);                                                          \
        mb = key_##SFX(mb);                                                                   \
        for (int64_t a = 0; a < kh; a++)                                                      \
            for (int64_t b = 0; b < kw; b++) {                                                \
                const int64_t at = (a * W + b) * C + c;                                       \
                memcpy(&vb, &v[at], sizeof vb);                                               \
                const UINT hit = ((UINT)0 - (UINT)(key_##SFX(vb) == mb)) & ~taken;            \
                const UINT o = gb & hit;                                                      \
                memcpy(&od[at], &o, sizeof o);                                                \
                taken |= hit;                                                                 \
            }                                                                                 \
    }                                                                                         \
    MP_VECTOR_CLONES                                                                          \
    static void route_##SFX(ACC *restrict od, const ACC *restrict v, const ACC *restrict m,   \
                            const ACC *restrict g, int64_t Q, int64_t C, int64_t W,           \
                            int64_t kh, int64_t kw, bool nt)                                  \
    {                                                                                         \
        enum { VW = (int)(sizeof(vu_##SFX) / sizeof(UINT)) };                                 \
        for (int64_t q = 0; q < Q; q++) {                                                     \
            const int64_t w0 = q * kw * C;                                                    \
            int64_t c = 0;                                                                    \
            for (; c + VW <= C; c += VW)                                                      \
                route_block_##SFX(od + w0, v + w0, m + q * C, g + q * C, c, C, W, kh, kw, nt); \
            for (; c < C; c++)                                                                \
                route_tail_##SFX(od + w0, v + w0, m + q * C, g + q * C, c, C, W, kh, kw);     \
        }                                                                                     \
    }
/* route_<SFX>: one output row of tiled windows (kh x kw, stride = window): window q's element
 * (a, b) at od and v + (a W + q kw + b) C, its maximum and gradient at m and g + q C; nt: od
 * 32-byte aligned and C a multiple of the vector width. */
MP_POOL_ROUTE(float, uint32_t, f32, UINT32_C(0x7fffffff), UINT32_C(0x7f800000),
              UINT32_C(0x7fc00000))
MP_POOL_ROUTE(double, uint64_t, f64, UINT64_C(0x7fffffffffffffff), UINT64_C(0x7ff0000000000000),
              UINT64_C(0x7ff8000000000000))
#define route(od, v, m, g, Q, C, W, kh, kw, nt)                                               \
    _Generic((od), float *: route_f32, double *: route_f64)(od, v, m, g, Q, C, W, kh, kw, nt)

/* Bytes of dx from which max pooling's tiled backward writes FP32 (FP64) dx by non-temporal
 * stores: more than a core's L2 on current CPUs, where the next backward (ReLU's, in place)
 * would not find it in cache anyway; and windows of at most 4 elements, so that a vector block
 * leaves few cache lines half written before the next block completes them. */
#define MP_POOL_NT_BYTES ((size_t)2 << 20)
#define MP_POOL_NT_WINDOW 4

/* Max-pool backward where the windows tile x exactly (stride = window, no padding, H = P kh,
 * W = Q kw), one pass with no accumulator: each input element belongs to one window, and gets
 * 0 + the window's gradient when it is the window's first maximum (the first element, in
 * row-major order, equal to the window's output y, or the first NaN when y is NaN: the element
 * the forward took), else 0 — the values the scatter gives, bit for bit. A row of windows at a
 * time; FP32 (FP64) data is read and written in place, half data widened and rounded back a
 * whole image at a time. A large FP32 (FP64) dx whose rows of channels are whole aligned vectors
 * is written by non-temporal stores (MP_POOL_NT_BYTES): on this project's 2-core AMD EPYC VM
 * some processes wrote dx at a third of the usual speed (max-pool backward 4.2 ms a cnn_bn O0
 * step instead of 1.3), the time spent in the stores, and the non-temporal stores took 1.1-1.2
 * ms in those processes and in the others alike. */
#define POOL_BWD_TILED(T, ACC, LD, ST, g, x, y, dy, dx)                                       \
    do {                                                                                      \
        (void)sizeof(T);                                                                      \
        (void)LD;                                                                             \
        (void)ST;                                                                             \
        const int64_t in_ = (g)->H * (g)->W * (g)->C, out_ = (g)->P * (g)->Q * (g)->C;        \
        const int64_t C_ = (g)->C;                                                            \
        const mp_dtype adt = MP_CPU_ACC_DTYPE(ACC);                                           \
        MP_CPU_PARALLEL_FOR((g)->N * in_)                                                     \
        for (int64_t n = 0; n < (g)->N; n++) {                                                \
            ACC *xbuf = mp_cpu_workspace(MP_CPU_WS_POOL,                                      \
                                         (size_t)(2 * in_ + 2 * out_) * sizeof(ACC));         \
            ACC *obuf = xbuf + in_, *ybuf = obuf + in_, *gbuf = ybuf + out_;                  \
            const ACC *xn = MP_CPU_WIDEN(ACC, x, n * in_, in_, xbuf);                         \
            const ACC *yn = MP_CPU_WIDEN(ACC, y, n * out_, out_, ybuf);                       \
            const ACC *gn = MP_CPU_WIDEN(ACC, dy, n * out_, out_, gbuf);                      \
            ACC *o = (dx)->dtype == adt ? (ACC *)mp_cpu_at(dx, n * in_) : obuf;               \
            const bool nt = o != obuf && C_ % (int64_t)(32 / sizeof(ACC)) == 0 &&             \
                            (uintptr_t)o % 32 == 0 && (g)->kh * (g)->kw <= MP_POOL_NT_WINDOW && \
                            (size_t)((g)->N * in_) * sizeof(ACC) >= MP_POOL_NT_BYTES;         \
            for (int64_t p = 0; p < (g)->P; p++) {                                            \
                const int64_t at_ = p * (g)->kh * (g)->W * C_, mp_ = p * (g)->Q * C_;         \
                route(o + at_, xn + at_, yn + mp_, gn + mp_, (g)->Q, C_, (g)->W, (g)->kh,     \
                      (g)->kw, nt);                                                           \
            }                                                                                 \
            pool_store_fence(nt);                                                             \
            if (o == obuf)                                                                    \
                mp_convert(mp_cpu_at(dx, n * in_), (dx)->dtype, obuf, adt, (size_t)in_);      \
        }                                                                                     \
    } while (0)

/* Whether max pooling's windows tile x exactly (POOL_BWD_TILED applies). */
static bool tiles_exactly(const mp_pool_desc *d, const mp_pool_geom *g)
{
    return d->max && g->sh == g->kh && g->sw == g->kw && g->ph == 0 && g->pw == 0 &&
           g->H == g->P * g->kh && g->W == g->Q * g->kw;
}

MP_VECTOR_CLONES
mp_status mp_cpu_pool_backward(const mp_pool_desc *d, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx)
{
    mp_pool_geom g;
    MP_CPU_REQUIRE(mp_pool_geometry(d, x, &g), "pool_backward");
    MP_CPU_REQUIRE(mp_pool_shaped(y, &g, g.P, g.Q) && mp_pool_shaped(dy, &g, g.P, g.Q),
                   "pool_backward");
    MP_CPU_REQUIRE(mp_pool_shaped(dx, &g, g.H, g.W), "pool_backward");
    MP_CPU_REQUIRE(y->dtype == x->dtype && dy->dtype == x->dtype && dx->dtype == x->dtype,
                   "pool_backward");
    if (tiles_exactly(d, &g)) {
        MP_CPU_DISPATCH(x->dtype, POOL_BWD_TILED, &g, x, y, dy, dx);
    } else {
        MP_CPU_DISPATCH(x->dtype, POOL_BWD, d->max, &g, x, dy, dx);
    }
    return MP_OK;
}
