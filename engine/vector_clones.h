/* MP_VECTOR_CLONES: marks a hot loop's function to be compiled twice, for AVX2 and for the
 * baseline x86-64, with the copy chosen once when the program loads (GCC's target_clones, an
 * ifunc; OpenMP regions inside the function are cloned with it, and a clone calls the same
 * clone of another marked function directly, GCC 9 on). Our builds target the baseline so that
 * they run on any x86-64; this gives the loops the CPU's full vector width without -march.
 * Both copies do the same IEEE operations on each element in the same order: "avx2" does not
 * enable FMA, the build says -ffp-contract=off (which would also keep any later clone with FMA,
 * such as an "arch=" one, from contracting a * b + c; keep it), vectorising a loop over
 * independent elements changes no element's arithmetic, and reductions stay in the source's
 * order (no -ffast-math), so both give the same bits (tests/unit/test_isa_bits.c checks this for
 * the kernels that use it). MP_VECTOR_CLONES_ON says whether the clones are made: not for Clang,
 * GCC before 9, other architectures, C libraries without ifuncs, or when MP_NO_VECTOR_CLONES is
 * defined (one baseline copy then). */
#ifndef MP_VECTOR_CLONES_H
#define MP_VECTOR_CLONES_H

#include <stdint.h> /* its C library headers define __GLIBC__ where the library is glibc */

#if defined(__x86_64__) && defined(__GNUC__) && __GNUC__ >= 9 && !defined(__clang__) && \
    defined(__GLIBC__) && !defined(MP_NO_VECTOR_CLONES)
#define MP_VECTOR_CLONES_ON 1
#define MP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MP_VECTOR_CLONES_ON 0
#define MP_VECTOR_CLONES
#endif

#endif
