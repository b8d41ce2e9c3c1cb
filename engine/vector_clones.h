/* MP_VECTOR_CLONES: marks a hot loop's function to be compiled twice, for AVX2 and for the
 * baseline x86-64, with the copy chosen once when the program loads (GCC's target_clones, an
 * ifunc; OpenMP regions inside the function are cloned with it). Our builds target the baseline
 * so that they run on any x86-64; this gives the loops the CPU's full vector width without
 * -march. Both copies do the same IEEE operations on each element in the same order: "avx2"
 * does not enable FMA and the build says -ffp-contract=off, vectorising a loop over independent
 * elements changes no element's arithmetic, and reductions stay in the source's order (no
 * -ffast-math), so both give the same bits (tests/unit/test_isa_bits.c checks this for the
 * kernels that use it). Empty (one baseline copy) for Clang, other architectures, C libraries
 * without ifuncs, and when MP_NO_VECTOR_CLONES is defined. */
#ifndef MP_VECTOR_CLONES_H
#define MP_VECTOR_CLONES_H

#include <stdint.h> /* its C library headers define __GLIBC__ where the library is glibc */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    !defined(MP_NO_VECTOR_CLONES)
#define MP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MP_VECTOR_CLONES
#endif

#endif
