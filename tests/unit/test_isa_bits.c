/* The CPU kernels compiled for wider vectors as well as for the baseline give the baseline's
 * bits. tests/CMakeLists.txt compiles second copies of the sources that use them into this test,
 * with the wider copies turned off and their ops renamed mp_isa_*: the library's op table and
 * those baseline copies run on the same inputs and every output is compared byte for byte.
 * BatchNorm, dispatched by level (engine/backend_cpu/isa.h, half conversions by the CPU's own
 * instructions), runs at every level this CPU has, the baseline included, one after the other
 * (mp_cpu_isa_cap); its copy here is also built with MP_BN_NO_HALF_BULK, so it converts halves
 * in registers with vec8.h's portable code, the path the library's baseline takes only off
 * x86-64 (on x86-64 it widens in bulk with mp_convert). Cases: FP32, fp16, bf16 and FP64 (half
 * inputs with FP32 and with half per-channel tensors), training and evaluation forward and
 * backward (with and without dx), over channel counts inside, at and across the vector widths
 * and row counts from one lane to many chunks of engine/bn_rule.h; and again with NaN,
 * infinity, subnormal and out-of-range values among the inputs, so that the vectors that hold
 * them take the element-wise rounding path. The rest (engine/vector_clones.h's AVX-512 and
 * AVX2 clones): every op of tests/util/test_cpu_ops.h in every dtype, with 37 channels (no
 * vector width divides a row, so the vector tails run), from the library (whichever clone the
 * CPU takes) and from a third copy of the sources built for AVX2 (isa_avx2_copies, ops renamed
 * mp_avx2_*: on an AVX-512 CPU the library no longer runs its AVX2 clones). The conversions
 * themselves are checked against the element-wise definitions in test_convert_fast (mp_convert)
 * and test_vec8 (the kernels' vector loads and stores). These tests are skipped, saying why,
 * where the build makes no clones (or no AVX2 copy) or the CPU has no AVX2. The sabotage that
 * shows the test can fail: compile the copy of optim.c with "-mfma;-ffp-contract=fast" (a
 * COMPILE_OPTIONS property in tests/CMakeLists.txt), and the optimizer outputs differ; for
 * BatchNorm, drop the subnormal test of vec8.h's mp_v8_store_bf16ne (on a CPU with
 * AVX512-BF16). */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/isa.h"
#include "engine/rng.h"
#include "engine/tensor.h"
#include "engine/vector_clones.h"
#include "tests/util/test_cpu_ops.h"

/* The baseline copies (mp_isa_* under the names the test is compiled with). */
static const mp_ops base = {.batchnorm_forward = mp_cpu_batchnorm_forward,
                            .batchnorm_backward = mp_cpu_batchnorm_backward,
                            .bias_add = mp_cpu_bias_add,
                            .bias_grad = mp_cpu_bias_grad,
                            .relu_forward = mp_cpu_relu_forward,
                            .relu_backward = mp_cpu_relu_backward,
                            .gelu_forward = mp_cpu_gelu_forward,
                            .gelu_backward = mp_cpu_gelu_backward,
                            .scale = mp_cpu_scale,
                            .add = mp_cpu_add,
                            .add_relu = mp_cpu_add_relu,
                            .dropout_forward = mp_cpu_dropout_forward,
                            .dropout_backward = mp_cpu_dropout_backward,
                            .pool_forward = mp_cpu_pool_forward,
                            .pool_backward = mp_cpu_pool_backward,
                            .optim_step = mp_cpu_optim_step,
                            .grad_stats = mp_cpu_grad_stats,
                            .layernorm_forward = mp_cpu_layernorm_forward,
                            .layernorm_backward = mp_cpu_layernorm_backward,
                            .attention_forward = mp_cpu_attention_forward,
                            .attention_backward = mp_cpu_attention_backward,
                            .attention_flash_forward = mp_cpu_attention_flash_forward,
                            .attention_flash_backward = mp_cpu_attention_flash_backward,
                            .softmax_xent = mp_cpu_softmax_xent};

#ifdef MP_ISA_AVX2_COPIES
/* The AVX2 copies (tests/CMakeLists.txt: isa_avx2_copies). */
#define MP_OP(ret, op, params) ret mp_avx2_##op params;
#include "engine/op_list.h"

/* The baseline table with every op but BatchNorm's from the AVX2 copies. */
static mp_ops avx2_ops(void)
{
    mp_ops t = base;
#define MP_AVX2(op) t.op = mp_avx2_##op;
    MP_AVX2(bias_add) MP_AVX2(bias_grad) MP_AVX2(relu_forward) MP_AVX2(relu_backward)
    MP_AVX2(gelu_forward) MP_AVX2(gelu_backward) MP_AVX2(scale) MP_AVX2(add) MP_AVX2(add_relu)
    MP_AVX2(dropout_forward) MP_AVX2(dropout_backward) MP_AVX2(pool_forward)
    MP_AVX2(pool_backward) MP_AVX2(optim_step) MP_AVX2(grad_stats) MP_AVX2(layernorm_forward)
    MP_AVX2(layernorm_backward) MP_AVX2(attention_forward) MP_AVX2(attention_backward)
    MP_AVX2(attention_flash_forward) MP_AVX2(attention_flash_backward) MP_AVX2(softmax_xent)
#undef MP_AVX2
    return t;
}
#endif

/* Whether the library runs wider copies here (else both sides are the same baseline code). */
static bool have_clones(void)
{
    if (!MP_VECTOR_CLONES_ON) {
        print_message("this build makes no wider copies (engine/vector_clones.h)\n");
        return false;
    }
    if (!__builtin_cpu_supports("avx2")) {
        print_message("the CPU has no AVX2: the library runs its baseline copies\n");
        return false;
    }
#if __GNUC__ >= 12
    print_message("the library runs its %s copies\n",
                  __builtin_cpu_supports("x86-64-v4") ? "AVX-512 (x86-64-v4)" : "AVX2");
#endif
    return true;
}

/* ops' BatchNorm (mp_test_cpu_bn_run) with inputs drawn from `seed` (with special values when
 * `specials`), into o (emptied first). */
static void run_bn(const mp_ops *ops, mp_dtype dt, mp_dtype pt, int64_t M, int64_t C,
                   uint64_t seed, bool specials, mp_test_outputs *o)
{
    mp_rng r;
    mp_rng_seed(&r, 2027, seed);
    memset(o, 0, sizeof *o);
    (specials ? mp_test_cpu_bn_run_specials : mp_test_cpu_bn_run)(ops, dt, pt, M, C, &r, o);
}

/* BatchNorm at level `isa` (the library's copy) against the baseline copy, over the shapes and
 * dtypes above; with special values among the inputs when `specials`. */
static void bn_level_is_baseline(mp_isa isa, bool specials)
{
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const int64_t Cs[] = {1, 3, 8, 16, 17, 32, 64, 67}, Ms[] = {2, 7, 64, 65, 1000, 36001};
    uint64_t seed = 0;
    mp_cpu_isa_cap(isa);
    for (int d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof Cs / sizeof *Cs; c++)
            for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
                for (int half_params = 0; half_params < 2; half_params++) {
                    if (Ms[m] * Cs[c] > 600000 ||
                        (half_params && dts[d] != MP_F16 && dts[d] != MP_BF16))
                        continue;
                    mp_dtype pt = half_params ? dts[d] : dts[d] == MP_F64 ? MP_F64 : MP_F32;
                    mp_test_outputs l, i;
                    run_bn(mp_backend_cpu(), dts[d], pt, Ms[m], Cs[c], seed, specials, &l);
                    run_bn(&base, dts[d], pt, Ms[m], Cs[c], seed++, specials, &i);
                    char what[128];
                    snprintf(what, sizeof what,
                             "between level %d and the baseline BatchNorm (M %lld, C %lld%s)",
                             (int)isa, (long long)Ms[m], (long long)Cs[c],
                             specials ? ", special values" : "");
                    mp_test_outputs_same(&l, &i, what, dts[d]);
                }
}

/* Lifts the level cap and goes back to one thread, also after a failure part-way. */
static int uncap(void **state)
{
    (void)state;
    mp_cpu_isa_cap(MP_ISA_AVX512BF16);
    mp_backend_cpu_threads(1);
    return 0;
}

static void test_batchnorm_levels_are_baseline(void **state)
{
    (void)state;
    print_message("BatchNorm's levels here: 0 to %d (engine/backend_cpu/isa.h)\n",
                  (int)mp_cpu_isa_max());
    mp_backend_cpu_threads(2);
    for (int isa = MP_ISA_BASE; isa <= (int)mp_cpu_isa_max(); isa++)
        for (int specials = 0; specials < 2; specials++)
            bn_level_is_baseline((mp_isa)isa, specials);
}

/* ops and the baseline copies on the same inputs, every output byte for byte. */
static void same_as_baseline(const mp_ops *ops, const char *what)
{
    mp_backend_cpu_threads(2);
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    for (int d = 0; d < 4; d++) {
        mp_test_outputs l, i;
        mp_test_cpu_ops_run(ops, dts[d], 37, &l);
        mp_test_cpu_ops_run(&base, dts[d], 37, &i);
        mp_test_outputs_same(&l, &i, what, dts[d]);
    }
    mp_backend_cpu_threads(1);
}

static void test_library_clones_are_baseline(void **state)
{
    (void)state;
    if (!have_clones())
        skip();
    same_as_baseline(mp_backend_cpu(), "between the library's wider and the baseline ops");
}

static void test_avx2_copies_are_baseline(void **state)
{
    (void)state;
#ifdef MP_ISA_AVX2_COPIES
    if (!__builtin_cpu_supports("avx2")) {
        print_message("the CPU has no AVX2\n");
        skip();
    }
    mp_ops avx2 = avx2_ops();
    same_as_baseline(&avx2, "between the AVX2 and the baseline ops");
#else
    print_message("no AVX2 copies in this build (GCC on x86-64 only)\n");
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_batchnorm_levels_are_baseline, uncap),
        cmocka_unit_test(test_library_clones_are_baseline),
        cmocka_unit_test(test_avx2_copies_are_baseline)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
