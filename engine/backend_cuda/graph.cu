/* CUDA graphs (engine/op_list.h: graph_begin, graph_end, graph_launch, graph_free,
 * graph_valid): the backend's stream captured (cudaStreamBeginCapture in thread-local mode, so
 * that a loader thread's event waits go on), the graph instantiated at the end and launched on
 * the stream. What the capture holds is what CUDA records: kernel parameters by value, memcpy
 * nodes with their pointers. A call that waits for the stream or hands a value to the host fails
 * inside the capture, and so does an op that would grow its workspace (mp_cuda_grow, the cuDNN
 * workspace: mp_cuda_not_capturing), which is why the engine captures only after warm-up steps;
 * cuBLAS, cuBLASLt and cuDNN are captured with the workspaces those steps made
 * (engine/backend_cuda/context.cu). A workspace grown after the capture (an op at another
 * shape) frees the block the graph points at: graph_valid is false from then on. */
#include <stdlib.h>

#include "engine/backend_cuda/cuda.h"

typedef struct mp_cuda_graph {
    cudaGraphExec_t exec;
    uint64_t moves; /* the context's workspace moves when it was captured */
} mp_cuda_graph;

extern "C" mp_status mp_cuda_graph_begin(void)
{
    CUDA_CHECK(cudaStreamBeginCapture(mp_cuda_ctx_get()->stream,
                                      cudaStreamCaptureModeThreadLocal));
    return MP_OK;
}

/* A failed capture leaves its error in the thread's last-error slot too, where the next
 * kernel launch's check would read it as its own: cleared here, the call's own error returned. */
static mp_status capture_failed(cudaError_t rc, const char *call)
{
    cudaGetLastError();
    return mp_fail(MP_EINTERNAL, "graph capture: %s: %s", call, cudaGetErrorString(rc));
}

extern "C" mp_status mp_cuda_graph_end(void **graph)
{
    *graph = NULL;
    cudaGraph_t g = NULL;
    cudaError_t rc = cudaStreamEndCapture(mp_cuda_ctx_get()->stream, &g);
    if (rc != cudaSuccess) {
        if (g)
            cudaGraphDestroy(g);
        return capture_failed(rc, "cudaStreamEndCapture");
    }
    mp_cuda_graph *out = (mp_cuda_graph *)calloc(1, sizeof *out);
    if (!out) {
        cudaGraphDestroy(g);
        return mp_fail(MP_EINTERNAL, "graph capture: out of host memory");
    }
    rc = cudaGraphInstantiate(&out->exec, g, 0);
    cudaGraphDestroy(g);
    if (rc != cudaSuccess) {
        free(out);
        return capture_failed(rc, "cudaGraphInstantiate");
    }
    out->moves = mp_cuda_ctx_get()->moves;
    *graph = out;
    return MP_OK;
}

extern "C" mp_status mp_cuda_graph_launch(void *graph)
{
    CUDA_CHECK(cudaGraphLaunch(((mp_cuda_graph *)graph)->exec, mp_cuda_ctx_get()->stream));
    return MP_OK;
}

extern "C" void mp_cuda_graph_free(void *graph)
{
    mp_cuda_graph *g = (mp_cuda_graph *)graph;
    if (!g)
        return;
    cudaGraphExecDestroy(g->exec);
    free(g);
}

extern "C" bool mp_cuda_graph_valid(const void *graph)
{
    const mp_cuda_graph *g = (const mp_cuda_graph *)graph;
    return g && g->moves == mp_cuda_ctx_get()->moves;
}

extern "C" mp_status mp_cuda_graph_call(mp_status (*fn)(const void *arg), const void *arg,
                                        size_t bytes)
{
    (void)fn;
    (void)arg;
    (void)bytes;
    return mp_fail(MP_EUSAGE, "graph_call: a CUDA graph holds NCCL's collectives as its own "
                   "nodes, not host calls");
}
