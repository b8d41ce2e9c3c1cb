/* Inverted dropout on the CPU. The mask is a pure function of (seed, counter), counter =
 * offset + i for element i, so backward recomputes it and every backend draws the same one:
 *   key  = mix64(seed + 0x9e3779b97f4a7c15)
 *   bits = mix64(key ^ (counter * 0x9e3779b97f4a7c15))
 *   keep = (bits >> 32) >= ceil(p * 2^32)      (a uniform u = (bits >> 32) / 2^32 >= p)
 * where mix64 is splitmix64's finaliser. The comparison is on integers, so no backend's float
 * rounding of p can flip an element. y = x * (keep ? 1 / (1 - p) : 0) in the accumulator of the
 * tensor's dtype, rounded once: dropped elements are 0 but inf and NaN still propagate, as in
 * PyTorch, so an overflow is not hidden from the loss scaler. y may alias x. */
#include <math.h>

#include "engine/backend_cpu/cpu.h"

#define MP_GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define DROPOUT(T, ACC, LD, ST, p, seed, offset, x, y, n)                                     \
    do {                                                                                      \
        const T *xx = (x)->data;                                                              \
        T *yy = (y)->data;                                                                    \
        const uint64_t key = mix64((seed) + MP_GOLDEN);                                       \
        const uint64_t thr = (uint64_t)ceil((p) * 4294967296.0);                              \
        const ACC scale = (ACC)(1.0 / (1.0 - (p)));                                           \
        for (int64_t i = 0; i < (n); i++) {                                                   \
            uint64_t bits = mix64(key ^ (((offset) + (uint64_t)i) * MP_GOLDEN));              \
            yy[i] = ST(LD(xx[i]) * ((bits >> 32) >= thr ? scale : (ACC)0));                   \
        }                                                                                     \
    } while (0)

static mp_status dropout(const char *op, double p, uint64_t seed, uint64_t offset,
                         const mp_tensor *x, mp_tensor *y)
{
    int64_t n = mp_tensor_numel(x);
    MP_CPU_REQUIRE(p >= 0 && p < 1, op);
    MP_CPU_REQUIRE(mp_tensor_numel(y) == n && y->dtype == x->dtype, op);
    MP_CPU_DISPATCH(x->dtype, DROPOUT, p, seed, offset, x, y, n);
    return MP_OK;
}

mp_status mp_cpu_dropout_forward(double p, uint64_t seed, uint64_t offset, const mp_tensor *x,
                                 mp_tensor *y)
{
    return dropout("dropout_forward", p, seed, offset, x, y);
}

mp_status mp_cpu_dropout_backward(double p, uint64_t seed, uint64_t offset, const mp_tensor *dy,
                                  mp_tensor *dx)
{
    return dropout("dropout_backward", p, seed, offset, dy, dx);
}
