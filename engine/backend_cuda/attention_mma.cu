/* Tiled ("flash") attention on tensor cores: the tiled ops (engine/op_list.h's
 * attention_flash_forward and _backward, the online softmax's rules in engine/attn_flash.h) for
 * half qkv and heads of 16, 32, 64 or 128 columns (mp_attn_flash_mma), on GPUs from sm_80.
 * A block of 4 warps takes 64 rows of one head of one sequence, a warp 16 of them; the other
 * operand comes in tiles of 64 rows staged in shared memory as 16-bit values, and the products
 * are WMMA's 16 x 16 x 16 tiles with FP32 accumulation (nvcuda::wmma):
 *  - forward, per query block and key tile: S = Q K^T (FP32, to shared memory), the online
 *    softmax by two lanes a row (maximum, rescale, sum in FP32 with mp_exp_f32), P' = e^(S -
 *    m) times the dropout multiplier rounded to qkv's dtype, and the output accumulator (FP32 in
 *    shared memory, rescaled by its row's factor) += P' V; at the end out = acc / l and the
 *    statistics (m, l);
 *  - backward: first d_i = dO_i . out_i (FP32) of every row into device scratch (k_mma_rowdot);
 *    dQ, per query block and key tile: S = Q K^T and dP' = dO V^T, P = e^(S - m) / l from the
 *    saved statistics, dS = P (dP' mult - d_i) rounded to qkv's dtype, dQ += dS K in registers;
 *    dQ scale at the end;
 *  - backward dK and dV, per key block and query tile: S^T = K Q^T and dP'^T = V dO^T, the same
 *    P and dS transposed, dV += P'^T dO and dK += dS^T Q in registers.
 * dout of another dtype is rounded to qkv's as it is staged. Nothing of size T x T is stored,
 * no atomics: deterministic. What rounds differently from the scalar kernels (which keep P' and
 * dS in FP32) is what the (T, T) path's GEMMs round (engine/backend_cuda/attention.cu), and
 * the op table's bounds for these cases say so (tests/gpu/op_table_attn.c). Shared memory: up
 * to 113 KiB a block at dh = 128 (opted in per kernel; dK/dV's layout chosen per device). A
 * lane pair takes a row, its lanes the even and the odd columns rotated by the row, and the
 * tiles' rows are padded (mma_lay), so that shared memory serves a warp's own accesses and its
 * WMMA loads without bank conflicts. The kernels are in attention_mma_kernels.cuh, which the
 * suite also builds on the CPU over a stand-in of the device (tests/emu/test_attention_mma.cpp);
 * this file launches them. Not yet run on a GPU when written: the op table checks them there. */
#include "engine/backend_cuda/attention_flash.cuh" /* first: cuda.h's C headers as extern "C" */

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define MP_MMA_BUILT 1 /* WMMA with bf16 (sm_80): the kernels' bodies exist */
#endif

using namespace nvcuda;

#include "engine/backend_cuda/attention_mma_kernels.cuh"

/* Whether kernel k (instance KIND of <DT, NB>) can run here: its code was built for sm_80 or
 * later (its PTX architecture: a build for older GPUs has an empty body, even where the driver
 * compiles that PTX for a newer GPU) and `bytes` of dynamic shared memory fit the device's
 * opt-in limit (227 KiB a block on sm_90, 163 on sm_80, 99 on sm_86 and sm_89); then it may use
 * them. Asked once per kernel; anything else runs the scalar kernels. */
template <mp_dtype DT, int NB, int KIND>
static mp_status mma_usable(const void *k, size_t bytes, bool *ok)
{
    static int state; /* 0: not asked yet; 1: usable; -1: not */
    if (state == 0) {
        cudaFuncAttributes fa;
        int optin = 0;
        CUDA_CHECK(cudaFuncGetAttributes(&fa, k));
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                          mp_cuda_ctx_get()->device));
        state = fa.ptxVersion >= 80 && bytes <= (size_t)optin ? 1 : -1;
        if (state == 1)
            CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)bytes));
    }
    *ok = state == 1;
    return MP_OK;
}

/* The launch grid: (query or key blocks, heads, sequences). */
static dim3 mma_grid(const flash_args &a)
{
    return dim3((unsigned)((a.T + MMA_ROWS - 1) / MMA_ROWS), (unsigned)a.heads, (unsigned)a.N);
}

/* The forward's launch for <DT, NB>; *ran false when its kernel cannot run here. */
template <mp_dtype DT, int NB> struct mma_fwd {
    static mp_status run(const flash_args &a, bool *ran, const void *qkv, void *stats, void *out)
    {
        void (*k)(flash_args, const void *, void *, void *) = k_mma_fwd<DT, NB>;
        const size_t bytes = fwd_bytes<NB>();
        MP_TRY((mma_usable<DT, NB, 0>((const void *)k, bytes, ran)));
        if (*ran) {
            k<<<mma_grid(a), MMA_THREADS, bytes, mp_cuda_ctx_get()->stream>>>(a, qkv, stats,
                                                                              out);
            CUDA_CHECK(cudaGetLastError());
        }
        return MP_OK;
    }
};

/* The rows' d_i for the backward (k_mma_rowdot's): device scratch of this file, grown on demand
 * and never shrunk (MP_MEM_WORKSPACE). */
static void *mma_dd;
static size_t mma_dd_bytes;

/* How many blocks of `bytes` of dynamic shared memory an SM of this device holds at once (1 KiB
 * of it kept per block), by shared memory alone. */
static mp_status blocks_per_sm(size_t bytes, int *n)
{
    static int per_sm; /* the device's shared memory an SM, asked once */
    if (per_sm == 0)
        CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                          mp_cuda_ctx_get()->device));
    *n = (int)((size_t)per_sm / (bytes + 1024));
    return MP_OK;
}

/* The backward's launches for <DT, NB>: the rows' d_i, dQ, dK and dV (its padded layout unless
 * that leaves fewer blocks an SM than the unpadded one); *ran false when a kernel cannot run
 * here. */
template <mp_dtype DT, int NB> struct mma_bwd {
    static mp_status run(const flash_args &a, bool *ran, const void *qkv, const void *o,
                         const void *stats, const void *dout, void *dqkv)
    {
        typedef void (*kernel)(flash_args, const void *, const void *, const float *,
                               const void *, void *);
        int padded = 0, plain = 0;
        MP_TRY(blocks_per_sm(dkv_bytes<NB, true>(), &padded));
        MP_TRY(blocks_per_sm(dkv_bytes<NB, false>(), &plain));
        const bool pad = padded >= plain;
        kernel kq = k_mma_dq<DT, NB>;
        kernel kkv = pad ? k_mma_dkv<DT, NB, true> : k_mma_dkv<DT, NB, false>;
        const size_t bq = dq_bytes<NB>();
        const size_t bkv = pad ? dkv_bytes<NB, true>() : dkv_bytes<NB, false>();
        bool okq = false, okkv = false;
        MP_TRY((mma_usable<DT, NB, 1>((const void *)kq, bq, &okq)));
        if (pad)
            MP_TRY((mma_usable<DT, NB, 2>((const void *)kkv, bkv, &okkv)));
        else
            MP_TRY((mma_usable<DT, NB, 3>((const void *)kkv, bkv, &okkv)));
        *ran = okq && okkv;
        if (!*ran)
            return MP_OK;
        const int64_t rows = a.N * a.heads * a.T;
        MP_TRY(mp_cuda_grow(&mma_dd, &mma_dd_bytes, (size_t)rows * sizeof(float)));
        const float *dd = (const float *)mma_dd;
        cudaStream_t s = mp_cuda_ctx_get()->stream;
        k_mma_rowdot<<<mp_cuda_blocks(rows), 256, 0, s>>>(a, o, dout, (float *)mma_dd);
        CUDA_CHECK(cudaGetLastError());
        kq<<<mma_grid(a), MMA_THREADS, bq, s>>>(a, qkv, stats, dd, dout, dqkv);
        CUDA_CHECK(cudaGetLastError());
        kkv<<<mma_grid(a), MMA_THREADS, bkv, s>>>(a, qkv, stats, dd, dout, dqkv);
        CUDA_CHECK(cudaGetLastError());
        return MP_OK;
    }
};

/* K<DT, NB>::run(a, ran, args...) for a's dtype and head width, when mp_attn_flash_mma admits
 * them and the 16-bit operands read whole rows at a time (`aligned`); else *ran false. */
template <template <mp_dtype, int> class K, typename... A>
static mp_status mma_dispatch(const flash_args &a, bool aligned, bool *ran, A... args)
{
    *ran = false;
    if (!mp_attn_flash_mma(a.w, a.dh) || !aligned)
        return MP_OK;
    const bool bf = a.w == MP_BF16;
    switch (a.dh) {
    case 16:
        return bf ? K<MP_BF16, 1>::run(a, ran, args...) : K<MP_F16, 1>::run(a, ran, args...);
    case 32:
        return bf ? K<MP_BF16, 2>::run(a, ran, args...) : K<MP_F16, 2>::run(a, ran, args...);
    case 64:
        return bf ? K<MP_BF16, 4>::run(a, ran, args...) : K<MP_F16, 4>::run(a, ran, args...);
    default:
        return bf ? K<MP_BF16, 8>::run(a, ran, args...) : K<MP_F16, 8>::run(a, ran, args...);
    }
}

/* Whether p is 16-byte aligned. */
static bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

mp_status mp_flash_mma_forward(const flash_args &a, const void *qkv, void *stats, void *out,
                               bool *ran)
{
    return mma_dispatch<mma_fwd>(a, aligned16(qkv), ran, qkv, stats, out);
}

mp_status mp_flash_mma_backward(const flash_args &a, const void *qkv, const void *out,
                                const void *stats, const void *dout, void *dqkv, bool *ran)
{
    const bool aligned = aligned16(qkv) && (a.dodt != a.w || aligned16(dout));
    return mma_dispatch<mma_bwd>(a, aligned, ran, qkv, out, stats, dout, dqkv);
}
