/* Softmax cross-entropy on the CPU: a numerically stable log-sum-exp per row, the mean loss
 * over the batch (with label smoothing), the arg-max hit count, and the gradient
 * (softmax - target) * scale / N.
 * Computed in FP32 for FP32 and half logits (FP64 for FP64), as DESIGN §2 requires. */
#include <math.h>

#include "engine/backend_cpu/cpu.h"

#define XENT(T, ACC, LD, ST, logits, labels, eps, scale, out, dlogits, rows, cols)     \
    do {                                                                               \
        const T *x = (logits)->data;                                                   \
        T *dx = (dlogits) ? (T *)(dlogits)->data : NULL;                               \
        ACC total = 0;                                                                 \
        int64_t hits = 0;                                                              \
        for (int64_t r = 0; r < (rows); r++) {                                         \
            const T *row = x + r * (cols);                                             \
            int64_t best = 0;                                                          \
            ACC mx = LD(row[0]);                                                       \
            for (int64_t j = 1; j < (cols); j++)                                       \
                if (LD(row[j]) > mx) {                                                 \
                    mx = LD(row[j]);                                                   \
                    best = j;                                                          \
                }                                                                      \
            ACC sum = 0, zsum = 0;                                                     \
            for (int64_t j = 0; j < (cols); j++) {                                     \
                sum += (ACC)exp((double)(LD(row[j]) - mx));                            \
                zsum += LD(row[j]);                                                    \
            }                                                                          \
            ACC lse = mx + (ACC)log((double)sum);                                      \
            int32_t y = (labels)[r];                                                   \
            ACC e = (ACC)(eps), on = (ACC)1 - e, off = e / (ACC)(cols);                \
            total += on * (lse - LD(row[y])) + e * (lse - zsum / (ACC)(cols));         \
            hits += best == y;                                                         \
            if (dx) {                                                                  \
                ACC g = (ACC)((scale) / (double)(rows));                               \
                for (int64_t j = 0; j < (cols); j++) {                                 \
                    ACC p = (ACC)exp((double)(LD(row[j]) - lse));                      \
                    dx[r * (cols) + j] = ST((p - (j == y ? on + off : off)) * g);      \
                }                                                                      \
            }                                                                          \
        }                                                                              \
        (out)->loss = (double)(total / (ACC)(rows));                                   \
        (out)->correct = hits;                                                         \
    } while (0)

mp_status mp_cpu_softmax_xent(const mp_tensor *logits, const int32_t *labels, double smoothing,
                              double grad_scale, const mp_amp_state *st, mp_xent_result *out,
                              mp_tensor *dlogits)
{
    mp_xent_result unread;
    if (out)
        mp_cpu_count_read();
    else
        out = &unread;
    if (st)
        grad_scale *= st->scaler.scale;
    int64_t rows = logits->shape[0], cols = mp_tensor_row(logits);
    MP_CPU_REQUIRE(rows > 0 && cols > 0, "softmax_xent");
    MP_CPU_REQUIRE(!dlogits || (mp_tensor_numel(dlogits) == rows * cols &&
                                dlogits->dtype == logits->dtype),
                   "softmax_xent");
    for (int64_t r = 0; r < rows; r++)
        MP_CPU_REQUIRE(labels[r] >= 0 && labels[r] < cols, "softmax_xent label");
    MP_CPU_DISPATCH(logits->dtype, XENT, logits, labels, smoothing, grad_scale, out, dlogits, rows,
                    cols);
    return MP_OK;
}
