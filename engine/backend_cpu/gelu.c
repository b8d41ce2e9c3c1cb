/* GELU (tanh form) forward and backward on the CPU with engine/gelu_rule.h's arithmetic, which
 * the CUDA kernels run too. The tensors may have any dtypes each; the arithmetic is FP32 (FP64
 * when x is FP64). Elements go in tiles of MP_GELU_TILE: widened in bulk (mp_convert) into
 * accumulator buffers on the stack, computed, and rounded once in bulk into the output, so an
 * output may alias an input of its dtype (y = x, dx = dy). The tile loops are compiled for AVX2
 * as well (engine/vector_clones.h; tests/unit/test_isa_bits.c checks the bits), and, with no
 * trapping math (engine/CMakeLists.txt), vectorised: the float tanh has no branch. */
#include "engine/backend_cpu/cpu.h"
#include "engine/gelu_rule.h"
#include "engine/vector_clones.h"

enum { MP_GELU_TILE = 1024 };

/* Element `off` of tensor t's storage, whatever its dtype. */
static void *at(const mp_tensor *t, int64_t off)
{
    return (char *)t->data + (size_t)off * mp_dtype_size(t->dtype);
}

/* gelu_fwd_SFX: y = gelu(x); gelu_bwd_SFX: dx = dy gelu'(x); n elements, accumulator ACC of
 * dtype ADT. */
#define MP_GELU_TILES(ACC, SFX, ADT)                                                         \
    MP_VECTOR_CLONES static void gelu_fwd_##SFX(const mp_tensor *x, mp_tensor *y, int64_t n)\
    {                                                                                       \
        ACC v[MP_GELU_TILE];                                                                \
        for (int64_t i0 = 0; i0 < n; i0 += MP_GELU_TILE) {                                  \
            size_t len = (size_t)(n - i0 < MP_GELU_TILE ? n - i0 : MP_GELU_TILE);           \
            mp_convert(v, ADT, at(x, i0), x->dtype, len);                                   \
            for (size_t j = 0; j < len; j++)                                                \
                v[j] = mp_gelu_##SFX(v[j]);                                                 \
            mp_convert(at(y, i0), y->dtype, v, ADT, len);                                   \
        }                                                                                   \
    }                                                                                       \
    MP_VECTOR_CLONES static void gelu_bwd_##SFX(const mp_tensor *x, const mp_tensor *dy,     \
                                                mp_tensor *dx, int64_t n)                  \
    {                                                                                       \
        ACC xv[MP_GELU_TILE], g[MP_GELU_TILE];                                              \
        for (int64_t i0 = 0; i0 < n; i0 += MP_GELU_TILE) {                                  \
            size_t len = (size_t)(n - i0 < MP_GELU_TILE ? n - i0 : MP_GELU_TILE);           \
            mp_convert(xv, ADT, at(x, i0), x->dtype, len);                                  \
            mp_convert(g, ADT, at(dy, i0), dy->dtype, len);                                 \
            for (size_t j = 0; j < len; j++)                                                \
                g[j] = mp_gelu_grad_##SFX(xv[j], g[j]);                                     \
            mp_convert(at(dx, i0), dx->dtype, g, ADT, len);                                 \
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
