/* Run-time choice of the CPU backend's vector level (isa.h) from what the CPU has and the OS
 * saves (mp_cpu_features). */
#include "engine/backend_cpu/isa.h"

#include "engine/cpu_features.h"
#include "engine/env_choice.h"

#include <stdatomic.h>

#if MP_ISA_DISPATCH
/* The highest level whose target attribute's features (isa.h) the CPU and OS have, with FMA for
 * AVX-512 (which clang's avx512f implies). */
static mp_isa probe(void)
{
    unsigned f = mp_cpu_features();
    if ((f & (MP_CPU_F16C | MP_CPU_AVX2)) != (MP_CPU_F16C | MP_CPU_AVX2))
        return MP_ISA_BASE;
    if ((f & (MP_CPU_FMA | MP_CPU_AVX512)) != (MP_CPU_FMA | MP_CPU_AVX512))
        return MP_ISA_AVX2;
    return f & MP_CPU_AVX512BF16 ? MP_ISA_AVX512BF16 : MP_ISA_AVX512;
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
        /* MPDIST_CPU_ISA=base|avx2|avx512 (MP_ISA_BASE, _AVX2, _AVX512) lowers it, to compare
         * the levels in a whole run */
        int i = mp_env_choice(MP_ENV_CPU_ISA);
        if (i >= 0 && i < m)
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
