/* The CUDA backend's bias_grad kernels (engine/backend_cuda/bias_grad_kernels.cuh) run on the
 * CPU over the device stand-in (tests/emu/cuda_emu.h), launched as
 * engine/backend_cuda/elementwise.cu launches them: each column sum of dy within the bound of
 * its FP32 additions (rows + 8 + chunks of them, each at most one unit roundoff of the running
 * sum of magnitudes) plus the rounding to db's dtype, against the sum in FP64 of the same
 * elements, for FP32, fp16 and bf16 dy, db in FP32 or dy's dtype, 1 to 70,000 rows (one chunk,
 * a partial one, the most chunks and longer ones past them) and 1 to 130 columns (a partial block
 * of 32). The GPU runs the same kernels in the op table (tests/gpu). Exits 1 on a failure. */
#include <cmath>
#include <vector>

#include "tests/emu/cuda_emu.h"

#include "engine/backend_cuda/bias_grad_kernels.cuh"

static int failures;
static uint64_t rng_state = 0x2545f4914f6cdd1dull;

/* A uniform value in [-1, 1). */
static float uniform()
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * 0x1p-23) - 1.0f;
}

static double unit(mp_dtype t)
{
    return t == MP_F16 ? 0x1p-11 : t == MP_BF16 ? 0x1p-8 : 0x1p-24;
}

static const char *name_of(mp_dtype t)
{
    return t == MP_F16 ? "fp16" : t == MP_BF16 ? "bf16" : "fp32";
}

static void run_case(mp_dtype dt, mp_dtype bt, int64_t rows, int64_t cols)
{
    const size_t es = dt == MP_F32 ? 4 : 2, bs = bt == MP_F32 ? 4 : 2;
    std::vector<unsigned char> dy((size_t)(rows * cols) * es), db((size_t)cols * bs, 0xff);
    for (int64_t i = 0; i < rows * cols; i++) /* a column's values share a sign half the time */
        mp_elem_store_f32(dy.data(), dt, i, uniform() + (i % cols % 2 ? 0.75f : 0.0f));
    int64_t per;
    const int64_t chunks = bg_chunks(rows, &per);
    std::vector<float> part((size_t)(chunks * cols), NAN);
    const emu_dim3 grid = {(unsigned)((cols + 31) / 32), (unsigned)chunks, 1};
    bool ok = emu_launch3(grid, {32, 8, 1}, BG_SMEM, [&] {
        k_bias_part(dy.data(), dt, rows, cols, per, part.data());
    });
    ok = ok && emu_launch(2, 1, 1, 64, 0, [&] {
        k_bias_sum(part.data(), chunks, cols, db.data(), bt);
    });
    if (!ok)
        failures++;
    for (int64_t j = 0; j < cols; j++) {
        double sum = 0, mag = 0;
        for (int64_t r = 0; r < rows; r++) {
            const double v = mp_elem_load_f32(dy.data(), dt, r * cols + j);
            sum += v;
            mag += fabs(v);
        }
        const double got = mp_elem_load_f32(db.data(), bt, j);
        const double bound = (double)(per / 8 + 1 + 8 + chunks) * 0x1p-24 * mag +
                             unit(bt) * fabs(sum) + 1e-30;
        if (!(fabs(got - sum) <= bound)) {
            printf("FAIL %s dy, %s db, %lld x %lld: column %lld is %.9g, the FP64 sum %.9g "
                   "(bound %.3g)\n",
                   name_of(dt), name_of(bt), (long long)rows, (long long)cols, (long long)j, got,
                   sum, bound);
            failures++;
            return;
        }
    }
}

int main(void)
{
    const int64_t shapes[][2] = {{1, 1},     {7, 33},   {64, 32},    {65, 130},
                                 {4096, 40}, {65536, 3}, {70000, 33}};
    int n = 0;
    for (mp_dtype dt : {MP_F32, MP_F16, MP_BF16})
        for (const auto &s : shapes) {
            run_case(dt, n % 2 ? dt : MP_F32, s[0], s[1]);
            n++;
        }
    printf("%d cases, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
