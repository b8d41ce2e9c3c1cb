/* Run-time choice of the CPU backend's vector level (isa.h): what CPUID says the CPU has and
 * XGETBV says the OS saves (the AVX and AVX-512 register state), asked once. Read directly, so
 * that GCC and clang builds decide alike (clang 14's __builtin_cpu_supports does not know F16C).
 * Each level needs the features its target attribute names (isa.h), and FMA for AVX-512 (which
 * clang's avx512f implies). */
#include "engine/backend_cpu/isa.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if MP_ISA_DISPATCH
#include <cpuid.h>

/* Whether every bit of `bits` is set in `reg`. */
static bool all(unsigned reg, unsigned bits) { return (reg & bits) == bits; }

static mp_isa probe(void)
{
    unsigned a, b, c, d, b7, c7, a71 = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !__get_cpuid_count(7, 0, &a, &b7, &c7, &d))
        return MP_ISA_BASE;
    if (a >= 1) { /* leaf 7 has sub-leaf 1: AVX512-BF16 */
        unsigned b71, c71, d71;
        __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71);
    }
    /* OSXSAVE, then XCR0: the OS saves SSE and AVX state (bits 1, 2), and AVX-512's opmask and
     * upper registers (5-7) */
    if (!(c & bit_OSXSAVE))
        return MP_ISA_BASE;
    unsigned xlo, xhi;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if (!all(xlo, 0x6) || !all(c, bit_AVX | bit_F16C) || !all(b7, bit_AVX2))
        return MP_ISA_BASE;
    if (!all(xlo, 0xe6) || !(c & bit_FMA) ||
        !all(b7, bit_AVX512F | bit_AVX512VL | bit_AVX512BW | bit_AVX512DQ))
        return MP_ISA_AVX2;
    return a71 & bit_AVX512BF16 ? MP_ISA_AVX512BF16 : MP_ISA_AVX512;
}
#endif

static _Atomic int isa_max = -1, isa_cap = MP_ISA_AVX512BF16;

mp_isa mp_cpu_isa_max(void)
{
    int m = atomic_load_explicit(&isa_max, memory_order_relaxed);
    if (m < 0) {
#if MP_ISA_DISPATCH
        m = (int)probe();
#else
        m = MP_ISA_BASE;
#endif
        /* MPDIST_CPU_ISA=base|avx2|avx512 lowers it, to compare the levels in a whole run */
        static const char *const names[] = {"base", "avx2", "avx512"};
        const char *v = getenv("MPDIST_CPU_ISA");
        for (int i = 0; v && i < (int)(sizeof names / sizeof names[0]); i++)
            if (strcmp(v, names[i]) == 0 && i < m)
                m = i;
        atomic_store_explicit(&isa_max, m, memory_order_relaxed);
    }
    return (mp_isa)m;
}

mp_isa mp_cpu_isa(void)
{
    const mp_isa m = mp_cpu_isa_max();
    const int cap = atomic_load_explicit(&isa_cap, memory_order_relaxed);
    return cap < (int)m ? (mp_isa)cap : m;
}

void mp_cpu_isa_cap(mp_isa cap) { atomic_store_explicit(&isa_cap, (int)cap, memory_order_relaxed); }
