/* Whole-tensor dtype conversions over the rank's threads; see cpu.h. */
#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"

void mp_cpu_convert_bulk(void *dst, mp_dtype dt, const void *src, mp_dtype st, size_t n)
{
    /* One contiguous piece per thread, a multiple of 64 elements (whole cache lines in every
     * dtype, whole groups of 8 for mp_convert's bulk paths) and at least MP_CPU_GRAIN. */
    size_t threads = (size_t)mp_cpu_max_threads();
    size_t piece = (n + threads - 1) / threads;
    piece = (piece + 63) / 64 * 64;
    if (piece < MP_CPU_GRAIN)
        piece = MP_CPU_GRAIN;
    int64_t pieces = (int64_t)((n + piece - 1) / piece);
    size_t dsz = mp_dtype_size(dt), ssz = mp_dtype_size(st);
    MP_CPU_PARALLEL_FOR(pieces > 1 ? (int64_t)n : 0)
    for (int64_t i = 0; i < pieces; i++) {
        size_t off = (size_t)i * piece, len = n - off < piece ? n - off : piece;
        mp_convert((char *)dst + off * dsz, dt, (const char *)src + off * ssz, st, len);
    }
}
