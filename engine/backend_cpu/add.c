/* Elementwise addition on the CPU, y = a + b (residual connections). The sum is formed in the
 * accumulator of y's dtype (FP32, FP64 for FP64 outputs) and rounded once to y's dtype. a, b
 * and y may have different dtypes; y may alias a or b when the dtypes match. The sum is
 * engine/elem_rule.h's, as on the GPU. */
#include "engine/backend_cpu/cpu.h"
#include "engine/elem_rule.h"

#define ADD(T, ACC, LD, ST, a, b, y, n)                                                   \
    do {                                                                                  \
        T *yy = (y)->data;                                                                \
        if ((a)->dtype == (y)->dtype && (b)->dtype == (y)->dtype) {                       \
            const T *aa = (a)->data, *bb = (b)->data;                                     \
            for (int64_t i = 0; i < (n); i++)                                             \
                yy[i] = ST(mp_add(LD(aa[i]), LD(bb[i])));                                 \
        } else {                                                                          \
            for (int64_t i = 0; i < (n); i++)                                             \
                yy[i] = ST(mp_add((ACC)mp_load((a)->data, (a)->dtype, (size_t)i),         \
                                  (ACC)mp_load((b)->data, (b)->dtype, (size_t)i)));       \
        }                                                                                 \
    } while (0)

mp_status mp_cpu_add(const mp_tensor *a, const mp_tensor *b, mp_tensor *y)
{
    int64_t n = mp_tensor_numel(y);
    MP_CPU_REQUIRE(mp_tensor_numel(a) == n && mp_tensor_numel(b) == n, "add");
    MP_CPU_DISPATCH(y->dtype, ADD, a, b, y, n);
    return MP_OK;
}
