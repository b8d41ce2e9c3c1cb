/* The CPU backend's bf16 GEMMs where they go to oneDNN (engine/backend_cpu/gemm_dnnl.c: CPUs
 * with bf16 dot products; skipped elsewhere): every transpose and odd shapes against FP64 on the
 * same values within FP32 accumulation's error bound, FP32 and bf16 results, the same bits on
 * every call; bf16 subnormal inputs and FP32 subnormal sums are zero there and not on the
 * OpenBLAS path (the CPU capped below AVX512-BF16), which shows which path ran; the paths agree
 * within the bound; linear_backward with mixed dtypes gives its GEMMs' bits (test_ops has the
 * dtypes alike). */
#include "tests/util/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/gemm_dnnl.h"
#include "engine/backend_cpu/isa.h"
#include "engine/backend_cpu/cpu.h"

static const mp_ops *ops;

typedef struct shape {
    int64_t m, n, k;
} shape;

static const shape shapes[] = {{1, 1, 1},      {7, 5, 33},     {64, 96, 200},
                               {129, 67, 300}, {130, 300, 520}};

/* op(a) op(b) into FP32 c, and the FP64 product of the same values with the bound on FP32
 * summation's error, gamma_k * sum |a_ik b_kj| (gamma_k = k u / (1 - k u), u = 2^-24). */
typedef struct gemm_case {
    mp_tensor a, b, c, a64, b64, c64, abs64;
    int64_t m, n, k;
    bool ta, tb;
} gemm_case;

static gemm_case make_case(const shape *s, bool ta, bool tb, uint64_t seed)
{
    gemm_case g = {.m = s->m, .n = s->n, .k = s->k, .ta = ta, .tb = tb};
    int64_t as[2] = {ta ? s->k : s->m, ta ? s->m : s->k};
    int64_t bs[2] = {tb ? s->n : s->k, tb ? s->k : s->n}, cs[2] = {s->m, s->n};
    mp_rng r;
    mp_rng_seed(&r, 61, seed);
    g.a = mp_test_rand(MP_BF16, 2, as, &r, -1, 1);
    g.b = mp_test_rand(MP_BF16, 2, bs, &r, -1, 1);
    g.c = mp_test_rand(MP_F32, 2, cs, &r, -1, 1); /* garbage: the product overwrites it */
    g.a64 = mp_tensor_alloc(MP_F64, 2, as, MP_MEM_WORKSPACE);
    g.b64 = mp_tensor_alloc(MP_F64, 2, bs, MP_MEM_WORKSPACE);
    g.c64 = mp_tensor_alloc(MP_F64, 2, cs, MP_MEM_WORKSPACE);
    g.abs64 = mp_tensor_alloc(MP_F64, 2, cs, MP_MEM_WORKSPACE);
    mp_convert(g.a64.data, MP_F64, g.a.data, MP_BF16, (size_t)mp_tensor_numel(&g.a));
    mp_convert(g.b64.data, MP_F64, g.b.data, MP_BF16, (size_t)mp_tensor_numel(&g.b));
    assert_int_equal(ops->gemm(ta, tb, 1.0, &g.a64, &g.b64, 0.0, &g.c64), MP_OK);
    double *ab = g.abs64.data;
    const double *a64 = g.a64.data, *b64 = g.b64.data;
    for (int64_t i = 0; i < g.m; i++)
        for (int64_t j = 0; j < g.n; j++) {
            double sum = 0;
            for (int64_t p = 0; p < g.k; p++)
                sum += fabs(a64[ta ? p * g.m + i : i * g.k + p]) *
                       fabs(b64[tb ? j * g.k + p : p * g.n + j]);
            ab[i * g.n + j] = sum;
        }
    return g;
}

static void free_case(gemm_case *g)
{
    mp_tensor *all[] = {&g->a, &g->b, &g->c, &g->a64, &g->b64, &g->c64, &g->abs64};
    for (int i = 0; i < 7; i++)
        mp_tensor_free(all[i]);
}

/* Fails unless every element of the FP32 c is within the FP32 summation bound of the FP64
 * product. */
static void assert_within_bound(const gemm_case *g, const float *c)
{
    double ku = (double)g->k * 0x1p-24, gamma = ku / (1 - ku);
    const double *want = g->c64.data, *ab = g->abs64.data;
    for (int64_t i = 0; i < g->m * g->n; i++)
        if (!(fabs(c[i] - want[i]) <= gamma * ab[i])) {
            print_error("%lldx%lldx%lld ta %d tb %d: c[%lld] = %.9g, FP64 %.9g, bound %.3g\n",
                        (long long)g->m, (long long)g->n, (long long)g->k, g->ta, g->tb,
                        (long long)i, (double)c[i], want[i], gamma * ab[i]);
            fail();
        }
}

static int needs_bf16_products(void **state)
{
    (void)state;
    ops = mp_backend_cpu();
    if (!mp_cpu_dnnl_gemm_takes(MP_BF16)) {
        fprintf(stderr, "skipped: bf16 GEMMs do not go to oneDNN here (no oneDNN, no "
                        "AVX512-BF16, or MPDIST_CPU_GEMM=openblas)\n");
        exit(77);
    }
    return 0;
}

static void test_takes_bf16_only(void **state)
{
    (void)state;
    assert_true(mp_cpu_dnnl_gemm_takes(MP_BF16));
    assert_false(mp_cpu_dnnl_gemm_takes(MP_F16));
    assert_false(mp_cpu_dnnl_gemm_takes(MP_F32));
    mp_cpu_isa_cap(MP_ISA_AVX512);
    assert_false(mp_cpu_dnnl_gemm_takes(MP_BF16));
    mp_cpu_isa_cap(MP_ISA_AVX512BF16);
    assert_true(mp_cpu_dnnl_gemm_takes(MP_BF16));
}

/* A bf16 product that oneDNN rounded itself (half) is the FP32 product (g->c) rounded once, and
 * gemm_bias gives round(round(product) + bias), the reference's rule (bias_add after gemm), for a
 * bf16 and an FP32 bias. */
static void assert_bias_rule(const gemm_case *g, const mp_tensor *half)
{
    mp_tensor want = mp_tensor_alloc(MP_BF16, 2, g->c.shape, MP_MEM_WORKSPACE);
    mp_convert(want.data, MP_BF16, g->c.data, MP_F32, (size_t)(g->m * g->n));
    assert_memory_equal(half->data, want.data, mp_tensor_bytes(&want));
    mp_rng r;
    mp_rng_seed(&r, 63, (uint64_t)(g->m * 31 + g->n));
    int64_t bs[1] = {g->n};
    for (int i = 0; i < 2; i++) {
        mp_tensor bias = mp_test_rand(i ? MP_F32 : MP_BF16, 1, bs, &r, -1, 1);
        mp_tensor got = mp_tensor_alloc(MP_BF16, 2, g->c.shape, MP_MEM_WORKSPACE);
        mp_tensor ref = mp_tensor_alloc(MP_BF16, 2, g->c.shape, MP_MEM_WORKSPACE);
        memcpy(ref.data, want.data, mp_tensor_bytes(&want));
        assert_int_equal(ops->bias_add(&ref, &bias), MP_OK);
        assert_int_equal(ops->gemm_bias(g->ta, g->tb, &g->a, &g->b, &bias, &got), MP_OK);
        assert_memory_equal(got.data, ref.data, mp_tensor_bytes(&ref));
        mp_tensor_free(&bias);
        mp_tensor_free(&got);
        mp_tensor_free(&ref);
    }
    mp_tensor_free(&want);
}

/* FP32 c within the bound, the same bits again, and a bf16 c the FP32 product rounded once. */
static void test_products_within_bound(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            gemm_case g = make_case(&shapes[s], t & 1, t & 2, s * 4 + (uint64_t)t);
            assert_int_equal(ops->gemm(g.ta, g.tb, 1.0, &g.a, &g.b, 0.0, &g.c), MP_OK);
            assert_within_bound(&g, g.c.data);
            mp_tensor direct = mp_tensor_alloc(MP_F32, 2, g.c.shape, MP_MEM_WORKSPACE);
            assert_true(mp_cpu_dnnl_gemm(g.ta, g.tb, g.m, g.n, g.k, MP_BF16, g.a.data, g.b.data,
                                         MP_F32, direct.data)); /* oneDNN takes it: gemm ran it */
            assert_memory_equal(direct.data, g.c.data, mp_tensor_bytes(&g.c));
            mp_tensor_free(&direct);
            direct = mp_tensor_alloc(MP_BF16, 2, g.c.shape, MP_MEM_WORKSPACE);
            assert_true(mp_cpu_dnnl_gemm(g.ta, g.tb, g.m, g.n, g.k, MP_BF16, g.a.data, g.b.data,
                                         MP_BF16, direct.data)); /* and rounds it itself */
            assert_bias_rule(&g, &direct);
            mp_tensor_free(&direct);
            mp_tensor again = mp_tensor_alloc(MP_F32, 2, g.c.shape, MP_MEM_WORKSPACE);
            mp_tensor half = mp_tensor_alloc(MP_BF16, 2, g.c.shape, MP_MEM_WORKSPACE);
            mp_tensor want = mp_tensor_alloc(MP_BF16, 2, g.c.shape, MP_MEM_WORKSPACE);
            assert_int_equal(ops->gemm(g.ta, g.tb, 1.0, &g.a, &g.b, 0.0, &again), MP_OK);
            assert_memory_equal(again.data, g.c.data, mp_tensor_bytes(&g.c));
            assert_int_equal(ops->gemm(g.ta, g.tb, 1.0, &g.a, &g.b, 0.0, &half), MP_OK);
            mp_convert(want.data, MP_BF16, g.c.data, MP_F32, (size_t)(g.m * g.n));
            assert_memory_equal(half.data, want.data, mp_tensor_bytes(&half));
            mp_tensor_free(&again);
            mp_tensor_free(&half);
            mp_tensor_free(&want);
            free_case(&g);
        }
}

/* 2^-130 (a bf16 subnormal) times 2^100: 2^-30 on OpenBLAS, zero on oneDNN's bf16 products; and
 * 2^-70 times 2^-60, an FP32 subnormal 2^-130 on OpenBLAS, zero there too. */
static void test_subnormals_are_zero(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++) {
        bool capped = i & 1, in = i < 2;
        mp_cpu_isa_cap(capped ? MP_ISA_AVX512 : MP_ISA_AVX512BF16);
        int64_t s1[2] = {1, 3}, s2[2] = {3, 1}, s0[2] = {1, 1};
        mp_tensor a = mp_tensor_alloc(MP_BF16, 2, s1, MP_MEM_WORKSPACE);
        mp_tensor b = mp_tensor_alloc(MP_BF16, 2, s2, MP_MEM_WORKSPACE);
        mp_tensor c = mp_tensor_alloc(MP_F32, 2, s0, MP_MEM_WORKSPACE);
        float av[3] = {in ? 0x1p-130f : 0x1p-70f, 0, 0}, bv[3] = {in ? 0x1p100f : 0x1p-60f, 1, 1};
        mp_convert(a.data, MP_BF16, av, MP_F32, 3);
        mp_convert(b.data, MP_BF16, bv, MP_F32, 3);
        assert_int_equal(ops->gemm(false, false, 1.0, &a, &b, 0.0, &c), MP_OK);
        assert_true(*(float *)c.data == (!capped ? 0.0f : in ? 0x1p-30f : 0x1p-130f));
        mp_tensor_free(&a);
        mp_tensor_free(&b);
        mp_tensor_free(&c);
    }
    mp_cpu_isa_cap(MP_ISA_AVX512BF16);
}

/* linear_backward with an FP32 x and bf16 w and dy gives its GEMMs' bits: dw from the widened dy
 * (x is FP32), dx from dy as it is (oneDNN). */
static void test_linear_backward_mixed(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 62, 0);
    int64_t xs[2] = {70, 33}, ws[2] = {45, 33}, ys[2] = {70, 45};
    mp_tensor x = mp_test_rand(MP_F32, 2, xs, &r, -1, 1);
    mp_tensor w = mp_test_rand(MP_BF16, 2, ws, &r, -1, 1);
    mp_tensor dy = mp_test_rand(MP_BF16, 2, ys, &r, -1, 1), t[4];
    for (int i = 0; i < 4; i += 2) {
        t[i] = mp_tensor_alloc(MP_BF16, 2, ws, MP_MEM_WORKSPACE);
        t[i + 1] = mp_tensor_alloc(MP_F32, 2, xs, MP_MEM_WORKSPACE);
    }
    assert_int_equal(ops->linear_backward(&x, &w, &dy, &t[0], NULL, &t[1]), MP_OK);
    assert_int_equal(ops->gemm(true, false, 1.0, &dy, &x, 0.0, &t[2]), MP_OK);
    assert_int_equal(ops->gemm(false, false, 1.0, &dy, &w, 0.0, &t[3]), MP_OK);
    for (int i = 0; i < 2; i++)
        assert_memory_equal(t[i].data, t[i + 2].data, mp_tensor_bytes(&t[i]));
    mp_tensor *all[] = {&x, &w, &dy, &t[0], &t[1], &t[2], &t[3]};
    for (int i = 0; i < 7; i++)
        mp_tensor_free(all[i]);
}

/* The OpenBLAS path (widened operands, sgemm) on the same cases: within the same bound, and the
 * same rule for the bias. */
static void test_openblas_path_within_bound(void **state)
{
    (void)state;
    mp_cpu_isa_cap(MP_ISA_AVX512);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            gemm_case g = make_case(&shapes[s], t & 1, t & 2, s * 4 + (uint64_t)t);
            assert_int_equal(ops->gemm(g.ta, g.tb, 1.0, &g.a, &g.b, 0.0, &g.c), MP_OK);
            assert_within_bound(&g, g.c.data);
            mp_tensor half = mp_tensor_alloc(MP_BF16, 2, g.c.shape, MP_MEM_WORKSPACE);
            assert_int_equal(ops->gemm(g.ta, g.tb, 1.0, &g.a, &g.b, 0.0, &half), MP_OK);
            assert_bias_rule(&g, &half);
            mp_tensor_free(&half);
            free_case(&g);
        }
    mp_cpu_isa_cap(MP_ISA_AVX512BF16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_takes_bf16_only),
        cmocka_unit_test(test_products_within_bound),
        cmocka_unit_test(test_subnormals_are_zero),
        cmocka_unit_test(test_linear_backward_mixed),
        cmocka_unit_test(test_openblas_path_within_bound),
    };
    return cmocka_run_group_tests(tests, needs_bf16_products, NULL);
}
