/* The CUDA backend's embedding backward kernel (engine/backend_cuda/embedding_kernels.cuh) runs on
 * the CPU over the device stand-in (tests/emu/cuda_emu.h) and gives the CPU backend's bits
 * (engine/backend_cpu/embedding.c: increasing-r sums in FP32, rounded once): dy and dtable in
 * FP32, fp16 and bf16, accumulating into dtable or not, vocabularies of 1 to 300 rows, widths
 * of 1 to 2100 columns (two tiles of 2048), 1 to 700 ids with one id far more frequent than the
 * rest (tens of rows a chunk of 256, more than the kernel's loads ahead), and ids that are not
 * integers in [0, V), which the kernel skips: their rows are left out of the CPU's reference.
 * Fewer blocks than units of work, so that a block strides. Exits 1 on a failure. */
#include <vector>

#include "tests/emu/cuda_emu.h"

#include "engine/backend_cuda/embedding_kernels.cuh"

extern "C" {
#include "engine/tensor.h"
}

static int failures;
static const mp_ops *cpu;
static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint64_t next_u64()
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float uniform() { return (float)((next_u64() >> 40) * 0x1p-23) - 1.0f; }

static const char *name_of(mp_dtype t)
{
    return t == MP_F16 ? "fp16" : t == MP_BF16 ? "bf16" : "fp32";
}

static size_t bytes_of(mp_dtype t) { return t == MP_F32 ? 4 : 2; }

static void run_case(mp_dtype dt, int64_t V, int64_t D, int64_t R, bool accumulate, bool bad)
{
    std::vector<float> ids((size_t)R), ids_ok;
    std::vector<unsigned char> dy((size_t)(R * D) * bytes_of(dt)), dy_ok;
    std::vector<unsigned char> table((size_t)(V * D) * bytes_of(dt));
    for (int64_t i = 0; i < V * D; i++)
        mp_elem_store_f32(table.data(), dt, i, uniform());
    for (int64_t r = 0; r < R; r++) {
        const uint64_t x = next_u64() >> 33;
        ids[r] = x % 3 == 0 ? 0.0f : (float)(x / 3 % (uint64_t)V); /* id 0: a third of them */
        if (bad && r % 17 == 5)
            ids[r] = r % 2 ? (float)V + 0.0f : 0.5f; /* out of range, not an integer */
        for (int64_t d = 0; d < D; d++)
            mp_elem_store_f32(dy.data(), dt, r * D + d, uniform());
        const bool ok = ids[r] == (float)(int64_t)ids[r] && ids[r] < (float)V;
        if (ok) {
            ids_ok.push_back(ids[r]);
            dy_ok.insert(dy_ok.end(), dy.begin() + r * D * (int64_t)bytes_of(dt),
                         dy.begin() + (r + 1) * D * (int64_t)bytes_of(dt));
        }
    }
    std::vector<unsigned char> emu = table, ref = table;
    const int64_t tiles = (D + MP_EMB_TILE - 1) / MP_EMB_TILE, units = V * tiles;
    const unsigned grid = (unsigned)(units < 5 ? units : 5);
    if (!emu_launch(grid, 1, 1, MP_EMB_THREADS, MP_EMB_SMEM, [&] {
            k_emb_bwd(ids.data(), MP_F32, dy.data(), dt, accumulate, emu.data(), dt, R, V, D,
                      tiles);
        }))
        failures++;
    const int64_t R_ok = (int64_t)ids_ok.size(), ishape[1] = {R_ok}, yshape[2] = {R_ok, D};
    const int64_t tshape[2] = {V, D};
    mp_tensor it = mp_tensor_view(ids_ok.data(), MP_F32, 1, ishape);
    mp_tensor yt = mp_tensor_view(dy_ok.data(), dt, 2, yshape);
    mp_tensor tt = mp_tensor_view(ref.data(), dt, 2, tshape);
    if (cpu->embedding_backward(&it, &yt, accumulate, &tt) != MP_OK)
        abort();
    if (emu != ref) {
        size_t i = 0;
        while (emu[i] == ref[i])
            i++;
        const int64_t e = (int64_t)i / (int64_t)bytes_of(dt);
        printf("FAIL %s, V %lld, D %lld, R %lld, accumulate %d, bad ids %d: dtable element %lld "
               "is %.9g, the CPU's %.9g\n",
               name_of(dt), (long long)V, (long long)D, (long long)R, (int)accumulate, (int)bad,
               (long long)e, mp_elem_load_f32(emu.data(), dt, e),
               mp_elem_load_f32(ref.data(), dt, e));
        failures++;
    }
}

int main(void)
{
    cpu = emu_cpu_ops();
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 100}, {300, 3, 700}, {3, 2100, 300},
                                 {20, 128, 600}};
    int n = 0;
    for (mp_dtype dt : {MP_F32, MP_F16, MP_BF16})
        for (const auto &s : shapes) {
            run_case(dt, s[0], s[1], s[2], n % 2 == 1, n % 3 == 2);
            n++;
        }
    printf("%d cases, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
