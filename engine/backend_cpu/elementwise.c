/* Elementwise and row-broadcast ops on the CPU: bias add and its gradient, ReLU forward and
 * backward, scale, fill, convert. Each kernel is written once for every dtype. */
#include "engine/backend_cpu/cpu.h"

#define BIAS_ADD(T, ACC, LD, ST, y, b, rows, cols)                                 \
    do {                                                                           \
        T *yy = (y)->data;                                                         \
        for (int64_t r = 0; r < (rows); r++)                                       \
            for (int64_t j = 0; j < (cols); j++) {                                 \
                ACC v = LD(yy[r * (cols) + j]) + (ACC)mp_load((b)->data, (b)->dtype, (size_t)j); \
                yy[r * (cols) + j] = ST(v);                                        \
            }                                                                      \
    } while (0)

mp_status mp_cpu_bias_add(mp_tensor *y, const mp_tensor *b)
{
    int64_t rows = y->shape[0], cols = mp_tensor_row(y);
    MP_CPU_REQUIRE(mp_tensor_numel(b) == cols, "bias_add");
    MP_CPU_DISPATCH(y->dtype, BIAS_ADD, y, b, rows, cols);
    return MP_OK;
}

#define BIAS_GRAD(T, ACC, LD, ST, dy, db, rows, cols)                              \
    do {                                                                           \
        const T *d = (dy)->data;                                                   \
        for (int64_t j = 0; j < (cols); j++) {                                     \
            ACC s = 0;                                                             \
            for (int64_t r = 0; r < (rows); r++)                                   \
                s += LD(d[r * (cols) + j]);                                        \
            mp_store((db)->data, (db)->dtype, (size_t)j, (double)s);               \
        }                                                                          \
    } while (0)

mp_status mp_cpu_bias_grad(const mp_tensor *dy, mp_tensor *db)
{
    int64_t rows = dy->shape[0], cols = mp_tensor_row(dy);
    MP_CPU_REQUIRE(mp_tensor_numel(db) == cols, "bias_grad");
    MP_CPU_DISPATCH(dy->dtype, BIAS_GRAD, dy, db, rows, cols);
    return MP_OK;
}

#define RELU_FWD(T, ACC, LD, ST, x, y, n)                                          \
    do {                                                                           \
        const T *xx = (x)->data;                                                   \
        T *yy = (y)->data;                                                         \
        for (int64_t i = 0; i < (n); i++) {                                        \
            ACC v = LD(xx[i]);                                                     \
            yy[i] = ST(v < 0 ? (ACC)0 : v); /* NaN stays NaN, as in PyTorch */                                        \
        }                                                                          \
    } while (0)

mp_status mp_cpu_relu_forward(const mp_tensor *x, mp_tensor *y)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(mp_tensor_numel(y) == n && x->dtype == y->dtype, "relu_forward");
    MP_CPU_DISPATCH(x->dtype, RELU_FWD, x, y, n);
    return MP_OK;
}

#define RELU_BWD(T, ACC, LD, ST, y, dy, dx, n)                                     \
    do {                                                                           \
        const T *yy = (y)->data, *dd = (dy)->data;                                 \
        T *out = (dx)->data;                                                       \
        for (int64_t i = 0; i < (n); i++)                                          \
            out[i] = LD(yy[i]) > 0 ? dd[i] : ST((ACC)0);                           \
    } while (0)

mp_status mp_cpu_relu_backward(const mp_tensor *y, const mp_tensor *dy, mp_tensor *dx)
{
    int64_t n = mp_tensor_numel(y);
    MP_CPU_REQUIRE(mp_tensor_numel(dy) == n && mp_tensor_numel(dx) == n, "relu_backward");
    MP_CPU_REQUIRE(y->dtype == dy->dtype && dy->dtype == dx->dtype, "relu_backward");
    MP_CPU_DISPATCH(y->dtype, RELU_BWD, y, dy, dx, n);
    return MP_OK;
}

#define SCALE(T, ACC, LD, ST, x, alpha, n)                                         \
    do {                                                                           \
        T *xx = (x)->data;                                                         \
        ACC a = (ACC)(alpha);                                                      \
        for (int64_t i = 0; i < (n); i++)                                          \
            xx[i] = ST(LD(xx[i]) * a);                                             \
    } while (0)

mp_status mp_cpu_scale(mp_tensor *x, double alpha)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_DISPATCH(x->dtype, SCALE, x, alpha, n);
    return MP_OK;
}

#define FILL(T, ACC, LD, ST, x, value, n)                                          \
    do {                                                                           \
        T *xx = (x)->data;                                                         \
        T v = ST((ACC)(value));                                                    \
        (void)LD;                                                                  \
        for (int64_t i = 0; i < (n); i++)                                          \
            xx[i] = v;                                                             \
    } while (0)

mp_status mp_cpu_fill(mp_tensor *x, double value)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_DISPATCH(x->dtype, FILL, x, value, n);
    return MP_OK;
}

mp_status mp_cpu_convert(const mp_tensor *src, mp_tensor *dst)
{
    MP_CPU_REQUIRE(mp_tensor_numel(src) == mp_tensor_numel(dst), "convert");
    mp_convert(dst->data, dst->dtype, src->data, src->dtype, (size_t)mp_tensor_numel(src));
    return MP_OK;
}
