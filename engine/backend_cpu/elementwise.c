/* Elementwise and row-broadcast ops on the CPU: bias add and its gradient, ReLU forward and
 * backward, scale, fill, convert. Each kernel is written once for every dtype, and its arithmetic
 * is engine/elem_rule.h's, which the CUDA kernels run too. The kernels walk memory in order in
 * tiles of MP_BIAS_BLOCK elements, half tiles widened and rounded back in bulk (mp_convert: F16C
 * or AVX2 where the CPU has them), so the loops over the accumulator type vectorise. The tiles
 * of the element-wise ops spread over the threads (parallel.h), bias_grad's by groups of
 * columns. */
#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/vector_clones.h"
#include "engine/elem_rule.h"

enum { MP_BIAS_BLOCK = 1024, MP_BIAS_COLS = 64 };

/* Row loops of the bias ops for accumulator type ACC: v (nr, len) += b (len) row by row, and
 * acc (len) += each row of v (nr, len) in row order. The arrays never overlap (restrict) and the
 * columns go in groups of 8 that the compiler vectorises at -O2; each element sees the same
 * additions in the same order either way. */
#define MP_BIAS_ROWS(ACC, SFX)                                                             \
    MP_VECTOR_CLONES                                                                       \
    static void add_rows_##SFX(ACC *restrict v, const ACC *restrict b, int64_t nr,         \
                               int64_t len)                                                \
    {                                                                                      \
        for (int64_t r = 0; r < nr; r++, v += len) {                                       \
            int64_t j = 0;                                                                 \
            for (; j + 8 <= len; j += 8)                                                   \
                for (int k = 0; k < 8; k++)                                                \
                    v[j + k] = mp_add_##SFX(v[j + k], b[j + k]);                           \
            for (; j < len; j++)                                                           \
                v[j] = mp_add_##SFX(v[j], b[j]);                                           \
        }                                                                                  \
    }                                                                                      \
    MP_VECTOR_CLONES                                                                       \
    static void sum_rows_##SFX(ACC *restrict acc, const ACC *restrict v, int64_t nr,       \
                               int64_t len)                                                \
    {                                                                                      \
        for (int64_t r = 0; r < nr; r++, v += len) {                                       \
            int64_t j = 0;                                                                 \
            for (; j + 8 <= len; j += 8)                                                   \
                for (int k = 0; k < 8; k++)                                                \
                    acc[j + k] = mp_add_##SFX(acc[j + k], v[j + k]);                       \
            for (; j < len; j++)                                                           \
                acc[j] = mp_add_##SFX(acc[j], v[j]);                                       \
        }                                                                                  \
    }
MP_BIAS_ROWS(float, f32)
MP_BIAS_ROWS(double, f64)
#define add_rows(v, b, nr, len) \
    _Generic((v), float *: add_rows_f32, double *: add_rows_f64)(v, b, nr, len)
#define sum_rows(acc, v, nr, len) \
    _Generic((acc), float *: sum_rows_f32, double *: sum_rows_f64)(acc, v, nr, len)

/* The bias ops walk (rows, cols) in tiles of up to MP_BIAS_BLOCK elements: width cw columns
 * (all of them when they fit) and, when a tile spans whole rows, rpb rows. A tile of rows
 * [r0, r0 + nr) and columns [j0, j0 + len) is contiguous: nr > 1 only when len == cols. */
#define BIAS_TILES(rows, cols, cw, rpb)                                                    \
    int64_t cw = (cols) < MP_BIAS_BLOCK ? (cols) : MP_BIAS_BLOCK;                          \
    int64_t rpb = cw == (cols) && (cols) > 0 ? MP_BIAS_BLOCK / (cols) : 1

/* y += b row by row: b is widened once per column tile, y's tiles are widened in bulk when y
 * is not in the accumulator type, and each element is rounded once, as LD(y) + b then ST. */
#define BIAS_ADD(T, ACC, LD, ST, y, b, rows, cols)                                         \
    do {                                                                                   \
        ACC bb[MP_BIAS_BLOCK];                                                             \
        const mp_dtype adt = MP_CPU_ACC_DTYPE(ACC);                                               \
        BIAS_TILES(rows, cols, cw, rpb);                                                   \
        (void)sizeof(T);                                                                   \
        (void)LD;                                                                          \
        (void)ST;                                                                          \
        for (int64_t j0 = 0; j0 < (cols); j0 += cw) {                                      \
            int64_t len = (cols) - j0 < cw ? (cols) - j0 : cw;                             \
            mp_convert(bb, adt, mp_cpu_at(b, j0), (b)->dtype, (size_t)len);                       \
            MP_CPU_PARALLEL_FOR((rows) * len)                                              \
            for (int64_t r0 = 0; r0 < (rows); r0 += rpb) {                                 \
                ACC ybuf[MP_BIAS_BLOCK];                                                   \
                int64_t nr = (rows) - r0 < rpb ? (rows) - r0 : rpb;                        \
                void *tile = mp_cpu_at(y, r0 * (cols) + j0);                                      \
                ACC *v = (y)->dtype == adt ? tile : ybuf;                                  \
                if (v == ybuf)                                                             \
                    mp_convert(ybuf, adt, tile, (y)->dtype, (size_t)(nr * len));           \
                add_rows(v, bb, nr, len);                                                  \
                if (v == ybuf)                                                             \
                    mp_convert(tile, (y)->dtype, ybuf, adt, (size_t)(nr * len));           \
            }                                                                              \
        }                                                                                  \
    } while (0)

MP_VECTOR_CLONES
mp_status mp_cpu_bias_add(mp_tensor *y, const mp_tensor *b)
{
    int64_t rows = y->shape[0], cols = mp_tensor_row(y);
    MP_CPU_REQUIRE(mp_tensor_numel(b) == cols, "bias_add");
    MP_CPU_DISPATCH(y->dtype, BIAS_ADD, y, b, rows, cols);
    return MP_OK;
}

/* db = column sums of dy, accumulated row by row into one accumulator per column (rows in
 * order 0..rows-1 for every column, as a column-by-column walk would add them), then rounded
 * once to db's dtype. Wide enough work goes in groups of MP_BIAS_COLS columns spread over the
 * threads; each column's sum is the same either way. */
#define BIAS_GRAD(T, ACC, LD, ST, dy, db, rows, cols)                                      \
    do {                                                                                   \
        const mp_dtype adt = MP_CPU_ACC_DTYPE(ACC);                                        \
        bool groups = (cols) >= 2 * MP_BIAS_COLS && (rows) * (cols) >= MP_CPU_GRAIN;       \
        int64_t cw = groups ? MP_BIAS_COLS : (cols) < MP_BIAS_BLOCK ? (cols) : MP_BIAS_BLOCK; \
        cw = cw > 0 ? cw : 1; /* OpenMP divides by the step */                           \
        int64_t rpb = cw == (cols) && (cols) > 0 ? MP_BIAS_BLOCK / (cols) : 1;             \
        (void)sizeof(T);                                                                   \
        (void)LD;                                                                          \
        (void)ST;                                                                          \
        MP_CPU_PARALLEL_FOR(groups ? (rows) * (cols) : 0)                                  \
        for (int64_t j0 = 0; j0 < (cols); j0 += cw) {                                      \
            ACC acc[MP_BIAS_BLOCK], dbuf[MP_BIAS_BLOCK];                                   \
            int64_t len = (cols) - j0 < cw ? (cols) - j0 : cw;                             \
            for (int64_t j = 0; j < len; j++)                                              \
                acc[j] = 0;                                                                \
            for (int64_t r0 = 0; r0 < (rows); r0 += rpb) {                                 \
                int64_t nr = (rows) - r0 < rpb ? (rows) - r0 : rpb;                        \
                const void *tile = mp_cpu_at(dy, r0 * (cols) + j0);                        \
                const ACC *v = (dy)->dtype == adt ? tile : dbuf;                           \
                if (v == dbuf)                                                             \
                    mp_convert(dbuf, adt, tile, (dy)->dtype, (size_t)(nr * len));          \
                sum_rows(acc, v, nr, len);                                                 \
            }                                                                              \
            mp_convert(mp_cpu_at(db, j0), (db)->dtype, acc, adt, (size_t)len);             \
        }                                                                                  \
    } while (0)

MP_VECTOR_CLONES
mp_status mp_cpu_bias_grad(const mp_tensor *dy, mp_tensor *db)
{
    int64_t rows = dy->shape[0], cols = mp_tensor_row(dy);
    MP_CPU_REQUIRE(mp_tensor_numel(db) == cols, "bias_grad");
    MP_CPU_DISPATCH(dy->dtype, BIAS_GRAD, dy, db, rows, cols);
    return MP_OK;
}

/* y = relu(x) a tile at a time: half tiles widened in bulk, the rule applied, rounded back in
 * bulk (exactly: ReLU returns one of its inputs or zero). */
#define RELU_FWD(T, ACC, LD, ST, x, y, n)                                          \
    do {                                                                           \
        (void)sizeof(T);                                                           \
        (void)LD;                                                                  \
        (void)ST;                                                                  \
        MP_CPU_PARALLEL_FOR(n)                                                     \
        for (int64_t i0 = 0; i0 < (n); i0 += MP_BIAS_BLOCK) {                      \
            ACC buf[MP_BIAS_BLOCK];                                                \
            int64_t len = (n) - i0 < MP_BIAS_BLOCK ? (n) - i0 : MP_BIAS_BLOCK;     \
            const ACC *v = MP_CPU_WIDEN(ACC, x, i0, len, buf);                          \
            ACC *o = (y)->dtype == MP_CPU_ACC_DTYPE(ACC) ? (ACC *)mp_cpu_at(y, i0) : buf;        \
            for (int64_t i = 0; i < len; i++)                                      \
                o[i] = mp_relu(v[i]);                                              \
            if (o == buf)                                                          \
                mp_convert(mp_cpu_at(y, i0), (y)->dtype, buf, MP_CPU_ACC_DTYPE(ACC), (size_t)len); \
        }                                                                          \
    } while (0)

MP_VECTOR_CLONES
mp_status mp_cpu_relu_forward(const mp_tensor *x, mp_tensor *y)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(mp_tensor_numel(y) == n && x->dtype == y->dtype, "relu_forward");
    MP_CPU_DISPATCH(x->dtype, RELU_FWD, x, y, n);
    return MP_OK;
}

/* dx = dy where y passes, else zero: y widened a tile at a time in bulk, dy's elements copied as
 * they are. */
#define RELU_BWD(T, ACC, LD, ST, y, dy, dx, n)                                     \
    do {                                                                           \
        const T *dd = (dy)->data;                                                  \
        T *out = (dx)->data;                                                       \
        const T zero = ST((ACC)0);                                                 \
        (void)LD;                                                                  \
        MP_CPU_PARALLEL_FOR(n)                                                     \
        for (int64_t i0 = 0; i0 < (n); i0 += MP_BIAS_BLOCK) {                      \
            ACC buf[MP_BIAS_BLOCK];                                                \
            int64_t len = (n) - i0 < MP_BIAS_BLOCK ? (n) - i0 : MP_BIAS_BLOCK;     \
            const ACC *v = MP_CPU_WIDEN(ACC, y, i0, len, buf);                     \
            const T *d = dd + i0;                                                  \
            T *o = out + i0;                                                       \
            for (int64_t i = 0; i < len; i++) {                                    \
                T g = d[i];                                                        \
                o[i] = mp_relu_passes(v[i]) ? g : zero;                            \
            }                                                                      \
        }                                                                          \
    } while (0)

MP_VECTOR_CLONES
mp_status mp_cpu_relu_backward(const mp_tensor *y, const mp_tensor *dy, mp_tensor *dx)
{
    int64_t n = mp_tensor_numel(y);
    MP_CPU_REQUIRE(mp_tensor_numel(dy) == n && mp_tensor_numel(dx) == n, "relu_backward");
    MP_CPU_REQUIRE(y->dtype == dy->dtype && dy->dtype == dx->dtype, "relu_backward");
    MP_CPU_DISPATCH(y->dtype, RELU_BWD, y, dy, dx, n);
    return MP_OK;
}

/* x *= alpha a tile at a time, half tiles widened and rounded back in bulk. */
#define SCALE(T, ACC, LD, ST, x, alpha, n)                                         \
    do {                                                                           \
        ACC buf[MP_BIAS_BLOCK];                                                    \
        const ACC a = (ACC)(alpha);                                                \
        (void)sizeof(T);                                                           \
        (void)LD;                                                                  \
        (void)ST;                                                                  \
        for (int64_t i0 = 0; i0 < (n); i0 += MP_BIAS_BLOCK) {                      \
            int64_t len = (n) - i0 < MP_BIAS_BLOCK ? (n) - i0 : MP_BIAS_BLOCK;     \
            ACC *v = (ACC *)MP_CPU_WIDEN(ACC, x, i0, len, buf);                         \
            for (int64_t i = 0; i < len; i++)                                      \
                v[i] = mp_scale(v[i], a);                                          \
            if (v == buf)                                                          \
                mp_convert(mp_cpu_at(x, i0), (x)->dtype, buf, MP_CPU_ACC_DTYPE(ACC), (size_t)len); \
        }                                                                          \
    } while (0)

MP_VECTOR_CLONES
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
    mp_cpu_convert_bulk(dst->data, dst->dtype, src->data, src->dtype,
                        (size_t)mp_tensor_numel(src));
    return MP_OK;
}
