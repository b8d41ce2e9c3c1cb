/* The tensor-core kernels of tiled attention (engine/backend_cuda/attention_mma_kernels.cuh) run
 * on the CPU over the device stand-in (tests/emu/cuda_emu.h), against attention computed directly
 * in FP64 from the same half inputs: out, the statistics (m, l) and dqkv (backward from the
 * emulated forward's out and statistics), per element within a relative bound of the sum of
 * the absolute terms (the half roundings of P' and dS, the output's dtype, FP32 sums), for fp16
 * and bf16, heads of 16, 32, 64 and 128 columns, sequences of 1 to 129 tokens (one key tile,
 * an exact one, partial ones), several heads and sequences, causal or not, dropout or not, and
 * outputs and gradients in another dtype; every WMMA pointer 256-bit aligned and no block
 * writing shared memory past what its launch asks. The GPU runs the same kernels in the op
 * table (tests/gpu/op_table_attn.c). Exits 1 on a failure, naming the case. */
#include "tests/emu/cuda_emu.h"

extern "C" {
#include "engine/cast_rule.h"
}

#define MP_MMA_BUILT 1
using namespace nvcuda;
#include "engine/backend_cuda/attention_mma_kernels.cuh"

static int failures;

/* The unit roundoff of a dtype (FP32: 2^-24). */
static double unit(mp_dtype t)
{
    return t == MP_F16 ? 0x1p-11 : t == MP_BF16 ? 0x1p-8 : 0x1p-24;
}

static size_t bytes_of(mp_dtype t) { return t == MP_F32 ? 4 : 2; }

static const char *dtype_name(mp_dtype t)
{
    return t == MP_F16 ? "fp16" : t == MP_BF16 ? "bf16" : "fp32";
}

static double uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* Counts the elements of got farther from want than rel times their absolute terms (plus a
 * small absolute floor); a failure line with the worst one. NaN matches only NaN. */
static void compare(const char *name, const char *what, const std::vector<double> &got,
                    const std::vector<double> &want, const std::vector<double> &terms, double rel)
{
    size_t bad = 0, worst = 0;
    double worst_ratio = 0;
    for (size_t k = 0; k < want.size(); k++) {
        const double bound = rel * terms[k] + 1e-6, err = fabs(got[k] - want[k]);
        const bool ok = err <= bound || (std::isnan(got[k]) && std::isnan(want[k]));
        bad += !ok;
        if (!ok && !(err / bound <= worst_ratio))
            worst_ratio = err / bound, worst = k;
    }
    if (bad) {
        failures++;
        printf("FAIL %s: %s: %zu of %zu elements out of bounds, the worst %zu: %.6g, want %.6g\n",
               name, what, bad, want.size(), worst, got[worst], want[worst]);
    }
}

/* dK and dV into dqkv (its `bytes`) by the padded kernel, and by the unpadded one (launched
 * where padding costs an SM a block) into a copy: false when a launch failed; a FAIL line when
 * the two differ in any bit. Apart from run_case, whose inlining GCC 12 at -O3 otherwise takes
 * for a free of a non-heap pointer (a false -Wfree-nonheap-object). */
template <mp_dtype DT, int NB>
__attribute__((noinline)) static bool run_dkv(unsigned gx, const flash_args &b, const void *qkv,
                                              const float *stats, const float *dd,
                                              const void *dout, unsigned char *dqkv,
                                              size_t bytes, const char *name)
{
    std::vector<unsigned char> plain(dqkv, dqkv + bytes); /* dQ; dK and dV not written yet */
    const unsigned heads = (unsigned)b.heads, N = (unsigned)b.N;
    bool ok = emu_launch(gx, heads, N, MMA_THREADS, dkv_bytes<NB, true>(), [&] {
        k_mma_dkv<DT, NB, true>(b, qkv, stats, dd, dout, dqkv);
    });
    ok = ok && emu_launch(gx, heads, N, MMA_THREADS, dkv_bytes<NB, false>(), [&] {
        k_mma_dkv<DT, NB, false>(b, qkv, stats, dd, dout, plain.data());
    });
    if (ok && memcmp(plain.data(), dqkv, bytes) != 0) {
        failures++;
        printf("FAIL %s: dK/dV padded and unpadded differ\n", name);
    }
    return ok;
}

/* One case: forward, then backward from its outputs; qkv of DT, heads of 16 NB columns, out in
 * odt, dout and dqkv in gdt. */
template <mp_dtype DT, int NB>
static void run_case(int64_t N, int64_t T, int64_t heads, bool causal, double p, mp_dtype odt,
                     mp_dtype gdt, uint64_t seed)
{
    const int dh = 16 * NB, before = failures;
    const int64_t D = heads * dh;
    char name[160];
    snprintf(name, sizeof name,
             "%s qkv, dh %d, N %lld, T %lld, %lld heads%s, dropout %g, %s out, %s grads",
             dtype_name(DT), dh, (long long)N, (long long)T, (long long)heads,
             causal ? ", causal" : "", p, dtype_name(odt), dtype_name(gdt));
    flash_args a{};
    a.N = N, a.T = T, a.D = D, a.heads = heads, a.dh = dh;
    a.causal = causal, a.drop = p > 0;
    a.key = mp_dropout_key(seed), a.thr = mp_dropout_threshold(p), a.offset = 7, a.step = nullptr;
    a.scale = (float)(1.0 / sqrt((double)dh)), a.keep_scale = (float)(1.0 / (1.0 - p));
    a.w = DT, a.sdt = MP_F32, a.odt = odt, a.dodt = a.outdt = odt;
    uint64_t s = seed * 7919 + 1;
    std::vector<uint16_t> qkv((size_t)(N * T * 3 * D));
    for (size_t k = 0; k < qkv.size(); k++)
        mp_elem_store_f32(qkv.data(), DT, (int64_t)k, (float)(uniform(&s) * 4 - 2));
    std::vector<unsigned char> out((size_t)(N * T * D) * bytes_of(odt));
    std::vector<float> stats((size_t)(N * heads * T * 2));
    const unsigned gx = (unsigned)((T + MMA_ROWS - 1) / MMA_ROWS);
    bool ok = emu_launch(gx, (unsigned)heads, (unsigned)N, MMA_THREADS, fwd_bytes<NB>(), [&] {
        k_mma_fwd<DT, NB>(a, qkv.data(), stats.data(), out.data());
    });
    auto q = [&](int64_t n, int64_t t, int part, int64_t h, int c) {
        const int64_t e = (n * T + t) * 3 * D + part * D + h * dh + c;
        return (double)mp_elem_load_f32(qkv.data(), DT, e);
    };
    /* the forward directly: P (N, heads, T, T), out and its absolute terms, m and l */
    std::vector<double> P((size_t)(N * heads * T * T), 0.0), want_o((size_t)(N * T * D)),
        terms_o(want_o.size()), got_o(want_o.size()), want_m((size_t)(N * heads * T)),
        want_l(want_m.size()), got_m(want_m.size()), got_l(want_m.size()),
        terms_m(want_m.size(), 1.0), terms_l(want_m.size());
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < T; i++) {
                const int64_t span = causal ? i + 1 : T, row = (n * heads + h) * T + i;
                std::vector<double> sc((size_t)span);
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < span; j++) {
                    double dot = 0;
                    for (int c = 0; c < dh; c++)
                        dot += q(n, i, 0, h, c) * q(n, j, 1, h, c);
                    sc[(size_t)j] = dot * a.scale;
                    m = fmax(m, sc[(size_t)j]);
                }
                for (int64_t j = 0; j < span; j++)
                    l += exp(sc[(size_t)j] - m);
                want_m[(size_t)row] = m, want_l[(size_t)row] = l, terms_l[(size_t)row] = l;
                for (int64_t j = 0; j < span; j++)
                    P[(size_t)(row * T + j)] = exp(sc[(size_t)j] - m) / l;
                for (int c = 0; c < dh; c++) {
                    double acc = 0, abs = 0;
                    for (int64_t j = 0; j < span; j++) {
                        const double t = P[(size_t)(row * T + j)] * drop_mult(a, n, h, i, j) *
                                         q(n, j, 2, h, c);
                        acc += t, abs += fabs(t);
                    }
                    want_o[(size_t)((n * T + i) * D + h * dh + c)] = acc;
                    terms_o[(size_t)((n * T + i) * D + h * dh + c)] = abs;
                }
            }
    for (size_t k = 0; k < got_o.size(); k++)
        got_o[k] = mp_elem_load_f32(out.data(), odt, (int64_t)k);
    for (size_t k = 0; k < got_m.size(); k++)
        got_m[k] = stats[2 * k], got_l[k] = stats[2 * k + 1];
    /* S within dh u(FP32) sum |q k|, P' rounded to DT, out rounded to odt */
    compare(name, "out", got_o, want_o, terms_o, 4 * unit(DT) + 2 * unit(odt) + 1e-4);
    compare(name, "m", got_m, want_m, terms_m, 1e-3);
    compare(name, "l", got_l, want_l, terms_l, 1e-3);

    /* backward, from the emulated forward's out and statistics */
    std::vector<unsigned char> dout((size_t)(N * T * D) * bytes_of(gdt));
    for (int64_t k = 0; k < N * T * D; k++)
        mp_elem_store_f32(dout.data(), gdt, k, (float)(uniform(&s) * 2 - 1));
    std::vector<unsigned char> dqkv((size_t)(N * T * 3 * D) * bytes_of(gdt), 0xee);
    flash_args b = a;
    b.odt = gdt, b.dodt = gdt, b.outdt = odt;
    std::vector<float> dd((size_t)(N * heads * T), NAN);
    ok = ok && emu_launch(2, 1, 1, 64, 0, [&] { /* fewer threads than rows: the stride loop */
             k_mma_rowdot(b, out.data(), dout.data(), dd.data());
         });
    ok = ok && emu_launch(gx, (unsigned)heads, (unsigned)N, MMA_THREADS, dq_bytes<NB>(), [&] {
        k_mma_dq<DT, NB>(b, qkv.data(), stats.data(), dd.data(), dout.data(), dqkv.data());
    });
    ok = ok && run_dkv<DT, NB>(gx, b, qkv.data(), stats.data(), dd.data(), dout.data(),
                               dqkv.data(), dqkv.size(), name);
    auto d_o = [&](int64_t n, int64_t t, int64_t h, int c) {
        return (double)mp_elem_load_f32(dout.data(), gdt, (n * T + t) * D + h * dh + c);
    };
    std::vector<double> want_g((size_t)(N * T * 3 * D)), terms_g(want_g.size()),
        got_g(want_g.size());
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < heads; h++) {
            std::vector<double> dS((size_t)(T * T), 0), dSa(dS.size(), 0), PP(dS.size(), 0);
            for (int64_t i = 0; i < T; i++) {
                const int64_t row = (n * heads + h) * T + i, span = causal ? i + 1 : T;
                double di = 0;
                for (int c = 0; c < dh; c++)
                    di += d_o(n, i, h, c) * got_o[(size_t)((n * T + i) * D + h * dh + c)];
                for (int64_t j = 0; j < span; j++) {
                    double dp = 0, dpa = 0;
                    for (int c = 0; c < dh; c++) {
                        dp += d_o(n, i, h, c) * q(n, j, 2, h, c);
                        dpa += fabs(d_o(n, i, h, c) * q(n, j, 2, h, c));
                    }
                    const double mult = drop_mult(a, n, h, i, j), pr = P[(size_t)(row * T + j)];
                    dS[(size_t)(i * T + j)] = pr * (dp * mult - di);
                    dSa[(size_t)(i * T + j)] = pr * (dpa * mult + fabs(di));
                    PP[(size_t)(i * T + j)] = pr * mult;
                }
            }
            for (int64_t t = 0; t < T; t++)
                for (int c = 0; c < dh; c++) {
                    double dq = 0, dqa = 0, dk = 0, dka = 0, dv = 0, dva = 0;
                    for (int64_t u = 0; u < T; u++) {
                        dq += dS[(size_t)(t * T + u)] * q(n, u, 1, h, c);
                        dqa += dSa[(size_t)(t * T + u)] * fabs(q(n, u, 1, h, c));
                        dk += dS[(size_t)(u * T + t)] * q(n, u, 0, h, c);
                        dka += dSa[(size_t)(u * T + t)] * fabs(q(n, u, 0, h, c));
                        dv += PP[(size_t)(u * T + t)] * d_o(n, u, h, c);
                        dva += fabs(PP[(size_t)(u * T + t)] * d_o(n, u, h, c));
                    }
                    const size_t e = (size_t)((n * T + t) * 3 * D + h * dh + c);
                    want_g[e] = dq * a.scale, terms_g[e] = dqa * a.scale;
                    want_g[e + (size_t)D] = dk * a.scale, terms_g[e + (size_t)D] = dka * a.scale;
                    want_g[e + 2 * (size_t)D] = dv, terms_g[e + 2 * (size_t)D] = dva;
                }
        }
    for (size_t k = 0; k < got_g.size(); k++)
        got_g[k] = mp_elem_load_f32(dqkv.data(), gdt, (int64_t)k);
    /* dS, P' and dout of another dtype rounded to DT, dqkv to gdt, FP32 sums */
    compare(name, "dqkv", got_g, want_g, terms_g, 6 * unit(DT) + 2 * unit(gdt) + 1e-4);
    if (!ok) {
        failures++;
        printf("FAIL %s: a block wrote shared memory past its launch's bytes\n", name);
    }
    if (emu_misaligned) {
        failures++;
        printf("FAIL %s: %ld WMMA pointers not 256-bit aligned\n", name, emu_misaligned);
        emu_misaligned = 0;
    }
    printf("%s %s\n", failures > before ? "failed:" : "ok", name);
}

int main(void)
{
    uint64_t seed = 11;
    for (int64_t T : {1, 7, 129})
        for (int causal = 0; causal < 2; causal++) {
            const double p = T == 7 ? 0.1 : causal ? 0.2 : 0.0;
            run_case<MP_F16, 1>(2, T, 2, causal, p, MP_F16, MP_F16, seed++);
            run_case<MP_BF16, 8>(1, T, 1, causal, p, MP_BF16, MP_BF16, seed++);
        }
    run_case<MP_BF16, 2>(2, 65, 3, false, 0.0, MP_F32, MP_F32, seed++);
    run_case<MP_F16, 4>(1, 64, 2, true, 0.1, MP_BF16, MP_F32, seed++);
    run_case<MP_F16, 2>(1, 128, 1, true, 0.0, MP_F32, MP_BF16, seed++);
    printf("%d failed\n", failures);
    return failures != 0;
}
