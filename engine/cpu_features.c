/* The CPU feature probe; see cpu_features.h. */
#include "engine/cpu_features.h"

#include <stdatomic.h>
#include <stdbool.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* Whether every bit of `bits` is set in `reg`. */
static bool all(unsigned reg, unsigned bits) { return (reg & bits) == bits; }

static unsigned probe(void)
{
    unsigned a, b, c, d, b7 = 0, c7, d7, a71 = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7) && a >= 1) { /* sub-leaf 1: AVX512-BF16 */
        unsigned b71, c71, d71;
        __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71);
    }
    /* OSXSAVE, then XCR0: the OS saves SSE and AVX state (bits 1, 2), and AVX-512's opmask and
     * upper registers (5-7) */
    if (!(c & bit_OSXSAVE))
        return 0;
    unsigned xlo, xhi;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if (!all(xlo, 0x6) || !(c & bit_AVX))
        return 0;
    unsigned f = (c & bit_F16C ? MP_CPU_F16C : 0) | (b7 & bit_AVX2 ? MP_CPU_AVX2 : 0) |
                 (c & bit_FMA ? MP_CPU_FMA : 0);
    if (all(xlo, 0xe6) && all(b7, bit_AVX512F | bit_AVX512VL | bit_AVX512BW | bit_AVX512DQ))
        f |= MP_CPU_AVX512 | (a71 & bit_AVX512BF16 ? MP_CPU_AVX512BF16 : 0);
    return f;
}
#else
static unsigned probe(void) { return 0; }
#endif

unsigned mp_cpu_features(void)
{
    static _Atomic int cached = -1; /* -1: not yet asked */
    int f = atomic_load_explicit(&cached, memory_order_relaxed);
    if (f < 0) {
        f = (int)probe();
        atomic_store_explicit(&cached, f, memory_order_relaxed);
    }
    return (unsigned)f;
}
