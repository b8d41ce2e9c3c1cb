/* Batch normalisation on the GPU over (N, H, W) per channel of an NHWC tensor (x of any rank is
 * seen as (M, C), C its last dimension), with our own kernels and the CPU reference's semantics
 * and FP32 operations (engine/backend_cpu/batchnorm.c), its sums in the same order
 * (engine/bn_rule.h), so that every result is the CPU's bits: the batch mean and the biased
 * variance by the rule's chunks (each chunk's sum, then its squares about its own mean in a
 * second sweep that finds the chunk in L2, the chunks' terms added in order),
 * invstd = 1 / sqrt(var + eps) (the square root in double, then rounded, as the CPU does), the
 * running statistics updated with the unbiased variance
 * (running = (1 - momentum) running + momentum batch), y = (x - mean) scale + beta with
 * scale = invstd gamma; backward dgamma = sum(dy xhat), dbeta = sum(dy),
 * dx = gamma invstd (dy - sum(dy) / M - xhat sum(dy xhat) / M). All in FP32; every tensor is
 * loaded and stored by engine/cast_rule.h (x, y, dy and dx of one dtype fixed at compile time,
 * the per-channel tensors by their runtime dtypes), so FP32, fp16 and bf16 data and per-channel
 * tensors of any of them need no conversion copies.
 * Why not cuDNN: its legacy BatchNorm call in SPATIAL_PERSISTENT mode took 77% of a WRN-16-4
 * step at batch 512 on an H200 (bench/results/gpu-h200-2026-11-27), the API is deprecated in
 * cuDNN 9 and documents no bf16 data, and its fast NHWC path (the Ex calls) is fp16 only and
 * wants a reserve space kept per layer from forward to backward, which the op table's contract
 * has no place for. These kernels move the data 3 times in a training forward (x twice from
 * memory, y once; evaluation twice) and 5 times backward (x and dy twice, dx once).
 * With mp_bn_args.relu (BatchNorm + ReLU, fused) the apply kernel takes engine/elem_rule.h's ReLU
 * before its rounding, and backward reads dy through the mask of y (the forward's output) where
 * it reads dy, in the sums and in dx: the unfused pair's bits without its pass over memory.
 * Column sums (per channel over the M rows) are formed without atomics in engine/bn_rule.h's
 * order, the CPU's: in k_bn_part a thread is one lane of one chunk for V channels (V = 8 when C
 * is a multiple of 8 and the tensors are aligned: 16-byte loads of a half type, several rows'
 * loads in flight at once; else V = 1), a block holds the 8 lanes of up to 32 channel vectors
 * and of as many chunks as make 256 threads (fewer where that would leave SMs idle), and the
 * lanes are added in order in shared memory; then a block of 8 channels x 32 threads stages all
 * the chunks' partials of its channels in shared memory, coalesced, one thread a channel adds
 * them in chunk order and all 32 form the variance's per-chunk terms (the serial chain of the
 * rule is the only serial work; it was a chunk's loads and terms as well, an estimated 30-40 us
 * a layer: not measured, the profiles time the whole op). The element-wise
 * passes (apply, dx) take V elements a thread with the dtype fixed at compile time
 * (engine/backend_cuda/vec.cuh). The results are deterministic and the CPU's bits. The FP32
 * scratch (2 C floats a chunk and MP_BN_STATS C floats of per-channel values) is mp_cuda_grow's.
 */
#include <limits.h>

#include "engine/backend_cuda/cuda.h"

#include "engine/backend_cuda/batchnorm_kernels.cuh"

static void *mp_bn_scratch;
static size_t mp_bn_scratch_bytes;

/* A per-channel tensor of C elements (NULL allowed when `optional`). */
static bool per_channel(const mp_tensor *t, int64_t C, bool optional)
{
    return t ? mp_tensor_numel(t) == C : optional;
}

/* x (M, C) as an NHWC tensor whose last dimension is C. */
static bool channels_last(const mp_tensor *x, int64_t C)
{
    return x->ndim >= 1 && C >= 1 && x->shape[x->ndim - 1] == C && mp_tensor_numel(x) % C == 0;
}

/* b's layout for its M >= 1 rows of C channels: the rule's chunks (mp_bn_chunks), and the
 * scratch: b->part (2 C floats a chunk) followed by b->st (MP_BN_STATS C floats). */
static mp_status bn_layout(bn_call *b)
{
    b->chunks = mp_bn_chunks(b->M, &b->rows);
    MP_TRY(mp_cuda_grow(&mp_bn_scratch, &mp_bn_scratch_bytes,
                        (size_t)((2 * b->chunks + MP_BN_STATS) * b->C) * sizeof(float)));
    b->part = (float *)mp_bn_scratch;
    b->st = b->part + 2 * b->chunks * b->C;
    return MP_OK;
}

/* k_bn_part over b: V channels a thread, laid out by bn_part_layout. */
template <mp_dtype DT, int V> struct bn_sums {
    static mp_status run(const bn_call &b, int what, const void *mean, mp_dtype mt,
                         const void *invstd, mp_dtype it)
    {
        const bn_part_grid g =
            bn_part_layout((b.C + V - 1) / V, b.chunks, mp_cuda_ctx_get()->sms);
        void (*k)(bn_call, const void *, mp_dtype, const void *, mp_dtype) =
            what == BN_SUM_XQ ? k_bn_part<DT, V, BN_SUM_XQ> : k_bn_part<DT, V, BN_SUM_DY>;
        MP_LAUNCH_SMEM(k, dim3((unsigned)g.gx, (unsigned)g.gy), dim3(g.bx, MP_BN_LANES, g.bz),
                       bn_part_smem(V), b, mean, mt, invstd, it);
        return MP_OK;
    }
};

/* The element-wise pass over b: k_bn_apply (forward, with relu its ReLU) or k_bn_dx. */
template <mp_dtype DT, int V> struct bn_map {
    static mp_status run(const bn_call &b, bool backward, bool relu)
    {
        const unsigned blocks = mp_cuda_blocks(b.M * b.C / V);
        void (*dx)(bn_call) = k_bn_dx<DT, V>;
        void (*apply)(bn_call, bool) = k_bn_apply<DT, V>;
        if (backward)
            MP_LAUNCH(dx, blocks, 256, b);
        else
            MP_LAUNCH(apply, blocks, 256, b, relu);
        return MP_OK;
    }
};

/* Runs K<DT, V>::run(b, args...) with DT the dtype dt of b's tensors and V = MP_VEC when C is a
 * multiple of it and every tensor and the scratch are aligned to a vector, else V = 1. */
template <template <mp_dtype, int> class K, typename... A>
static mp_status bn_dispatch(const bn_call &b, mp_dtype dt, A... args)
{
    const bool c8 = b.C % MP_VEC == 0;
    MP_VEC_BY_DTYPE(dt, DT, {
        if (c8 && mp_vec_aligned(alignof(mp_vec<DT, MP_VEC>), {b.x, b.y, b.dy, b.out}) &&
            mp_vec_aligned(alignof(mp_vec<MP_F32, MP_VEC>), {b.st}))
            return K<DT, MP_VEC>::run(b, args...);
        return K<DT, 1>::run(b, args...);
    });
    return MP_OK;
}

extern "C" mp_status mp_cuda_batchnorm_forward(const mp_bn_args *a, bool train,
                                               const mp_tensor *x, const mp_tensor *gamma,
                                               const mp_tensor *beta, mp_tensor *running_mean,
                                               mp_tensor *running_var, mp_tensor *save_mean,
                                               mp_tensor *save_invstd, mp_tensor *y)
{
    MP_CUDA_DTYPES("batchnorm_forward", x, gamma, beta, running_mean, running_var, save_mean,
                   save_invstd, y);
    int64_t C = mp_tensor_numel(gamma);
    MP_CUDA_REQUIRE(channels_last(x, C), "batchnorm_forward");
    int64_t M = mp_tensor_numel(x) / C;
    MP_CUDA_REQUIRE(mp_tensor_numel(y) == M * C && y->dtype == x->dtype, "batchnorm_forward");
    MP_CUDA_REQUIRE(per_channel(beta, C, false) && per_channel(running_mean, C, false) &&
                        per_channel(running_var, C, false),
                    "batchnorm_forward");
    MP_CUDA_REQUIRE(per_channel(save_mean, C, !train) && per_channel(save_invstd, C, !train),
                    "batchnorm_forward");
    MP_CUDA_REQUIRE(a->eps > 0 && a->momentum >= 0 && a->momentum <= 1, "batchnorm_forward");
    MP_CUDA_REQUIRE(M >= (train ? 2 : 1), "batchnorm_forward values per channel");
    MP_CUDA_REQUIRE(M * C <= INT_MAX, "batchnorm_forward");
    bn_call b = {x->data, NULL, NULL, y->data, M, C, 0, 0, NULL, NULL};
    MP_TRY(bn_layout(&b));
    const float eps = (float)a->eps;
    const unsigned cb = (unsigned)((C + BN_STAT_CH - 1) / BN_STAT_CH);
    if (train) {
        MP_TRY(bn_dispatch<bn_sums>(b, x->dtype, (int)BN_SUM_XQ, (const void *)NULL, MP_F32,
                                    (const void *)NULL, MP_F32));
        MP_LAUNCH_SMEM(k_bn_train_stats, cb, dim3(BN_STAT_CH, BN_STAT_ROWS),
                       bn_stat_smem(b.chunks), b.part, b.chunks, b.rows, C, M, eps,
                       (float)a->momentum, gamma->data, gamma->dtype, beta->data, beta->dtype,
                       running_mean->data, running_mean->dtype, running_var->data,
                       running_var->dtype, save_mean->data, save_mean->dtype, save_invstd->data,
                       save_invstd->dtype, b.st);
    } else {
        MP_LAUNCH(k_bn_eval_stats, mp_cuda_blocks(C), 256, C, eps, gamma->data, gamma->dtype,
                  beta->data, beta->dtype, running_mean->data, running_mean->dtype,
                  running_var->data, running_var->dtype, b.st);
    }
    MP_TRY(bn_dispatch<bn_map>(b, x->dtype, false, (bool)a->relu));
    return MP_OK;
}

extern "C" mp_status mp_cuda_batchnorm_backward(const mp_bn_args *a, const mp_tensor *x,
                                                const mp_tensor *y, const mp_tensor *dy,
                                                const mp_tensor *gamma,
                                                const mp_tensor *save_mean,
                                                const mp_tensor *save_invstd, mp_tensor *dx,
                                                mp_tensor *dgamma, mp_tensor *dbeta)
{
    MP_CUDA_DTYPES("batchnorm_backward", x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
    int64_t C = mp_tensor_numel(gamma);
    MP_CUDA_REQUIRE(channels_last(x, C), "batchnorm_backward");
    int64_t M = mp_tensor_numel(x) / C;
    MP_CUDA_REQUIRE(mp_tensor_numel(dy) == M * C && dy->dtype == x->dtype, "batchnorm_backward");
    MP_CUDA_REQUIRE(!dx || (mp_tensor_numel(dx) == M * C && dx->dtype == x->dtype),
                    "batchnorm_backward");
    MP_CUDA_REQUIRE(per_channel(save_mean, C, false) && per_channel(save_invstd, C, false) &&
                        per_channel(dgamma, C, false) && per_channel(dbeta, C, false),
                    "batchnorm_backward");
    MP_CUDA_REQUIRE(a->eps > 0, "batchnorm_backward"); /* as the CPU checks it */
    MP_CUDA_REQUIRE(!a->relu || (y && mp_tensor_numel(y) == M * C && y->dtype == x->dtype),
                    "batchnorm_backward");
    const mp_tensor *mask = a->relu ? y : NULL;
    MP_CUDA_REQUIRE(M * C <= INT_MAX, "batchnorm_backward");
    if (M == 0) { /* empty batch: zero parameter gradients (all-zero bits in every dtype) */
        cudaStream_t stream = mp_cuda_ctx_get()->stream;
        CUDA_CHECK(cudaMemsetAsync(dgamma->data, 0, (size_t)mp_tensor_bytes(dgamma), stream));
        CUDA_CHECK(cudaMemsetAsync(dbeta->data, 0, (size_t)mp_tensor_bytes(dbeta), stream));
        return MP_OK;
    }
    bn_call b = {x->data, mask ? mask->data : NULL, dy->data, dx ? dx->data : NULL, M, C, 0, 0,
                 NULL, NULL};
    MP_TRY(bn_layout(&b));
    MP_TRY(bn_dispatch<bn_sums>(b, x->dtype, (int)BN_SUM_DY, save_mean->data, save_mean->dtype,
                                save_invstd->data, save_invstd->dtype));
    MP_LAUNCH_SMEM(k_bn_bwd_stats, (unsigned)((C + BN_STAT_CH - 1) / BN_STAT_CH),
                   dim3(BN_STAT_CH, BN_STAT_ROWS), bn_stat_smem(b.chunks), b.part, b.chunks, C, M,
                   gamma->data, gamma->dtype, save_mean->data, save_mean->dtype,
                   save_invstd->data, save_invstd->dtype, dgamma->data, dgamma->dtype,
                   dbeta->data, dbeta->dtype, b.st);
    if (dx)
        MP_TRY(bn_dispatch<bn_map>(b, x->dtype, true, false));
    return MP_OK;
}
