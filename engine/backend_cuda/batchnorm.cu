/* Batch normalisation on the GPU through cuDNN's legacy API (cudnnBatchNormalizationForward
 * Training / ForwardInference / Backward) in CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode over NHWC
 * tensors: per channel over (N, H, W). Plain SPATIAL on NHWC runs cuDNN's one-block-per-channel
 * kernels (bn_fw_tr_1C11 / bn_bw_1C11), which took 94% of the GPU time of a resnet20 step at
 * batch 512 on an H100 (ncu, 2026-11-24); PERSISTENT runs its NHWC kernels, 2.7x (O0) and 3.3x
 * (O2 fp16) the images/s of that step, and passes the comparison with the CPU reference in
 * tests/gpu/op_table_dnn.c. PyTorch makes the same choice for channels_last training. cuDNN
 * warns that the mode "imposes some limits on the range of values" (its FP32 sums of squares
 * of half inputs cannot overflow: 65504^2 x 2^24 elements is far below FP32's range). cuDNN's
 * semantics are PyTorch's, as the CPU reference's: the batch's biased variance normalises, the
 * running variance is updated with the unbiased one (running = (1 - momentum) running +
 * momentum batch, exponentialAverageFactor = momentum), and savedInvVariance is
 * 1 / sqrt(var + eps), our save_invstd. x, y, dy and dx share one dtype (FP32, fp16 or bf16);
 * x of any rank is seen as (N, H, W, C) when 4-D, else as (1, M, 1, C), which keeps N within
 * cuDNN's spatial-mode batch limits. cuDNN reads and writes the per-channel tensors in FP32
 * whatever x's dtype; one that is not FP32 (BatchNorm weights at O3 without
 * keep_batchnorm_fp32, or any mix in tests) goes through an FP32 scratch slot with
 * mp_cuda_convert, once each way, so it is rounded once as on the CPU. The scratch (6 C floats)
 * and an input-gradient scratch for dx == NULL are grown, never shrunk. Backward works from the
 * saved mean and inverse deviation and is given the forward's eps, as cuDNN asks ("same epsilon
 * as forward pass", cudnnBatchNormalizationBackward).
 * bf16 data (x, y, dy, dx) is widened into FP32 scratch slots (mp_cuda_operand) and the results
 * rounded once back, as PyTorch does: the legacy API documents FP32, FP64 and fp16 data only. */
#include <limits.h>

#include "engine/backend_cuda/cuda.h"

#define MP_BN_MODE CUDNN_BATCHNORM_SPATIAL_PERSISTENT

enum { MP_BN_SLOTS = 6 };

static cudnnTensorDescriptor_t mp_bn_xd, mp_bn_pd; /* data (x, y, dy, dx), per-channel */
static float *mp_bn_params;                        /* MP_BN_SLOTS * mp_bn_params_c floats */
static int64_t mp_bn_params_c;
static void *mp_bn_dx;                             /* dx when the caller wants none */
static size_t mp_bn_dx_bytes;

/* t as cuDNN's BatchNorm reads or writes it: t itself, or for bf16 an FP32 copy in scratch
 * `slot` (filled from t when `load`). */
static mp_status data_work(const mp_tensor *t, int slot, bool load, mp_tensor *out)
{
    return mp_cuda_operand(t, t->dtype == MP_BF16 ? MP_F32 : t->dtype, slot, load, out);
}

/* Rounds a result computed in scratch back into t (nothing when it was t itself). */
static mp_status data_out(const mp_tensor *work, mp_tensor *t)
{
    return work->data == t->data ? MP_OK : mp_cuda_convert(work, t);
}

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

/* Sets the data descriptor for x (dtype, shape as in the file comment) and derives the
 * per-channel one. x has M >= 1 rows of C <= INT_MAX channels. */
static mp_status bn_descriptors(const mp_tensor *x, int64_t C)
{
    if (!mp_bn_xd)
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&mp_bn_xd));
    if (!mp_bn_pd)
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&mp_bn_pd));
    int64_t n = 1, h = mp_tensor_numel(x) / C, w = 1;
    if (x->ndim == 4)
        n = x->shape[0], h = x->shape[1], w = x->shape[2];
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(mp_bn_xd, CUDNN_TENSOR_NHWC, mp_cudnn_dtype(x->dtype),
                                           (int)n, (int)C, (int)h, (int)w));
    CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(mp_bn_pd, mp_bn_xd, MP_BN_MODE));
    return MP_OK;
}

/* The FP32 scratch for C channels (MP_BN_SLOTS slots of C floats). */
static mp_status params_scratch(int64_t C)
{
    if (C <= mp_bn_params_c)
        return MP_OK;
    mp_cuda_mem_free(mp_bn_params);
    mp_bn_params_c = 0;
    mp_bn_params = (float *)mp_cuda_mem_alloc((size_t)(MP_BN_SLOTS * C) * sizeof(float),
                                              MP_MEM_WORKSPACE);
    if (!mp_bn_params)
        return MP_EINTERNAL; /* mp_cuda_mem_alloc said why */
    mp_bn_params_c = C;
    return MP_OK;
}

/* Per-channel tensor t (C elements, or NULL) as cuDNN's FP32 pointer: t's own data when it is
 * FP32, else slot `slot` of the scratch, filled from t when `load`. *work describes it. */
static mp_status param_in(const mp_tensor *t, int64_t C, int slot, bool load, mp_tensor *work)
{
    if (!t) {
        work->data = NULL;
        return MP_OK;
    }
    *work = *t;
    if (t->dtype == MP_F32)
        return MP_OK;
    MP_TRY(params_scratch(C));
    work->dtype = MP_F32;
    work->data = mp_bn_params + (int64_t)slot * C;
    return load ? mp_cuda_convert(t, work) : MP_OK;
}

/* MP_EINTERNAL naming op unless eps is one cuDNN takes (> 0 and >= CUDNN_BN_MIN_EPSILON). */
static mp_status eps_ok(double eps, const char *op)
{
    if (!(eps > 0) || eps < CUDNN_BN_MIN_EPSILON)
        return mp_fail(MP_EINTERNAL, "cuda %s: eps %g is not positive or is below cuDNN's "
                       "minimum CUDNN_BN_MIN_EPSILON = %g", op, eps, (double)CUDNN_BN_MIN_EPSILON);
    return MP_OK;
}

/* Rounds a per-channel result computed in scratch back into t (nothing when it was t itself). */
static mp_status param_out(const mp_tensor *work, mp_tensor *t)
{
    return t && work->data != t->data ? mp_cuda_convert(work, t) : MP_OK;
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
    MP_TRY(eps_ok(a->eps, "batchnorm_forward"));
    mp_tensor xw, yw;
    MP_TRY(data_work(x, 0, true, &xw));
    MP_TRY(data_work(y, 1, false, &yw));
    MP_TRY(bn_descriptors(&xw, C));
    mp_tensor g, b, rm, rv, sm, si;
    MP_TRY(param_in(gamma, C, 0, true, &g));
    MP_TRY(param_in(beta, C, 1, true, &b));
    MP_TRY(param_in(running_mean, C, 2, true, &rm));
    MP_TRY(param_in(running_var, C, 3, true, &rv));
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    const float one = 1.0f, zero = 0.0f;
    if (!train) {
        CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
            dnn, MP_BN_MODE, &one, &zero, mp_bn_xd, xw.data, mp_bn_xd, yw.data, mp_bn_pd, g.data,
            b.data, rm.data, rv.data, a->eps));
        return data_out(&yw, y);
    }
    MP_TRY(param_in(save_mean, C, 4, false, &sm));
    MP_TRY(param_in(save_invstd, C, 5, false, &si));
    CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        dnn, MP_BN_MODE, &one, &zero, mp_bn_xd, xw.data, mp_bn_xd, yw.data, mp_bn_pd, g.data,
        b.data, a->momentum, rm.data, rv.data, a->eps, sm.data, si.data));
    MP_TRY(data_out(&yw, y));
    MP_TRY(param_out(&rm, running_mean));
    MP_TRY(param_out(&rv, running_var));
    MP_TRY(param_out(&sm, save_mean));
    return param_out(&si, save_invstd);
}

extern "C" mp_status mp_cuda_batchnorm_backward(const mp_bn_args *a, const mp_tensor *x,
                                                const mp_tensor *dy, const mp_tensor *gamma,
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
    MP_CUDA_REQUIRE(M * C <= INT_MAX, "batchnorm_backward");
    MP_TRY(eps_ok(a->eps, "batchnorm_backward"));
    cudaStream_t stream = mp_cuda_ctx_get()->stream;
    if (M == 0) { /* empty batch: zero parameter gradients (all-zero bits in every dtype) */
        CUDA_CHECK(cudaMemsetAsync(dgamma->data, 0, (size_t)mp_tensor_bytes(dgamma), stream));
        CUDA_CHECK(cudaMemsetAsync(dbeta->data, 0, (size_t)mp_tensor_bytes(dbeta), stream));
        return MP_OK;
    }
    mp_tensor xw, dyw, dxw;
    MP_TRY(data_work(x, 0, true, &xw));
    MP_TRY(data_work(dy, 1, true, &dyw));
    if (dx)
        MP_TRY(data_work(dx, 2, false, &dxw));
    void *dxp = dx ? dxw.data : NULL;
    if (!dxp) {
        size_t bytes = (size_t)mp_tensor_bytes(&xw);
        if (bytes > mp_bn_dx_bytes) {
            mp_cuda_mem_free(mp_bn_dx);
            mp_bn_dx_bytes = 0;
            mp_bn_dx = mp_cuda_mem_alloc(bytes, MP_MEM_WORKSPACE);
            if (!mp_bn_dx)
                return MP_EINTERNAL; /* mp_cuda_mem_alloc said why */
            mp_bn_dx_bytes = bytes;
        }
        dxp = mp_bn_dx;
    }
    MP_TRY(bn_descriptors(&xw, C));
    mp_tensor g, sm, si, dg, db;
    MP_TRY(param_in(gamma, C, 0, true, &g));
    MP_TRY(param_in(save_mean, C, 1, true, &sm));
    MP_TRY(param_in(save_invstd, C, 2, true, &si));
    MP_TRY(param_in(dgamma, C, 3, false, &dg));
    MP_TRY(param_in(dbeta, C, 4, false, &db));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnBatchNormalizationBackward(
        mp_cuda_ctx_get()->dnn, MP_BN_MODE, &one, &zero, &one, &zero, mp_bn_xd, xw.data, mp_bn_xd,
        dyw.data, mp_bn_xd, dxp, mp_bn_pd, g.data, dg.data, db.data, a->eps, sm.data, si.data));
    if (dx)
        MP_TRY(data_out(&dxw, dx));
    MP_TRY(param_out(&dg, dgamma));
    return param_out(&db, dbeta);
}
