/* MP_VECTOR_CLONES: marks a hot loop's function to be compiled three times, for AVX-512
 * (x86-64-v4: AVX-512 F, BW, CD, DQ, VL), for AVX2 and for the baseline x86-64, with the copy
 * chosen once when the program loads (GCC's target_clones, an ifunc; OpenMP regions inside the
 * function are cloned with it, and a clone calls the same clone of another marked function
 * directly, GCC 9 on). Our builds target the baseline so that they run on any x86-64; this gives
 * the loops the CPU's full vector width without -march (AVX-512's 64-bit multiplies make the
 * dropout hash 4.6x faster than AVX2's on a Zen 4 here, bench/results/clones-v4-2026-12-03.txt).
 * Every copy does the same IEEE operations on each element in the same order: the build says
 * -ffp-contract=off, so no clone contracts a * b + c into an FMA although x86-64-v4 (unlike
 * "avx2") has FMA (keep it), vectorising a loop over independent elements changes no element's
 * arithmetic, and reductions stay in the source's order (no -ffast-math), so all give the same
 * bits (tests/unit/test_isa_bits.c checks the library's copy, whichever the CPU takes, and an
 * AVX2 build of the sources, against the baseline). GCC 9 to 11 make no AVX-512 copy.
 * MP_VECTOR_CLONES_ON says whether the clones
 * are made: not for Clang, GCC before 9, other architectures, C libraries without ifuncs, or
 * when MP_NO_VECTOR_CLONES is defined (one baseline copy then). MP_VECTOR_CLONES_AVX2 makes the
 * AVX2 and baseline copies alone, for loops whose sums run in 8 float lanes (one AVX2 register):
 * LayerNorm's rows ran 12% slower in AVX-512 copies. */
#ifndef MP_VECTOR_CLONES_H
#define MP_VECTOR_CLONES_H

#include <stdint.h> /* its C library headers define __GLIBC__ where the library is glibc */

#if defined(__x86_64__) && defined(__GNUC__) && __GNUC__ >= 9 && !defined(__clang__) && \
    defined(__GLIBC__) && !defined(MP_NO_VECTOR_CLONES)
#define MP_VECTOR_CLONES_ON 1
#if __GNUC__ >= 12 /* target_clones takes arch=x86-64-v4 (GCC PR 101696) */
#define MP_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define MP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#define MP_VECTOR_CLONES_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define MP_VECTOR_CLONES_ON 0
#define MP_VECTOR_CLONES
#define MP_VECTOR_CLONES_AVX2
#endif

#endif
