/* The element-wise ops' arithmetic, written once for every backend (MP_HD): add (residuals),
 * bias_add and bias_grad's running column sums, scale, ReLU forward and backward. Each rule
 * works in the accumulator type ACC (float for FP32 and half data, double for FP64: suffix f32 /
 * f64) on values widened from storage, and the caller rounds the result once when it stores it.
 * The CPU kernels apply the rules to their typed or bulk-converted buffers (for speed); the
 * mp_*_at bodies below apply them to element i by runtime dtype (engine/cast_rule.h, FP32
 * arithmetic) and are the CUDA kernels' whole per-element work, so a CPU test that runs them
 * over a tensor runs what the GPU runs. fill has no arithmetic: its body is one
 * mp_elem_store_f32. Both backends give the same bits except in NaN payloads: GPU arithmetic
 * returns the canonical NaN where the CPU's keeps an operand's payload. In C, mp_add(a, b) etc.
 * pick the f32 or f64 rule from the argument's type (_Generic), for the CPU's kernels written
 * once for every accumulator. */
#ifndef MP_ELEM_RULE_H
#define MP_ELEM_RULE_H

#include <stdbool.h>

#include "engine/cast_rule.h"
#include "engine/hd.h"

/* Defines, for accumulator type ACC:
 *   mp_add_SFX(a, b): a + b;
 *   mp_scale_SFX(v, a): v * a;
 *   mp_relu_SFX(v): max(v, 0) with -0 to +0, a NaN stays NaN (as in PyTorch). It commutes
 *     with rounding to any dtype (rounding is monotone and keeps the sign: v <= 0 rounds to a
 *     value <= 0, v > 0 to one >= +0), so relu(round(v)) == round(relu(v)) bit for bit, and a
 *     fused op (add_relu, BatchNorm with ReLU) may apply it before its one rounding;
 *   mp_relu_passes_SFX(y): whether ReLU backward passes the gradient where the forward output
 *     is y: y > 0 (0 and NaN: it does not, dx is 0). */
#define MP_ELEM_RULES(ACC, SFX)                                                             \
    MP_HD static inline ACC mp_add_##SFX(ACC a, ACC b) { return a + b; }                    \
    MP_HD static inline ACC mp_scale_##SFX(ACC v, ACC a) { return v * a; }                  \
    MP_HD static inline ACC mp_relu_##SFX(ACC v) { return v <= (ACC)0 ? (ACC)0 : v; }       \
    MP_HD static inline bool mp_relu_passes_##SFX(ACC y) { return y > (ACC)0; }

MP_ELEM_RULES(float, f32)
MP_ELEM_RULES(double, f64)

/* y[i] += b[i % cols]: bias_add over y (rows, cols). */
MP_HD static inline void mp_bias_add_at(void *y, mp_dtype yt, const void *b, mp_dtype bt,
                                        int64_t cols, int64_t i)
{
    float v = mp_add_f32(mp_elem_load_f32(y, yt, i), mp_elem_load_f32(b, bt, i % cols));
    mp_elem_store_f32(y, yt, i, v);
}

/* y[i] = a[i] + b[i]: add, each operand of its own dtype. */
MP_HD static inline void mp_add_at(const void *a, mp_dtype at, const void *b, mp_dtype bt, void *y,
                                   mp_dtype yt, int64_t i)
{
    float v = mp_add_f32(mp_elem_load_f32(a, at, i), mp_elem_load_f32(b, bt, i));
    mp_elem_store_f32(y, yt, i, v);
}

/* y[i] = relu(a[i] + b[i]): add_relu, the sum and the ReLU in FP32, rounded once (the bits of
 * mp_add_at then mp_relu_forward_at in place, by the commuting rule above). */
MP_HD static inline void mp_add_relu_at(const void *a, mp_dtype at, const void *b, mp_dtype bt,
                                        void *y, mp_dtype yt, int64_t i)
{
    float v = mp_add_f32(mp_elem_load_f32(a, at, i), mp_elem_load_f32(b, bt, i));
    mp_elem_store_f32(y, yt, i, mp_relu_f32(v));
}

/* x[i] *= a: scale (a is alpha rounded to float). */
MP_HD static inline void mp_scale_at(void *x, mp_dtype dt, float a, int64_t i)
{
    mp_elem_store_f32(x, dt, i, mp_scale_f32(mp_elem_load_f32(x, dt, i), a));
}

/* y[i] = max(x[i], 0): relu_forward. */
MP_HD static inline void mp_relu_forward_at(const void *x, void *y, mp_dtype dt, int64_t i)
{
    mp_elem_store_f32(y, dt, i, mp_relu_f32(mp_elem_load_f32(x, dt, i)));
}

/* dx[i] = y[i] > 0 ? dy[i] : 0: relu_backward (dy's element copied as it is). */
MP_HD static inline void mp_relu_backward_at(const void *y, const void *dy, void *dx, mp_dtype dt,
                                             int64_t i)
{
    if (mp_relu_passes_f32(mp_elem_load_f32(y, dt, i)))
        mp_elem_copy(dx, dy, dt, i);
    else
        mp_elem_store_f32(dx, dt, i, 0.0f);
}

/* dst[i] = src[i] rounded to dst's dtype: convert. */
MP_HD static inline void mp_convert_at(const void *src, mp_dtype st, void *dst, mp_dtype dt,
                                       int64_t i)
{
    mp_elem_store_f32(dst, dt, i, mp_elem_load_f32(src, st, i));
}

#ifndef __cplusplus
#define MP_ELEM_PICK(NAME, x) _Generic((x), float: NAME##_f32, double: NAME##_f64)
#define mp_add(a, b) MP_ELEM_PICK(mp_add, a)(a, b)
#define mp_scale(v, a) MP_ELEM_PICK(mp_scale, v)(v, a)
#define mp_relu(v) MP_ELEM_PICK(mp_relu, v)(v)
#define mp_relu_passes(y) MP_ELEM_PICK(mp_relu_passes, y)(y)
#endif

#endif
