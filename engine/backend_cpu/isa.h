/* The vector levels for which the CPU backend compiles a kernel more than once, each copy with
 * GCC's target attribute (MP_ISA_TARGET_<level>), the copy picked at run time by mp_cpu_isa:
 * explicit dispatch, for kernels whose copies differ in code and not only in the compiler's
 * choice of instructions (engine/vector_clones.h's clones), such as half conversions with the
 * CPU's own instructions (engine/backend_cpu/vec8.h). Every level gives the same bits. AVX2 is
 * x86-64-v3 (AVX2, F16C, FMA, BMI: the build's -ffp-contract=off keeps a * b + c unfused),
 * AVX512 is x86-64-v4 (AVX-512 F, VL, BW, DQ, CD), AVX512BF16 adds AVX512-BF16. Only BASE exists
 * where engine/vector_clones.h makes no clones (not x86-64 GCC with glibc, or
 * MP_NO_VECTOR_CLONES). */
#ifndef MP_BACKEND_CPU_ISA_H
#define MP_BACKEND_CPU_ISA_H

#include "engine/vector_clones.h"

typedef enum { MP_ISA_BASE, MP_ISA_AVX2, MP_ISA_AVX512, MP_ISA_AVX512BF16 } mp_isa;

#define MP_ISA_DISPATCH MP_VECTOR_CLONES_ON

#define MP_ISA_TARGET_BASE
#if MP_ISA_DISPATCH
#define MP_ISA_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define MP_ISA_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define MP_ISA_TARGET_AVX512BF16 __attribute__((target("arch=x86-64-v4,avx512bf16")))
/* X(level) for each level compiled, lowest first. */
#define MP_ISA_LEVELS(X) X(BASE) X(AVX2) X(AVX512) X(AVX512BF16)
/* F##_<level>(args...) for the level mp_cpu_isa() picks. */
#define MP_ISA_CALL(F, ...)                                                                   \
    do {                                                                                      \
        switch (mp_cpu_isa()) {                                                               \
        case MP_ISA_AVX512BF16: F##_AVX512BF16(__VA_ARGS__); break;                           \
        case MP_ISA_AVX512: F##_AVX512(__VA_ARGS__); break;                                   \
        case MP_ISA_AVX2: F##_AVX2(__VA_ARGS__); break;                                       \
        default: F##_BASE(__VA_ARGS__); break;                                                \
        }                                                                                     \
    } while (0)
#else
#define MP_ISA_LEVELS(X) X(BASE)
#define MP_ISA_CALL(F, ...) F##_BASE(__VA_ARGS__)
#endif

/* The highest level this CPU (and its OS) supports, and of those this build compiles: BASE
 * without dispatch. Asked of the CPU once. */
mp_isa mp_cpu_isa_max(void);

/* The level the dispatched kernels use: mp_cpu_isa_max(), or less after mp_cpu_isa_cap. */
mp_isa mp_cpu_isa(void);

/* Caps the level at `cap` (MP_ISA_AVX512BF16: no cap), for tests and benchmarks that compare
 * the levels on one CPU. Not for use while kernels run on other threads. */
void mp_cpu_isa_cap(mp_isa cap);

#endif
