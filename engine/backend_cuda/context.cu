/* The CUDA backend's one context: device, stream, cuBLAS/cuBLASLt/cuDNN handles on that stream,
 * the GEMM workspace (32 MiB, as cuBLAS recommends on Hopper), the cuDNN workspace grown on
 * demand up to the configured bound, and a small reduction scratch with its pinned mirror. */
#include "engine/backend_cuda/api.h"
#include "engine/backend_cuda/cuda.h"

static mp_cuda_ctx mp_ctx;
static bool mp_ctx_open;

mp_cuda_ctx *mp_cuda_ctx_get(void) { return mp_ctx_open ? &mp_ctx : NULL; }

extern "C" int mp_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

/* Creates the stream, handles and workspaces on the current device. */
static mp_status ctx_create(mp_cuda_ctx *c)
{
    CUDA_CHECK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, c->device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&c->blas));
    CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
    CUBLAS_CHECK(cublasLtCreate(&c->lt));
    CUDNN_CHECK(cudnnCreate(&c->dnn));
    CUDNN_CHECK(cudnnSetStream(c->dnn, c->stream));
    CUDA_CHECK(cudaMalloc(&c->gemm_ws, MP_CUDA_GEMM_WS));
    mp_mem_count(MP_MEM_DEVICE, MP_MEM_WORKSPACE, MP_CUDA_GEMM_WS);
    /* cuBLAS (the attention's batched GEMMs) shares the cuBLASLt workspace, on the same stream:
     * with one of its own it never allocates, also inside a graph capture */
    CUBLAS_CHECK(cublasSetWorkspace(c->blas, c->gemm_ws, MP_CUDA_GEMM_WS));
    CUDA_CHECK(cudaMalloc((void **)&c->scratch, MP_CUDA_SCRATCH * sizeof(double)));
    CUDA_CHECK(cudaMemset(c->scratch, 0, MP_CUDA_SCRATCH * sizeof(double)));
    CUDA_CHECK(cudaMallocHost((void **)&c->host_scratch, MP_CUDA_SCRATCH * sizeof(double)));
    return MP_OK;
}

extern "C" mp_status mp_cuda_open(const mp_backend_options *o)
{
    if (!mp_ctx_open) {
        cudaError_t e = cudaSetDevice(o->device);
        if (e != cudaSuccess)
            return mp_fail(MP_EUSAGE, "CUDA device %d cannot be used: %s", o->device,
                           cudaGetErrorString(e));
        mp_ctx.device = o->device;
        MP_TRY(ctx_create(&mp_ctx));
        mp_ctx_open = true;
    }
    mp_ctx.allow_tf32 = o->allow_tf32;
    mp_ctx.conv_ws_limit = o->conv_workspace_bytes > 0 ? (size_t)o->conv_workspace_bytes : 0;
    mp_ctx.conv_timed = o->conv_timed;
    mp_ctx.conv_deterministic = o->conv_deterministic;
    mp_ctx.conv_layout = o->conv_layout;
    return MP_OK;
}

mp_status mp_cuda_not_capturing(const char *what)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(mp_ctx.stream, &cs));
    if (cs != cudaStreamCaptureStatusNone)
        return mp_fail(MP_EINTERNAL, "graph capture: %s inside a capture, which a graph cannot "
                       "hold", what);
    return MP_OK;
}

mp_status mp_cuda_conv_workspace(size_t bytes, void **ws)
{
    mp_cuda_ctx *c = &mp_ctx;
    if (bytes > c->conv_ws_limit)
        return mp_fail(MP_EINTERNAL,
                       "cuda: a convolution needs %zu bytes of workspace, above the bound of "
                       "%zu (amp.conv_workspace_mb)",
                       bytes, c->conv_ws_limit);
    if (bytes > c->conv_ws_bytes) {
        MP_TRY(mp_cuda_not_capturing("growing the cuDNN workspace"));
        c->moves++;
        /* Work queued on the stream may still read the old block: free it in stream order. */
        if (c->conv_ws)
            CUDA_CHECK(cudaFreeAsync(c->conv_ws, c->stream));
        mp_mem_count(MP_MEM_DEVICE, MP_MEM_WORKSPACE, -(int64_t)c->conv_ws_bytes);
        c->conv_ws = NULL;
        c->conv_ws_bytes = 0;
        CUDA_CHECK(cudaMallocAsync(&c->conv_ws, bytes, c->stream));
        c->conv_ws_bytes = bytes;
        mp_mem_count(MP_MEM_DEVICE, MP_MEM_WORKSPACE, (int64_t)bytes);
    }
    *ws = c->conv_ws;
    return MP_OK;
}

mp_status mp_cuda_dtypes_ok(const char *op, int n, const mp_tensor *const *ts)
{
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->dtype == MP_F64)
            return mp_fail(MP_EINTERNAL, "cuda %s: FP64 tensors are the CPU reference's only",
                           op);
    return MP_OK;
}

cudnnDataType_t mp_cudnn_dtype(mp_dtype dt)
{
    switch (dt) {
    case MP_F16: return CUDNN_DATA_HALF;
    case MP_BF16: return CUDNN_DATA_BFLOAT16;
    case MP_F64: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
    }
}

static void *mp_slot[MP_CUDA_SLOTS];
static size_t mp_slot_bytes[MP_CUDA_SLOTS];

mp_status mp_cuda_grow(void **block, size_t *have, size_t bytes)
{
    if (bytes <= *have)
        return MP_OK;
    MP_TRY(mp_cuda_not_capturing("growing an op's scratch"));
    mp_ctx.moves++;
    mp_cuda_mem_free(*block);
    *have = 0;
    *block = mp_cuda_mem_alloc(bytes, MP_MEM_WORKSPACE);
    if (!*block)
        return MP_EINTERNAL; /* mp_cuda_mem_alloc said why */
    *have = bytes;
    return MP_OK;
}

mp_status mp_cuda_operand(const mp_tensor *t, mp_dtype dt, int slot, bool load, mp_tensor *out)
{
    *out = *t;
    if (t->dtype == dt && (uintptr_t)t->data % 16 == 0)
        return MP_OK;
    MP_TRY(mp_cuda_grow(&mp_slot[slot], &mp_slot_bytes[slot],
                        (size_t)mp_tensor_numel(t) * mp_dtype_size(dt)));
    out->dtype = dt;
    out->data = mp_slot[slot];
    return load ? mp_cuda_convert(t, out) : MP_OK; /* a copy for equal dtypes */
}
