/* The CPU feature probe (engine/cpu_features.h): the same answer on every call, each bit what
 * GCC's own probe (__builtin_cpu_supports, which reads CPUID and XGETBV too) says where GCC
 * knows the feature, and the CPU backend's vector level the one the bits allow. */
#include "tests/util/test_util.h"

#include <stdlib.h>

#include "engine/backend_cpu/isa.h"
#include "engine/cpu_features.h"

static void test_stable(void **state)
{
    (void)state;
    unsigned f = mp_cpu_features();
    for (int i = 0; i < 3; i++)
        assert_int_equal(mp_cpu_features(), f);
    assert_int_equal(f & ~(unsigned)(MP_CPU_F16C | MP_CPU_AVX2 | MP_CPU_FMA | MP_CPU_AVX512 |
                                     MP_CPU_AVX512BF16),
                     0);
    if (f & MP_CPU_AVX512BF16)
        assert_true(f & MP_CPU_AVX512);
}

static void test_agrees_with_gcc(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    unsigned f = mp_cpu_features();
    assert_int_equal(!!(f & MP_CPU_AVX2), !!__builtin_cpu_supports("avx2"));
    assert_int_equal(!!(f & MP_CPU_FMA), !!__builtin_cpu_supports("fma"));
    assert_int_equal(!!(f & MP_CPU_AVX512),
                     __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"));
    assert_int_equal(!!(f & MP_CPU_AVX512BF16),
                     !!(f & MP_CPU_AVX512) && __builtin_cpu_supports("avx512bf16"));
    print_message("features: f16c %d avx2 %d fma %d avx512 %d avx512bf16 %d\n",
                  !!(f & MP_CPU_F16C), !!(f & MP_CPU_AVX2), !!(f & MP_CPU_FMA),
                  !!(f & MP_CPU_AVX512), !!(f & MP_CPU_AVX512BF16));
#else
    skip();
#endif
}

static void test_isa_level_from_bits(void **state)
{
    (void)state;
    if (getenv("MPDIST_CPU_ISA") || !MP_ISA_DISPATCH)
        skip(); /* the level is lowered, or only BASE is compiled */
    unsigned f = mp_cpu_features();
    mp_isa want = MP_ISA_BASE;
    if ((f & MP_CPU_F16C) && (f & MP_CPU_AVX2))
        want = (f & MP_CPU_AVX512) && (f & MP_CPU_FMA)
                   ? (f & MP_CPU_AVX512BF16 ? MP_ISA_AVX512BF16 : MP_ISA_AVX512)
                   : MP_ISA_AVX2;
    assert_int_equal(mp_cpu_isa_max(), want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stable),
        cmocka_unit_test(test_agrees_with_gcc),
        cmocka_unit_test(test_isa_level_from_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
