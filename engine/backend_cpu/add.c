/* Elementwise addition on the CPU, y = a + b (residual connections), and y = relu(a + b)
 * (add_relu). The sum is formed in the accumulator of y's dtype (FP32, FP64 for FP64 outputs)
 * and rounded once to y's dtype, after the ReLU in add_relu. a, b and y may have different
 * dtypes; y may alias a or b when the dtypes match. The sum and the ReLU are
 * engine/elem_rule.h's, as on the GPU. */
#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/vector_clones.h"
#include "engine/elem_rule.h"

enum { MP_ADD_BLOCK = 1024 };

/* A tile at a time (the tiles spread over the threads): a's and b's tiles widened in bulk to the
 * accumulator type, added (and with relu, the ReLU applied), and rounded back in bulk when y is a
 * half type. */
#define ADD(T, ACC, LD, ST, a, b, y, n, relu)                                             \
    do {                                                                                  \
        const mp_dtype adt = MP_CPU_ACC_DTYPE(ACC);                                       \
        (void)sizeof(T);                                                                  \
        (void)LD;                                                                         \
        (void)ST;                                                                         \
        MP_CPU_PARALLEL_FOR(n)                                                            \
        for (int64_t i0 = 0; i0 < (n); i0 += MP_ADD_BLOCK) {                              \
            ACC abuf[MP_ADD_BLOCK], bbuf[MP_ADD_BLOCK];                                   \
            int64_t len = (n) - i0 < MP_ADD_BLOCK ? (n) - i0 : MP_ADD_BLOCK;              \
            const ACC *va = MP_CPU_WIDEN(ACC, a, i0, len, abuf);                          \
            const ACC *vb = MP_CPU_WIDEN(ACC, b, i0, len, bbuf);                          \
            ACC *o = (y)->dtype == adt ? (ACC *)mp_cpu_at(y, i0) : abuf;                  \
            if (relu)                                                                     \
                for (int64_t i = 0; i < len; i++)                                         \
                    o[i] = mp_relu(mp_add(va[i], vb[i]));                                 \
            else                                                                          \
                for (int64_t i = 0; i < len; i++)                                         \
                    o[i] = mp_add(va[i], vb[i]);                                          \
            if (o == abuf)                                                                \
                mp_convert(mp_cpu_at(y, i0), (y)->dtype, abuf, adt, (size_t)len);         \
        }                                                                                 \
    } while (0)

MP_VECTOR_CLONES
static mp_status add(const mp_tensor *a, const mp_tensor *b, mp_tensor *y, bool relu)
{
    int64_t n = mp_tensor_numel(y);
    MP_CPU_REQUIRE(mp_tensor_numel(a) == n && mp_tensor_numel(b) == n,
                   relu ? "add_relu" : "add");
    MP_CPU_DISPATCH(y->dtype, ADD, a, b, y, n, relu);
    return MP_OK;
}

mp_status mp_cpu_add(const mp_tensor *a, const mp_tensor *b, mp_tensor *y)
{
    return add(a, b, y, false);
}

mp_status mp_cpu_add_relu(const mp_tensor *a, const mp_tensor *b, mp_tensor *y)
{
    return add(a, b, y, true);
}
