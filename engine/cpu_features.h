/* What the CPU has and its OS saves, for the code paths chosen at run time: mp_convert's and
 * mp_half_add's F16C and AVX2 loops (engine/dtype.c) and the CPU backend's vector levels
 * (engine/backend_cpu/isa.h). One probe for all of them. */
#ifndef MP_CPU_FEATURES_H
#define MP_CPU_FEATURES_H

enum {
    MP_CPU_F16C = 1u << 0,       /* F16C and AVX, the OS saving the AVX state */
    MP_CPU_AVX2 = 1u << 1,       /* AVX2 and AVX, the OS saving the AVX state */
    MP_CPU_FMA = 1u << 2,        /* FMA3, the OS saving the AVX state */
    MP_CPU_AVX512 = 1u << 3,     /* AVX-512 F, VL, BW and DQ, the OS saving the opmask and
                                    upper registers too */
    MP_CPU_AVX512BF16 = 1u << 4, /* AVX512-BF16, with MP_CPU_AVX512 */
};

/* The MP_CPU_* bits this CPU and OS have: CPUID and XGETBV read directly, so that GCC and clang
 * builds decide alike (clang 14's __builtin_cpu_supports does not know F16C), and once (CPUID
 * traps in VMs; the answer is cached). 0 off x86-64 or without GCC's or clang's <cpuid.h>.
 * Thread-safe. */
unsigned mp_cpu_features(void);

#endif
