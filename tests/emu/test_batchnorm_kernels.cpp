/* The CUDA backend's batch normalisation kernels (engine/backend_cuda/batchnorm_kernels.cuh) run
 * on the CPU over the device stand-in (tests/emu/cuda_emu.h), the sums and statistics with the
 * blocks and grids engine/backend_cuda/batchnorm.cu gives them (the element-wise passes on small
 * grids: they stride), and give the CPU backend's bits (engine/backend_cpu/batchnorm.c, by
 * engine/bn_rule.h): training forward (y, the running statistics, save_mean, save_invstd) and
 * backward (dx, dgamma, dbeta), with and without the fused ReLU, for FP32, fp16 and bf16 data,
 * per-channel tensors in FP32 or half, 8-channel vectors and single channels, one block of
 * channels or several (a partial last one), from 2 rows (one chunk) to the rule's 512 chunks, on
 * devices of 132 SMs (small blocks for the chunk sums) and of 1 (full ones). The GPU runs the same
 * kernels in the op table (tests/gpu). Exits 1 on a failure, naming the case and the tensor. */
#include <vector>

#include "tests/emu/cuda_emu.h"

#include "engine/backend_cuda/batchnorm_kernels.cuh"

extern "C" {
#include "engine/tensor.h"
}

static int failures;
static const mp_ops *cpu;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* A uniform value in [lo, hi). */
static float uniform(float lo, float hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 40) * 0x1p-24);
}

/* n elements of dtype dt: bytes, filled from uniform(lo, hi) rounded to dt. */
struct buf {
    mp_dtype dt;
    std::vector<unsigned char> bytes;
    buf(mp_dtype t, int64_t n, float lo, float hi) : dt(t), bytes((size_t)n * (t == MP_F32 ? 4 : 2))
    {
        for (int64_t i = 0; i < n; i++)
            mp_elem_store_f32(bytes.data(), dt, i, uniform(lo, hi));
    }
    void *data() { return bytes.data(); }
    mp_tensor view(int64_t M, int64_t C)
    {
        const int64_t shape[4] = {M, 1, 1, C};
        return M < 0 ? mp_tensor_view(data(), dt, 1, &C) : mp_tensor_view(data(), dt, 4, shape);
    }
};

struct bn_case {
    mp_dtype dt, pdt; /* data; gamma and beta (and their gradients) */
    int64_t M, C;
    bool relu;
    int sms;
};

static const char *name_of(mp_dtype t)
{
    return t == MP_F16 ? "fp16" : t == MP_BF16 ? "bf16" : "fp32";
}

static void same(const bn_case &k, int V, const char *what, const buf &emu, const buf &ref)
{
    if (emu.bytes == ref.bytes)
        return;
    size_t i = 0;
    while (emu.bytes[i] == ref.bytes[i])
        i++;
    const int64_t e = (int64_t)i / (emu.dt == MP_F32 ? 4 : 2);
    printf("FAIL %s data, %s per channel, M %lld, C %lld, relu %d, V %d, %d SMs: %s element "
           "%lld is %.9g, the CPU's %.9g\n",
           name_of(k.dt), name_of(k.pdt), (long long)k.M, (long long)k.C, (int)k.relu, V, k.sms,
           what, (long long)e, mp_elem_load_f32(emu.bytes.data(), emu.dt, e),
           mp_elem_load_f32(ref.bytes.data(), ref.dt, e));
    failures++;
}

/* One case through the kernels (V channels a thread) and through the CPU backend. */
template <mp_dtype DT, int V> static void run_case(const bn_case &k)
{
    const int64_t M = k.M, C = k.C;
    const mp_bn_args args = {1e-5, 0.1, k.relu};
    buf x(DT, M * C, -2.0f, 3.0f), dy(DT, M * C, -1.0f, 1.0f);
    buf gamma(k.pdt, C, 0.5f, 1.5f), beta(k.pdt, C, -0.5f, 0.5f);
    buf rm(MP_F32, C, -0.1f, 0.1f), rv(MP_F32, C, 0.9f, 1.1f);
    buf rm_ref = rm, rv_ref = rv, y = x, y_ref = x, sm(MP_F32, C, 0, 0), si = sm;
    buf sm_ref = sm, si_ref = sm, dx = x, dx_ref = x, dg = gamma, db = gamma, dg_ref = gamma,
        db_ref = gamma;
    int64_t rows;
    const int64_t chunks = mp_bn_chunks(M, &rows);
    std::vector<float> part((size_t)(2 * chunks * C), NAN), st((size_t)(MP_BN_STATS * C), NAN);
    const bn_part_grid g = bn_part_layout((C + V - 1) / V, chunks, k.sms);
    const emu_dim3 pgrid = {(unsigned)g.gx, (unsigned)g.gy, 1};
    const emu_dim3 pblock = {(unsigned)g.bx, MP_BN_LANES, (unsigned)g.bz};
    const emu_dim3 sgrid = {(unsigned)((C + BN_STAT_CH - 1) / BN_STAT_CH), 1, 1};
    const emu_dim3 sblock = {BN_STAT_CH, BN_STAT_ROWS, 1};
    bn_call b = {x.data(), NULL, NULL, y.data(), M, C, chunks, rows, part.data(), st.data()};

    bool ok = emu_launch3(pgrid, pblock, bn_part_smem(V), [&] {
        k_bn_part<DT, V, BN_SUM_XQ>(b, NULL, MP_F32, NULL, MP_F32);
    });
    ok = ok && emu_launch3(sgrid, sblock, bn_stat_smem(chunks), [&] {
        k_bn_train_stats(part.data(), chunks, rows, C, M, (float)args.eps, (float)args.momentum,
                         gamma.data(), k.pdt, beta.data(), k.pdt, rm.data(), MP_F32, rv.data(),
                         MP_F32, sm.data(), MP_F32, si.data(), MP_F32, st.data());
    });
    ok = ok && emu_launch(5, 1, 1, 64, 0, [&] { k_bn_apply<DT, V>(b, k.relu); });
    mp_tensor xt = x.view(M, C), gt = gamma.view(-1, C), bt = beta.view(-1, C);
    mp_tensor rmt = rm_ref.view(-1, C), rvt = rv_ref.view(-1, C), smt = sm_ref.view(-1, C);
    mp_tensor sit = si_ref.view(-1, C), yt = y_ref.view(M, C);
    if (cpu->batchnorm_forward(&args, true, &xt, &gt, &bt, &rmt, &rvt, &smt, &sit, &yt) != MP_OK)
        abort();
    same(k, V, "y", y, y_ref);
    same(k, V, "running_mean", rm, rm_ref);
    same(k, V, "running_var", rv, rv_ref);
    same(k, V, "save_mean", sm, sm_ref);
    same(k, V, "save_invstd", si, si_ref);

    b = {x.data(), k.relu ? y_ref.data() : NULL, dy.data(), dx.data(), M, C, chunks, rows,
         part.data(), st.data()};
    ok = ok && emu_launch3(pgrid, pblock, bn_part_smem(V), [&] {
        k_bn_part<DT, V, BN_SUM_DY>(b, sm_ref.data(), MP_F32, si_ref.data(), MP_F32);
    });
    ok = ok && emu_launch3(sgrid, sblock, bn_stat_smem(chunks), [&] {
        k_bn_bwd_stats(part.data(), chunks, C, M, gamma.data(), k.pdt, sm_ref.data(), MP_F32,
                       si_ref.data(), MP_F32, dg.data(), k.pdt, db.data(), k.pdt, st.data());
    });
    ok = ok && emu_launch(3, 1, 1, 96, 0, [&] { k_bn_dx<DT, V>(b); });
    mp_tensor dyt = dy.view(M, C), dxt = dx_ref.view(M, C), dgt = dg_ref.view(-1, C);
    mp_tensor dbt = db_ref.view(-1, C);
    if (cpu->batchnorm_backward(&args, &xt, k.relu ? &yt : NULL, &dyt, &gt, &smt, &sit, &dxt,
                                &dgt, &dbt) != MP_OK)
        abort();
    same(k, V, "dx", dx, dx_ref);
    same(k, V, "dgamma", dg, dg_ref);
    same(k, V, "dbeta", db, db_ref);
    if (!ok) {
        printf("FAIL %s M %lld C %lld: shared memory written past a launch's bytes\n",
               name_of(k.dt), (long long)M, (long long)C);
        failures++;
    }
}

template <mp_dtype DT> static void run_vectors(const bn_case &k)
{
    if (k.C % MP_VEC == 0)
        run_case<DT, MP_VEC>(k);
    run_case<DT, 1>(k);
}

static void run_dtype(const bn_case &k)
{
    if (k.dt == MP_F16)
        run_vectors<MP_F16>(k);
    else if (k.dt == MP_BF16)
        run_vectors<MP_BF16>(k);
    else
        run_vectors<MP_F32>(k);
}

int main(void)
{
    cpu = emu_cpu_ops();
    const int64_t Ms[] = {2, 100, 4133};
    const int64_t Cs[] = {16, 24, 3, 40, 37};
    int n = 0;
    for (mp_dtype dt : {MP_F32, MP_F16, MP_BF16})
        for (int64_t M : Ms)
            for (int64_t C : Cs) {
                /* ReLU, the SMs and the per-channel dtype cycle with different periods */
                const bool relu = n % 2 == 1;
                const int sms = n / 2 % 2 ? 132 : 1;
                const mp_dtype pdt = dt != MP_F32 && n % 3 == 0 ? dt : MP_F32;
                run_dtype({dt, pdt, M, C, relu, sms});
                n++;
            }
    /* the rule's 512 chunks (512 x 65 rows; the emulated threads are slow: a few cases) */
    const bn_case big[] = {{MP_F32, MP_F32, 33280, 16, true, 1},
                           {MP_F16, MP_F16, 33280, 16, false, 132},
                           {MP_BF16, MP_F32, 33279, 16, true, 132}};
    for (const bn_case &k : big) {
        run_dtype(k);
        n++;
    }
    printf("%d cases, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
