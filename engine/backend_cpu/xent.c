/* Softmax cross-entropy on the CPU: each row with engine/xent_rule.h's rules (the CUDA kernel's
 * own) on one thread over its columns in order, the rows spread over the threads (parallel.h),
 * each row's loss kept, then the mean loss over the batch (summed in row order in the
 * accumulator type, so any thread count gives the bits of one) and the arg-max hit count.
 * Computed in FP32 for FP32 and half logits (FP64 for FP64), as docs/ARCHITECTURE.md §2
 * requires. The row loops are compiled for AVX-512 and AVX2 too (engine/vector_clones.h, the
 * same bits): the gradient's loop vectorises, the sums' stay in column order. A label outside
 * [0, C) fails the op at once, before anything is written. */
#include <math.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/vector_clones.h"
#include "engine/xent_rule.h"

/* Defines xent_NAME: the op over rows (N, C) of logits of dtype DT with accumulator type ACC
 * (rule suffix SFX). DT is a constant, so that the rules' loads and stores by dtype compile to
 * DT's own conversion. The rows' losses and hits go to the calling thread's MP_CPU_WS_XENT
 * block, one entry each. */
#define MP_CPU_XENT(ACC, SFX, NAME, DT)                                                      \
    MP_VECTOR_CLONES static void xent_##NAME(const mp_tensor *logits, const int32_t *labels, \
                                             double eps, double g, mp_xent_result *out,      \
                                             mp_tensor *dlogits, int64_t rows, int64_t cols) \
    {                                                                                        \
        const mp_xent_coef_##SFX c = mp_xent_coef_##SFX##_make(eps, g, cols);                \
        ACC *loss = mp_cpu_workspace(MP_CPU_WS_XENT, (size_t)rows * (sizeof(ACC) + 1));      \
        uint8_t *hit = (uint8_t *)(loss + rows);                                             \
        MP_CPU_PARALLEL_FOR(rows * cols)                                                     \
        for (int64_t r = 0; r < rows; r++) {                                                 \
            const mp_xent_span s = {logits->data, dlogits ? dlogits->data : NULL,            \
                                    DT, r * cols, 0, 1};                                     \
            ACC mx = (ACC)-INFINITY, sum = 0, zsum = 0;                                      \
            int64_t best = cols;                                                             \
            mp_xent_max_##SFX(&s, &c, &mx, &best);                                           \
            mp_xent_sums_##SFX(&s, &c, mx, &sum, &zsum);                                     \
            ACC lse = mp_xent_lse_##SFX(mx, sum);                                            \
            int32_t y = labels[r];                                                           \
            ACC xy = mp_elem_load_##SFX(s.x, s.dt, s.base + y);                              \
            loss[r] = mp_xent_loss_##SFX(&c, lse, xy, zsum);                                 \
            hit[r] = best == y;                                                              \
            if (s.dx)                                                                        \
                mp_xent_grad_##SFX(&c, &s, lse, y);                                          \
        }                                                                                    \
        ACC total = 0;                                                                       \
        int64_t hits = 0;                                                                    \
        for (int64_t r = 0; r < rows; r++) {                                                 \
            total += loss[r];                                                                \
            hits += hit[r];                                                                  \
        }                                                                                    \
        out->loss = (double)(total / (ACC)rows);                                             \
        out->correct = hits;                                                                 \
    }

MP_CPU_XENT(float, f32, f32, MP_F32)
MP_CPU_XENT(float, f32, f16, MP_F16)
MP_CPU_XENT(float, f32, bf16, MP_BF16)
MP_CPU_XENT(double, f64, f64, MP_F64)

mp_status mp_cpu_softmax_xent(const mp_tensor *logits, const int32_t *labels, double smoothing,
                              double grad_scale, mp_amp_state *st, mp_xent_result *out,
                              mp_tensor *dlogits)
{
    mp_xent_result unread;
    if (out)
        mp_cpu_count_read();
    else
        out = &unread;
    int64_t rows = logits->shape[0], cols = mp_tensor_row(logits);
    MP_CPU_REQUIRE(rows > 0 && cols > 0, "softmax_xent");
    MP_CPU_REQUIRE(!dlogits || (mp_tensor_numel(dlogits) == rows * cols &&
                                dlogits->dtype == logits->dtype),
                   "softmax_xent");
    for (int64_t r = 0; r < rows; r++)
        MP_CPU_REQUIRE(mp_xent_label_ok(labels[r], cols), "softmax_xent label");
    double g = mp_xent_grad_factor(grad_scale, st, rows);
    switch (logits->dtype) {
    case MP_F32: xent_f32(logits, labels, smoothing, g, out, dlogits, rows, cols); break;
    case MP_F16: xent_f16(logits, labels, smoothing, g, out, dlogits, rows, cols); break;
    case MP_BF16: xent_bf16(logits, labels, smoothing, g, out, dlogits, rows, cols); break;
    case MP_F64: xent_f64(logits, labels, smoothing, g, out, dlogits, rows, cols); break;
    }
    return MP_OK;
}
