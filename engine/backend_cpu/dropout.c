/* Inverted dropout on the CPU with the mask of engine/dropout_mask.h. y = x * (keep ? 1 / (1 - p)
 * : 0) in the accumulator of the tensor's dtype, rounded once: dropped elements are 0 but inf and
 * NaN still propagate, as in PyTorch, so an overflow is not hidden from the loss scaler. y may
 * alias x. The counters' offset is mp_mask_offset(offset, step), read when the op runs (the
 * staged backend's graphs run it at each launch, later than the call). */
#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/vector_clones.h"
#include "engine/dropout_mask.h"

#define DROPOUT(T, ACC, LD, ST, p, seed, offset, x, y, n)                                     \
    do {                                                                                      \
        const T *xx = (x)->data;                                                              \
        T *yy = (y)->data;                                                                    \
        const uint64_t key = mp_dropout_key(seed);                                            \
        const uint64_t thr = mp_dropout_threshold(p);                                         \
        const ACC scale = (ACC)(1.0 / (1.0 - (p)));                                           \
        MP_CPU_PARALLEL_FOR(n)                                                                \
        for (int64_t i = 0; i < (n); i++) {                                                   \
            bool keep = mp_dropout_keep(key, (offset) + (uint64_t)i, thr);                    \
            yy[i] = ST(LD(xx[i]) * (keep ? scale : (ACC)0));                                  \
        }                                                                                     \
    } while (0)

MP_VECTOR_CLONES
static mp_status dropout(const char *op, double p, uint64_t seed, uint64_t offset,
                         const int64_t *step, const mp_tensor *x, mp_tensor *y)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(p >= 0 && p < 1, op);
    MP_CPU_REQUIRE(mp_tensor_numel(y) == n && y->dtype == x->dtype, op);
    const uint64_t at = mp_mask_offset(offset, step);
    MP_CPU_DISPATCH(x->dtype, DROPOUT, p, seed, at, x, y, n);
    return MP_OK;
}

mp_status mp_cpu_dropout_forward(double p, uint64_t seed, uint64_t offset, const int64_t *step,
                                 const mp_tensor *x, mp_tensor *y)
{
    return dropout("dropout_forward", p, seed, offset, step, x, y);
}

mp_status mp_cpu_dropout_backward(double p, uint64_t seed, uint64_t offset, const int64_t *step,
                                  const mp_tensor *dy, mp_tensor *dx)
{
    return dropout("dropout_backward", p, seed, offset, step, dy, dx);
}
