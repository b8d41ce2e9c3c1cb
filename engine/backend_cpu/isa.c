/* Run-time choice of the CPU backend's vector level (isa.h). */
#include "engine/backend_cpu/isa.h"

#include <stdatomic.h>

static _Atomic int isa_max = -1, isa_cap = MP_ISA_AVX512BF16;

mp_isa mp_cpu_isa_max(void)
{
    int m = atomic_load_explicit(&isa_max, memory_order_relaxed);
    if (m < 0) {
        m = MP_ISA_BASE;
#if MP_ISA_DISPATCH
        __builtin_cpu_init();
        if (__builtin_cpu_supports("x86-64-v3"))
            m = MP_ISA_AVX2;
        if (__builtin_cpu_supports("x86-64-v4"))
            m = MP_ISA_AVX512;
        if (m == MP_ISA_AVX512 && __builtin_cpu_supports("avx512bf16"))
            m = MP_ISA_AVX512BF16;
#endif
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
