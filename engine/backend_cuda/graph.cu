/* CUDA graphs (engine/op_list.h: graph_begin, graph_end, graph_launch, graph_free): the
 * backend's stream captured (cudaStreamBeginCapture in thread-local mode, so that a loader
 * thread's event waits go on), the graph instantiated at the end and launched on the stream.
 * What the capture holds is what CUDA records: kernel parameters by value, memcpy nodes with
 * their pointers; a call that waits for the stream or hands a value to the host fails inside
 * the capture, and the capture then fails at graph_end. cuBLAS, cuBLASLt and cuDNN calls are
 * captured with the workspaces the warm-up steps made (engine/backend_cuda/context.cu); an op
 * that would grow its scratch (mp_cuda_grow) inside the capture fails, which is why the engine
 * captures only after warm-up steps. */
#include "engine/backend_cuda/cuda.h"

extern "C" mp_status mp_cuda_graph_begin(void)
{
    CUDA_CHECK(cudaStreamBeginCapture(mp_cuda_ctx_get()->stream,
                                      cudaStreamCaptureModeThreadLocal));
    return MP_OK;
}

extern "C" mp_status mp_cuda_graph_end(void **graph)
{
    *graph = NULL;
    cudaGraph_t g = NULL;
    CUDA_CHECK(cudaStreamEndCapture(mp_cuda_ctx_get()->stream, &g));
    cudaGraphExec_t exec = NULL;
    cudaError_t rc = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    CUDA_CHECK(rc);
    *graph = exec;
    return MP_OK;
}

extern "C" mp_status mp_cuda_graph_launch(void *graph)
{
    CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)graph, mp_cuda_ctx_get()->stream));
    return MP_OK;
}

extern "C" void mp_cuda_graph_free(void *graph)
{
    if (graph)
        cudaGraphExecDestroy((cudaGraphExec_t)graph);
}
