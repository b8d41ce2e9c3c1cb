/* GELU (tanh form) forward and backward on the CPU with engine/gelu_rule.h's arithmetic, which
 * the CUDA kernels run too. The tensors may have any dtypes each; the arithmetic is FP32 (FP64
 * when x is FP64). Elements go in tiles of MP_GELU_TILE: half tiles widened in bulk
 * (mp_convert) into accumulator buffers on the stack, computed, and rounded once in bulk into
 * the output, so an output may alias an input of its dtype (y = x, dx = dy). The tile loops are
 * compiled for AVX2 as well (engine/vector_clones.h; tests/unit/test_isa_bits.c checks the
 * bits), and, with no trapping math (engine/CMakeLists.txt), vectorised: the float rule has no
 * branch (its selects become blends). Tiles are independent, so they spread over the threads
 * (parallel.h) with the serial loop's bits. */
#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/gelu_rule.h"
#include "engine/vector_clones.h"

enum { MP_GELU_TILE = 1024 };

/* gelu_fwd_SFX: y = gelu(x); gelu_bwd_SFX: dx = dy gelu'(x); n elements, accumulator ACC of
 * dtype ADT. A tensor already in ADT is read or written where it is (mp_cpu_widen); the others
 * go through the tile's buffers. Each element is read before it is written, so an output may
 * alias an input. */
#define MP_GELU_TILES(ACC, SFX, ADT)                                                         \
    MP_VECTOR_CLONES static void gelu_fwd_##SFX(const mp_tensor *x, mp_tensor *y, int64_t n)\
    {                                                                                       \
        MP_CPU_PARALLEL_FOR(n)                                                              \
        for (int64_t i0 = 0; i0 < n; i0 += MP_GELU_TILE) {                                  \
            ACC buf[MP_GELU_TILE];                                                          \
            int64_t len = n - i0 < MP_GELU_TILE ? n - i0 : MP_GELU_TILE;                    \
            const ACC *v = mp_cpu_widen(x, i0, len, ADT, buf);                              \
            ACC *o = y->dtype == ADT ? (ACC *)mp_cpu_at(y, i0) : buf;                       \
            for (int64_t j = 0; j < len; j++)                                               \
                o[j] = mp_gelu_##SFX(v[j]);                                                 \
            if (o == buf)                                                                   \
                mp_convert(mp_cpu_at(y, i0), y->dtype, buf, ADT, (size_t)len);              \
        }                                                                                   \
    }                                                                                       \
    MP_VECTOR_CLONES static void gelu_bwd_##SFX(const mp_tensor *x, const mp_tensor *dy,     \
                                                mp_tensor *dx, int64_t n)                  \
    {                                                                                       \
        MP_CPU_PARALLEL_FOR(n)                                                              \
        for (int64_t i0 = 0; i0 < n; i0 += MP_GELU_TILE) {                                  \
            ACC xbuf[MP_GELU_TILE], gbuf[MP_GELU_TILE];                                     \
            int64_t len = n - i0 < MP_GELU_TILE ? n - i0 : MP_GELU_TILE;                    \
            const ACC *xv = mp_cpu_widen(x, i0, len, ADT, xbuf);                            \
            const ACC *g = mp_cpu_widen(dy, i0, len, ADT, gbuf);                            \
            ACC *o = dx->dtype == ADT ? (ACC *)mp_cpu_at(dx, i0) : gbuf;                    \
            for (int64_t j = 0; j < len; j++)                                               \
                o[j] = mp_gelu_grad_##SFX(xv[j], g[j]);                                     \
            if (o == gbuf)                                                                  \
                mp_convert(mp_cpu_at(dx, i0), dx->dtype, gbuf, ADT, (size_t)len);           \
        }                                                                                   \
    }
MP_GELU_TILES(float, f32, MP_F32)
MP_GELU_TILES(double, f64, MP_F64)

mp_status mp_cpu_gelu_forward(const mp_tensor *x, mp_tensor *y)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(mp_tensor_numel(y) == n, "gelu_forward");
    if (x->dtype == MP_F64)
        gelu_fwd_f64(x, y, n);
    else
        gelu_fwd_f32(x, y, n);
    return MP_OK;
}

mp_status mp_cpu_gelu_backward(const mp_tensor *x, const mp_tensor *dy, mp_tensor *dx)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(mp_tensor_numel(dy) == n && mp_tensor_numel(dx) == n, "gelu_backward");
    if (x->dtype == MP_F64)
        gelu_bwd_f64(x, dy, dx, n);
    else
        gelu_bwd_f32(x, dy, dx, n);
    return MP_OK;
}
