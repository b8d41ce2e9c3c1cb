/* engine/backend_cpu/vec8.h's vector loads and stores against the element-wise functions of
 * dtype.h that define the semantics, at every level of isa.h this CPU has (the others are reported
 * and skipped): every fp16 and bf16 pattern widened, and narrowed: the boundary floats of
 * tests/util/test_floats.h, every bf16 midpoint and its neighbours, 2^20 random floats, each set
 * also in a scattered order so that NaNs and subnormals share vectors with ordinary values (the
 * levels that round a whole vector with one instruction send such vectors down the portable path).
 * Results must match bit for bit, NaNs included; the one allowance is the documented one, an fp16
 * signalling NaN that an F16C load returns quiet. The sabotages that show the test can fail: drop
 * the subnormal test (`sub`) from mp_v8_store_bf16ne, and the AVX512BF16 level's bf16 stores flush
 * subnormals to zero; drop the NaN test from mp_v8_store_f16c, and the AVX2 level's bf16 stores
 * turn some NaNs into infinities. */
#include "tests/util/test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/backend_cpu/vec8.h"
#include "engine/dtype.h"
#include "tests/util/test_floats.h"

/* Each level's vector load of 8 halves (fp16 or bf16) and store of 8 floats, compiled for that
 * level as the kernels are. */
#define LEVEL_FNS(ISA)                                                                        \
    MP_ISA_TARGET_##ISA static void load_##ISA(bool bf16, const uint16_t *h, float *out)      \
    {                                                                                         \
        const mp_v8f v = bf16 ? MP_V8_LOAD_##ISA(MP_BF16, h, 0) : MP_V8_LOAD_##ISA(MP_F16, h, 0); \
        memcpy(out, &v, sizeof v);                                                            \
    }                                                                                         \
    MP_ISA_TARGET_##ISA static void store_##ISA(bool bf16, const float *in, uint16_t *h)      \
    {                                                                                         \
        mp_v8f v;                                                                             \
        memcpy(&v, in, sizeof v);                                                             \
        if (bf16)                                                                             \
            MP_V8_STORE_##ISA(MP_BF16, h, 0, v);                                              \
        else                                                                                  \
            MP_V8_STORE_##ISA(MP_F16, h, 0, v);                                               \
    }
MP_ISA_LEVELS(LEVEL_FNS)

static const struct level {
    mp_isa isa;
    const char *name;
    void (*load)(bool, const uint16_t *, float *);
    void (*store)(bool, const float *, uint16_t *);
} levels[] = {
#define LEVEL_ROW(ISA) {MP_ISA_##ISA, #ISA, load_##ISA, store_##ISA},
    MP_ISA_LEVELS(LEVEL_ROW)};
enum { NLEVELS = sizeof levels / sizeof levels[0] };

/* Whether the CPU can run level l; says so once when it cannot. */
static bool runs(const struct level *l)
{
    if (l->isa <= mp_cpu_isa_max())
        return true;
    print_message("level %s: not on this CPU (or capped by MPDIST_CPU_ISA), skipped\n", l->name);
    return false;
}

/* Every fp16 and bf16 pattern, 8 at a time in a scattered order (NaNs among ordinary values). */
static void test_loads_every_half(void **state)
{
    (void)state;
    enum { N = 65536 };
    for (int i = 0; i < NLEVELS; i++) {
        if (!runs(&levels[i]))
            continue;
        for (int bf16 = 0; bf16 < 2; bf16++)
            for (uint32_t k = 0; k < N; k += 8) {
                uint16_t h[8];
                float f[8];
                for (int j = 0; j < 8; j++)
                    h[j] = (uint16_t)((k + (uint32_t)j) * 40503u);
                levels[i].load(bf16, h, f);
                for (int j = 0; j < 8; j++) {
                    uint32_t want = mp_f32_bits(bf16 ? mp_bf16_to_f32(h[j]) : mp_f16_to_f32(h[j]));
                    const bool snan = !bf16 && (h[j] & 0x7c00) == 0x7c00 && (h[j] & 0x3ff) &&
                                      !(h[j] & 0x200);
                    if (snan && levels[i].isa >= MP_ISA_AVX2)
                        want |= 0x00400000u; /* F16C returns a signalling NaN quiet */
                    if (mp_f32_bits(f[j]) != want)
                        fail_msg("level %s: %s 0x%04x loads as 0x%08x, element-wise 0x%08x",
                                 levels[i].name, bf16 ? "bf16" : "fp16", h[j],
                                 mp_f32_bits(f[j]), want);
                }
            }
    }
}

/* Stores n floats from src, 8 at a time, at level l, and compares with dtype.h; src is read in
 * order, and again through a scattering permutation of its indices (n a power of two). */
static void expect_stores(const struct level *l, const float *src, size_t n)
{
    for (int order = 0; order < 2; order++)
        for (int bf16 = 0; bf16 < 2; bf16++)
            for (size_t k = 0; k + 8 <= n; k += 8) {
                float f[8];
                uint16_t h[8];
                for (size_t j = 0; j < 8; j++)
                    f[j] = src[order ? ((k + j) * 40503u) & (n - 1) : k + j];
                l->store(bf16, f, h);
                for (int j = 0; j < 8; j++) {
                    uint16_t want = bf16 ? mp_f32_to_bf16(f[j]) : mp_f32_to_f16(f[j]);
                    if (h[j] != want)
                        fail_msg("level %s: 0x%08x stores as %s 0x%04x, element-wise 0x%04x",
                                 l->name, mp_f32_bits(f[j]), bf16 ? "bf16" : "fp16", h[j], want);
                }
            }
}

static void test_stores(void **state)
{
    (void)state;
    enum { NB = 1 << 19, NR = 1 << 20, NM = 1 << 18 };
    float *b = mp_alloc(NB * sizeof *b, MP_MEM_WORKSPACE);
    float *r = mp_alloc(NR * sizeof *r, MP_MEM_WORKSPACE);
    float *m = mp_alloc(NM * sizeof *m, MP_MEM_WORKSPACE);
    size_t nb = mp_test_boundary_floats(b);
    for (size_t i = nb; i < NB; i++) /* the rest: the boundary cases again, negated */
        b[i] = -b[i - nb];
    mp_test_random_floats(r, NR, 2028);
    for (uint32_t h = 0; h < 65536; h++) { /* bf16 midpoints, and either side of them */
        const uint32_t low[4] = {0x8000u, 0x7fffu, 0x8001u, 0x0001u};
        for (int j = 0; j < 4; j++)
            m[h * 4 + (uint32_t)j] = mp_bits_f32(h << 16 | low[j]);
    }
    for (int i = 0; i < NLEVELS; i++) {
        if (!runs(&levels[i]))
            continue;
        expect_stores(&levels[i], b, NB);
        expect_stores(&levels[i], r, NR);
        expect_stores(&levels[i], m, NM);
    }
    mp_free(b);
    mp_free(r);
    mp_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_loads_every_half),
                                       cmocka_unit_test(test_stores)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
