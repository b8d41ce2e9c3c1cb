/* Parallel loops of the CPU backend: OpenMP when the build has it (the per-rank thread count that
 * mp_backend_cpu_threads sets), else the plain serial loop. A loop marked MP_CPU_PARALLEL_FOR
 * must write disjoint outputs, and each of its iterations must compute what it computes serially
 * (its own accumulators, in its own order): its results are then bitwise those of the serial loop
 * whatever the thread count. Scratch an iteration needs is declared inside it, or comes from
 * mp_cpu_workspace, whose blocks are per thread. */
#ifndef MP_BACKEND_CPU_PARALLEL_H
#define MP_BACKEND_CPU_PARALLEL_H

#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Elements below which a loop stays on the calling thread: a parallel region costs a few
 * microseconds (PyTorch's at::internal::GRAIN_SIZE is 32768 too). */
#define MP_CPU_GRAIN 32768

#ifdef _OPENMP
#define MP_CPU_PRAGMA_(x) _Pragma(#x)
/* Marks the `for` loop that follows as parallel when `work` (elements it touches) reaches
 * MP_CPU_GRAIN; iterations are split into contiguous static chunks. */
#define MP_CPU_PARALLEL_FOR(work) \
    MP_CPU_PRAGMA_(omp parallel for schedule(static) if ((work) >= MP_CPU_GRAIN))
#else
#define MP_CPU_PARALLEL_FOR(work)
#endif

/* The threads a parallel loop may use (1 without OpenMP). */
static inline int mp_cpu_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#endif
