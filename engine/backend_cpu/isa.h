/* The vector levels for which the CPU backend compiles a kernel more than once, each copy with the
 * compiler's target attribute (MP_ISA_TARGET_<level>), the copy picked at run time by mp_cpu_isa
 * through a table of each level's functions (the threads' loops and OpenMP regions stay outside the
 * copies: clang 14 cannot compile those for a target attribute). Explicit dispatch, for kernels
 * whose copies differ in code and not only in the compiler's choice of instructions
 * (engine/vector_clones.h's clones), such as half conversions by the CPU's own instructions
 * (engine/backend_cpu/vec8.h). Every level's kernels give the same bits; the level also decides
 * where bf16 GEMMs run (AVX512BF16: oneDNN, gemm_dnnl.h; below it: widened for OpenBLAS), which
 * does change their bits. AVX2 is AVX2 with F16C; AVX512 adds AVX-512 F, VL, BW and DQ; AVX512BF16
 * adds AVX512-BF16 (clang's AVX-512 implies FMA, so the probe asks for it too; the build's
 * -ffp-contract=off keeps a * b + c unfused). Compiled on x86-64 by GCC 10 or later or clang 12 or
 * later, not when MP_NO_VECTOR_CLONES is defined (test_isa_bits's baseline copies); elsewhere only
 * BASE (which, for BatchNorm on x86-64, widens half data in bulk with mp_convert's run-time F16C
 * and AVX2 paths). */
#ifndef MP_BACKEND_CPU_ISA_H
#define MP_BACKEND_CPU_ISA_H

typedef enum { MP_ISA_BASE, MP_ISA_AVX2, MP_ISA_AVX512, MP_ISA_AVX512BF16 } mp_isa;

#if defined(__x86_64__) && !defined(MP_NO_VECTOR_CLONES) &&                                   \
    ((defined(__clang__) && __clang_major__ >= 12) ||                                         \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10))
#define MP_ISA_DISPATCH 1
#else
#define MP_ISA_DISPATCH 0
#endif

#define MP_ISA_TARGET_BASE
#if MP_ISA_DISPATCH
#define MP_ISA_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define MP_ISA_TARGET_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512vl,avx512bw,avx512dq")))
#define MP_ISA_TARGET_AVX512BF16                                                              \
    __attribute__((target("avx2,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")))
/* X(level) for each level compiled, lowest first. */
#define MP_ISA_LEVELS(X) X(BASE) X(AVX2) X(AVX512) X(AVX512BF16)
#else
#define MP_ISA_LEVELS(X) X(BASE)
#endif

/* The highest level this CPU (and its OS) supports, and of those this build compiles: BASE
 * without dispatch. Asked of the CPU once; MPDIST_CPU_ISA=base, avx2 or avx512 in the
 * environment lowers it (other values are ignored). */
mp_isa mp_cpu_isa_max(void);

/* The level the dispatched kernels use: mp_cpu_isa_max(), or less after mp_cpu_isa_cap. */
mp_isa mp_cpu_isa(void);

/* The level for the kernels of the file that includes this: mp_cpu_isa() where that file was
 * compiled with the levels (MP_ISA_DISPATCH), else BASE, so that a file compiled without them
 * (test_isa_bits's copies) never picks a copy it does not have. */
static inline mp_isa mp_cpu_isa_here(void) { return MP_ISA_DISPATCH ? mp_cpu_isa() : MP_ISA_BASE; }

/* Caps the level at `cap` (MP_ISA_AVX512BF16: no cap), for tests and benchmarks that compare the
 * levels on one CPU (below AVX512BF16 bf16 GEMMs also leave oneDNN: gemm_dnnl.h). Not for use while
 * kernels run on other threads. */
void mp_cpu_isa_cap(mp_isa cap);

#endif
