/* Internals shared by the CUDA backend's files (C++/CUDA only): the one context (device, stream,
 * library handles, workspaces), the check macros of docs/ARCHITECTURE.md §7, the launch macro that
 * checks every launch, and (engine/cast_rule.h, shared with the CPU) element loads and stores by
 * runtime dtype so that a kernel is written once for FP32, fp16 and bf16 (docs/ARCHITECTURE.md §7).
 * FP64 tensors are the CPU reference's alone. */
#ifndef MP_BACKEND_CUDA_H
#define MP_BACKEND_CUDA_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

extern "C" {
#include "engine/backends.h"
#include "engine/check.h"
#include "engine/cuda_check.h"
#include "engine/ops.h"
}

#include "engine/backend_cuda/grid.cuh"
#include "engine/cast_rule.h"

/* The backend's state: every op runs on `stream` of `device`. */
typedef struct mp_cuda_ctx {
    int device;
    int sms; /* the device's streaming multiprocessors */
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;
    bool allow_tf32;        /* FP32 GEMMs and convolutions may use TF32 tensor cores */
    bool conv_timed;        /* convolution algorithms timed once per shape (amp.conv_algo) */
    bool conv_deterministic; /* only algorithms cuDNN lists as deterministic (amp.deterministic) */
    mp_conv_layout conv_layout; /* FP32 convolutions' layout (engine/backends.h) */
    void *gemm_ws;          /* cuBLASLt workspace, MP_CUDA_GEMM_WS bytes */
    void *conv_ws;          /* cuDNN workspace, grown on demand up to conv_ws_limit */
    size_t conv_ws_bytes, conv_ws_limit;
    double *scratch;        /* MP_CUDA_SCRATCH doubles of device memory for reductions */
    double *host_scratch;   /* and their pinned host mirror */
    uint64_t moves;         /* workspace blocks moved (grown) so far: a graph captured before
                               a move points at a freed block (graph_valid) */
} mp_cuda_ctx;

/* MP_EINTERNAL naming `what` when the backend's stream is being captured into a graph (an op
 * that would allocate, free or wait there), else MP_OK. */
mp_status mp_cuda_not_capturing(const char *what);

enum { MP_CUDA_GEMM_WS = 32 << 20, MP_CUDA_SCRATCH = 64 };

/* The context; valid after mp_backend_cuda_init succeeded (NULL before). */
mp_cuda_ctx *mp_cuda_ctx_get(void);

/* A cuDNN workspace of at least `bytes` (the shared one, grown when needed), or MP_EINTERNAL
 * when `bytes` exceeds amp.conv_workspace_mb; callers ask only for algorithms whose workspace
 * fits mp_cuda_ctx_get()->conv_ws_limit. */
mp_status mp_cuda_conv_workspace(size_t bytes, void **ws);

/* An op's device scratch grown on demand: *block holds at least `bytes` bytes (*have says how
 * many it holds), counted as workspace and never shrunk. A smaller block is freed after the
 * stream's work (mp_cuda_mem_free) and a new one allocated; MP_EINTERNAL, with *block NULL and
 * *have 0, when that fails (mp_cuda_mem_alloc said why). */
mp_status mp_cuda_grow(void **block, size_t *have, size_t bytes);

/* t as a library call reads or writes it in dtype dt: t itself when it has dt and is 16-byte
 * aligned, else scratch `slot` (0 .. MP_CUDA_SLOTS-1, device memory grown on demand and never
 * shrunk, counted as workspace) viewed with t's shape, filled from t when `load`. An op uses
 * each slot for one operand; the stream orders one op's use before the next op's. */
enum { MP_CUDA_SLOTS = 4 };
mp_status mp_cuda_operand(const mp_tensor *t, mp_dtype dt, int slot, bool load, mp_tensor *out);

#define MP_CUBLAS_OK(rc) ((rc) == CUBLAS_STATUS_SUCCESS)
#define MP_CUDNN_OK(rc) ((rc) == CUDNN_STATUS_SUCCESS)

/* Checks that return MP_EINTERNAL with "[rank R @ host] file:line: STMT failed: message". */
#define CUBLAS_CHECK(stmt)                                                                  \
    MP_LIB_CHECK("cublas", MP_EINTERNAL, cublasStatus_t, stmt, MP_CUBLAS_OK,                \
                 cublasGetStatusString)
#define CUDNN_CHECK(stmt)                                                                   \
    MP_LIB_CHECK("cudnn", MP_EINTERNAL, cudnnStatus_t, stmt, MP_CUDNN_OK, cudnnGetErrorString)

/* Launches KERNEL<<<GRID, BLOCK, SMEM, stream>>>(args...) and checks the launch; MP_LAUNCH
 * with no dynamic shared memory. */
#define MP_LAUNCH_SMEM(KERNEL, GRID, BLOCK, SMEM, ...)                                      \
    do {                                                                                    \
        KERNEL<<<(GRID), (BLOCK), (SMEM), mp_cuda_ctx_get()->stream>>>(__VA_ARGS__);        \
        CUDA_CHECK(cudaGetLastError());                                                     \
    } while (0)
#define MP_LAUNCH(KERNEL, GRID, BLOCK, ...) MP_LAUNCH_SMEM(KERNEL, GRID, BLOCK, 0, __VA_ARGS__)

/* Fails with MP_EINTERNAL naming the op when cond is false (shapes, dtypes). */
#define MP_CUDA_REQUIRE(cond, op)                                                           \
    do {                                                                                    \
        if (!(cond))                                                                        \
            return mp_fail(MP_EINTERNAL, "cuda %s: shape or dtype mismatch (%s)", op, #cond); \
    } while (0)

/* Blocks of 256 threads, enough to cover n elements with a grid-stride loop (capped so that
 * very large tensors loop instead of launching millions of blocks). */
static inline unsigned mp_cuda_blocks(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

/* MP_EINTERNAL unless every tensor given has a dtype the CUDA backend stores (not FP64). */
mp_status mp_cuda_dtypes_ok(const char *op, int n, const mp_tensor *const *ts);
#define MP_CUDA_DTYPES(op, ...)                                                             \
    do {                                                                                    \
        const mp_tensor *mp_ts_[] = {__VA_ARGS__};                                          \
        MP_TRY(mp_cuda_dtypes_ok(op, (int)(sizeof mp_ts_ / sizeof mp_ts_[0]), mp_ts_));      \
    } while (0)

/* The cuDNN data type of an mp dtype. */
cudnnDataType_t mp_cudnn_dtype(mp_dtype dt);

/* The op implementations collected in the table (mp_backend_cuda): mp_cuda_<op> for every op of
 * engine/op_list.h. */
extern "C" {
#define MP_OP(ret, op, params) ret mp_cuda_##op params;
#include "engine/op_list.h"
}

#endif
