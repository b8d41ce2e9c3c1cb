/* 2-D convolution on the GPU through cuDNN's legacy API: x and dy as NHWC tensors, w and dw as
 * KRSC filters (cuDNN's NHWC filter layout), cross-correlation with FP32 accumulation (compute
 * type CUDNN_DATA_FLOAT) for every dtype. fp16 and bf16 use tensor cores; FP32 uses
 * CUDNN_FMA_MATH, or CUDNN_DEFAULT_MATH (TF32 allowed) when amp.allow_tf32, and without TF32 it
 * runs every algorithm under CUDNN_FMA_MATH, so FP32 never uses TF32 silently. Only fp16 data
 * takes a candidate listed with CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: that math type lets cuDNN
 * convert data to FP16 for the tensor cores (cuDNN's cudnnMathType_t and "FP32-to-FP16
 * conversion"), a rounding amp.allow_tf32 does not ask for, and for bf16 data a loss of range
 * cuDNN does not document either way.
 * A plan per (direction, shapes, descriptor, dtype, TF32 flag, workspace bound, amp.conv_algo)
 * keeps its cuDNN descriptors and algorithm: the first of a list of candidates that succeeds,
 * passes the math-type rules above and whose workspace fits amp.conv_workspace_mb. The list is
 * cuDNN's heuristic one (cudnnGet*Algorithm_v7, best first; amp.conv_algo = "heuristic", the
 * default: the same choice in every run), or, with "timed", cudnnFind*AlgorithmEx's: the
 * algorithms timed by cuDNN on the call's own operands with a workspace within the bound,
 * fastest first, as PyTorch's cudnn.benchmark does (the choice, and with it the last bits of a
 * run, can differ between runs; FP32 without TF32 takes only entries timed under FMA math; a
 * trial that cannot run falls back to the heuristic list; a shape first met inside a graph
 * capture is refused, since the trial blocks the host). Plans live in a fixed table (the
 * oldest slot is reused when it is full, and a timed one re-timed when met again), so
 * steady-state steps allocate nothing; mp_cuda_conv_plans prints them (log.profile).
 * cuDNN wants one dtype for the three tensors: the work dtype is the two inputs' dtype (FP32
 * when they differ), and a tensor of another dtype, or one not 16-byte aligned, goes through a
 * scratch buffer per operand (grown, never shrunk) with mp_cuda_convert. The layers need this
 * only at O1, for dw (FP32 gradients of the half weight copy) and for dx when the layer's input
 * is an FP32 activation: these are computed in half with FP32 accumulation and then widened, as
 * PyTorch's autocast does, so their values carry half rounding where the CPU reference rounds
 * once to FP32. Tensors are limited to INT_MAX elements (cuDNN's 32-bit indexing; no batch
 * splitting). The algorithms need not be deterministic (backward filter may use atomics). */
#include <limits.h>
#include <string.h>

#include "engine/backend_cuda/cuda.h"
#include "engine/conv_geom.h"

typedef enum conv_dir { CONV_FWD, CONV_BWD_DATA, CONV_BWD_FILTER } conv_dir;

static const char *const conv_op_names[] = {"conv2d_forward", "conv2d_backward_data",
                                            "conv2d_backward_filter"};

/* Everything a plan depends on; built with memset so that memcmp compares it. */
typedef struct conv_key {
    int dir;
    int n, h, w, c, k, r, s, p, q;
    int groups, ph, pw, sh, sw, dh, dw;
    int dtype, tf32, timed;
    size_t ws_limit;
} conv_key;

typedef struct conv_plan {
    conv_key key;
    bool used;  /* key, descriptors and algo are valid */
    bool made;  /* the descriptors exist (kept for the slot's lifetime) */
    cudnnTensorDescriptor_t xd, yd; /* image side (x, dx) and output side (y, dy) */
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    int algo;   /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t by direction */
    size_t ws_bytes;
    cudnnMathType_t math; /* the math type it runs with */
    bool trial; /* chosen by the timed trial (else by the heuristic list) */
    float ms;   /* its time in the trial */
} conv_plan;

/* A call's operands by role, as the plan's descriptors name them: the image side (x, or dx),
 * the filter (w, or dw) and the output side (y, or dy), in the plan's work dtype. */
typedef struct conv_data {
    void *image, *filter, *output;
} conv_data;

enum { MP_CONV_PLANS = 64, MP_CONV_CANDIDATES = 16, MP_CONV_ALIGN = 16 };
static conv_plan mp_conv_plans[MP_CONV_PLANS];

/* One candidate, whatever its direction: cuDNN's perf result (time: ms in a timed trial). */
typedef struct conv_candidate {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnMathType_t math;
    float time;
} conv_candidate;

/* Scratch buffers for staged operands: image side, filter side, output side. */
enum { SLOT_IMAGE, SLOT_FILTER, SLOT_OUTPUT };

/* Checks the descriptor and the image-side (xt), filter (wt) and output-side (yt) tensors
 * (mp_conv_geometry, as the CPU reference does), plus the int ranges cuDNN's 4-D descriptors
 * need, and fills the key's geometry. */
static mp_status conv_geometry(const mp_conv_desc *d, const mp_tensor *xt, const mp_tensor *wt,
                               const mp_tensor *yt, const char *op, conv_key *key)
{
    mp_conv_geom g;
    MP_CUDA_REQUIRE(mp_conv_geometry(d, xt, wt, yt, &g), op);
    /* cuDNN's legacy descriptors and kernels index with 32-bit ints. */
    MP_CUDA_REQUIRE(mp_tensor_numel(xt) <= INT_MAX && mp_tensor_numel(yt) <= INT_MAX &&
                        mp_tensor_numel(wt) <= INT_MAX,
                    op);
    memset(key, 0, sizeof *key);
    key->n = (int)g.n, key->h = (int)g.h, key->w = (int)g.w, key->c = (int)g.c;
    key->k = (int)g.k, key->r = (int)g.r, key->s = (int)g.s, key->p = (int)g.p, key->q = (int)g.q;
    key->groups = d->groups;
    key->ph = d->pad[0], key->pw = d->pad[1];
    key->sh = d->stride[0], key->sw = d->stride[1];
    key->dh = d->dilation[0], key->dw = d->dilation[1];
    return MP_OK;
}

/* The workspace the plan's direction needs with `algo` and the descriptor's current math
 * type; a failure means the algorithm cannot run here. */
static cudnnStatus_t conv_ws_size(const conv_plan *pl, int algo, size_t *bytes)
{
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    switch (pl->key.dir) {
    case CONV_FWD:
        return cudnnGetConvolutionForwardWorkspaceSize(dnn, pl->xd, pl->wd, pl->cd, pl->yd,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    case CONV_BWD_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            dnn, pl->wd, pl->yd, pl->cd, pl->xd, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    default:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            dnn, pl->xd, pl->yd, pl->cd, pl->wd, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    }
}

/* Copies cuDNN's perf results (any direction) into candidates. */
template <typename PERF>
static void conv_take(const PERF *res, int count, conv_candidate *out)
{
    for (int i = 0; i < count; i++)
        out[i] = conv_candidate{(int)res[i].algo, res[i].status, res[i].memory, res[i].mathType,
                                res[i].time};
}

/* cuDNN's heuristic list for the plan's direction, best first. */
static mp_status conv_heuristics(const conv_plan *pl, conv_candidate *out, int *count)
{
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    *count = 0;
    switch (pl->key.dir) {
    case CONV_FWD: {
        cudnnConvolutionFwdAlgoPerf_t res[MP_CONV_CANDIDATES];
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dnn, pl->xd, pl->wd, pl->cd, pl->yd,
                                                           MP_CONV_CANDIDATES, count, res));
        conv_take(res, *count, out);
        break;
    }
    case CONV_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t res[MP_CONV_CANDIDATES];
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            dnn, pl->wd, pl->yd, pl->cd, pl->xd, MP_CONV_CANDIDATES, count, res));
        conv_take(res, *count, out);
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t res[MP_CONV_CANDIDATES];
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            dnn, pl->xd, pl->yd, pl->cd, pl->wd, MP_CONV_CANDIDATES, count, res));
        conv_take(res, *count, out);
        break;
    }
    }
    return MP_OK;
}

/* The timed trial (amp.conv_algo = "timed") on the call's own operands d (their contents are
 * overwritten where the direction writes: y, dx or dw, which the call then computes), fastest
 * first, with a workspace of its own: the largest any algorithm asks for within
 * amp.conv_workspace_mb, allocated for the trial and freed after it (counted as workspace
 * meanwhile, as PyTorch's allocator counts its benchmark's; the trial blocks the host). false when the trial could not run (no memory for it, or cuDNN refused),
 * the error state cleared: the caller falls back to the heuristic list. */
static bool conv_trial(conv_plan *pl, const conv_data *d, conv_candidate *out, int *count)
{
    static const int algos[] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    size_t ws_bytes = 0;
    for (int a = 0; a < algos[pl->key.dir]; a++) {
        size_t b = 0;
        if (conv_ws_size(pl, a, &b) == CUDNN_STATUS_SUCCESS && b <= pl->key.ws_limit &&
            b > ws_bytes)
            ws_bytes = b;
    }
    void *ws = ws_bytes > 0 ? mp_cuda_mem_alloc(ws_bytes, MP_MEM_WORKSPACE) : NULL;
    if (!ws)
        ws_bytes = 0; /* the trial runs the algorithms that need none */
    cudnnStatus_t rc;
    *count = 0;
    switch (pl->key.dir) {
    case CONV_FWD: {
        cudnnConvolutionFwdAlgoPerf_t res[MP_CONV_CANDIDATES];
        rc = cudnnFindConvolutionForwardAlgorithmEx(dnn, pl->xd, d->image, pl->wd, d->filter,
                                                    pl->cd, pl->yd, d->output,
                                                    MP_CONV_CANDIDATES, count, res, ws,
                                                    ws_bytes);
        conv_take(res, rc == CUDNN_STATUS_SUCCESS ? *count : 0, out);
        break;
    }
    case CONV_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t res[MP_CONV_CANDIDATES];
        rc = cudnnFindConvolutionBackwardDataAlgorithmEx(dnn, pl->wd, d->filter, pl->yd,
                                                         d->output, pl->cd, pl->xd, d->image,
                                                         MP_CONV_CANDIDATES, count, res, ws,
                                                         ws_bytes);
        conv_take(res, rc == CUDNN_STATUS_SUCCESS ? *count : 0, out);
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t res[MP_CONV_CANDIDATES];
        rc = cudnnFindConvolutionBackwardFilterAlgorithmEx(dnn, pl->xd, d->image, pl->yd,
                                                           d->output, pl->cd, pl->wd, d->filter,
                                                           MP_CONV_CANDIDATES, count, res, ws,
                                                           ws_bytes);
        conv_take(res, rc == CUDNN_STATUS_SUCCESS ? *count : 0, out);
        break;
    }
    }
    mp_cuda_mem_free(ws);
    /* an algorithm whose own allocation failed leaves the runtime's last error set, which
     * the next launch's check would take for its own (PyTorch clears it too) */
    (void)cudaGetLastError();
    if (rc != CUDNN_STATUS_SUCCESS)
        *count = 0;
    return rc == CUDNN_STATUS_SUCCESS;
}

/* Sets the slot's descriptors for key and picks the algorithm (see the file comment); d are
 * the call's operands, for the timed trial. */
static mp_status plan_make(const conv_key *key, const conv_data *d, conv_plan *pl)
{
    if (!pl->made) {
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->xd));
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->yd));
        CUDNN_CHECK(cudnnCreateFilterDescriptor(&pl->wd));
        CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&pl->cd));
        pl->made = true;
    }
    memcpy(&pl->key, key, sizeof *key); /* padding too: keys are compared with memcmp */
    const char *op = conv_op_names[key->dir];
    cudnnDataType_t dt = mp_cudnn_dtype((mp_dtype)key->dtype);
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(pl->xd, CUDNN_TENSOR_NHWC, dt, key->n, key->c, key->h,
                                           key->w));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(pl->yd, CUDNN_TENSOR_NHWC, dt, key->n, key->k, key->p,
                                           key->q));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(pl->wd, dt, CUDNN_TENSOR_NHWC, key->k,
                                           key->c / key->groups, key->r, key->s));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(pl->cd, key->ph, key->pw, key->sh, key->sw,
                                                key->dh, key->dw, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(pl->cd, key->groups));
    bool f32 = key->dtype == MP_F32;
    cudnnMathType_t math = !f32 ? CUDNN_TENSOR_OP_MATH
                           : key->tf32 ? CUDNN_DEFAULT_MATH
                                       : CUDNN_FMA_MATH;
    CUDNN_CHECK(cudnnSetConvolutionMathType(pl->cd, math));
    int on, oc, oh, ow;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(pl->cd, pl->xd, pl->wd, &on, &oc, &oh, &ow));
    if (on != key->n || oc != key->k || oh != key->p || ow != key->q)
        return mp_fail(MP_EINTERNAL, "cuda %s: cuDNN's output shape %dx%dx%dx%d differs from "
                       "(N, P, Q, K) = %dx%dx%dx%d", op, on, oh, ow, oc, key->n, key->p,
                       key->q, key->k);
    conv_candidate cand[MP_CONV_CANDIDATES];
    int count = 0;
    if (key->timed)
        MP_TRY(mp_cuda_not_capturing("timing convolution algorithms (amp.conv_algo = timed) "
                                     "for a new shape"));
    pl->trial = key->timed && conv_trial(pl, d, cand, &count);
    if (!pl->trial)
        MP_TRY(conv_heuristics(pl, cand, &count));
    for (int i = 0; i < count; i++) {
        if (cand[i].status != CUDNN_STATUS_SUCCESS || cand[i].memory > key->ws_limit)
            continue;
        bool converts = cand[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        bool tensor_op = cand[i].math == CUDNN_TENSOR_OP_MATH || converts;
        if ((converts && key->dtype != MP_F16) || (f32 && !key->tf32 && tensor_op))
            continue;
        /* the trial also times each algorithm under default math, which on this GPU may take
         * TF32: such a time says nothing of the FMA kernel that would run (PyTorch's
         * ASSERT_CORRECT_PRECISION) */
        if (pl->trial && f32 && !key->tf32 && cand[i].math != CUDNN_FMA_MATH)
            continue;
        /* cuDNN runs an algorithm with the math type it was listed with (as PyTorch does), except
         * that FP32 without TF32 always runs under CUDNN_FMA_MATH, which admits no tensor-core
         * kernel, whether cuDNN lists the algorithm as FMA or as default math. */
        CUDNN_CHECK(cudnnSetConvolutionMathType(pl->cd, f32 && !key->tf32 ? CUDNN_FMA_MATH
                                                                          : cand[i].math));
        size_t bytes = 0;
        if (conv_ws_size(pl, cand[i].algo, &bytes) != CUDNN_STATUS_SUCCESS ||
            bytes > key->ws_limit)
            continue;
        pl->algo = cand[i].algo;
        pl->ws_bytes = bytes > cand[i].memory ? bytes : cand[i].memory;
        pl->math = f32 && !key->tf32 ? CUDNN_FMA_MATH : cand[i].math;
        pl->ms = cand[i].time;
        pl->used = true;
        return MP_OK;
    }
    return mp_fail(MP_EINTERNAL, "cuda %s: no cuDNN algorithm for N=%d H=%d W=%d C=%d K=%d "
                   "R=%d S=%d groups=%d %s fits the workspace bound of %zu bytes "
                   "(amp.conv_workspace_mb)", op, key->n, key->h, key->w, key->c, key->k,
                   key->r, key->s, key->groups, mp_dtype_name((mp_dtype)key->dtype),
                   key->ws_limit);
}

/* The plan for key: found, or made in the next slot (round-robin over the table) for the call
 * whose operands are d. */
static mp_status plan_get(const conv_key *key, const conv_data *d, conv_plan **out)
{
    static int next;
    for (int i = 0; i < MP_CONV_PLANS; i++)
        if (mp_conv_plans[i].used && memcmp(&mp_conv_plans[i].key, key, sizeof *key) == 0) {
            *out = &mp_conv_plans[i];
            return MP_OK;
        }
    conv_plan *pl = &mp_conv_plans[next];
    next = (next + 1) % MP_CONV_PLANS;
    pl->used = false;
    MP_TRY(plan_make(key, d, pl));
    *out = pl;
    return MP_OK;
}

/* The work dtype of two inputs (see the file comment). */
static mp_dtype work_dtype(const mp_tensor *a, const mp_tensor *b)
{
    return a->dtype == b->dtype ? a->dtype : MP_F32;
}

/* Finishes the key for direction `dir` in dtype dt and returns its plan (made for the call's
 * operands d when new) and workspace. */
static mp_status conv_prepare(conv_key *key, conv_dir dir, mp_dtype dt, const conv_data &d,
                              conv_plan **pl, void **ws)
{
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    key->dir = dir;
    key->dtype = dt;
    key->tf32 = c->allow_tf32;
    key->timed = c->conv_timed;
    key->ws_limit = c->conv_ws_limit;
    MP_TRY(plan_get(key, &d, pl));
    return mp_cuda_conv_workspace((*pl)->ws_bytes, ws);
}

extern "C" mp_status mp_cuda_conv2d_forward(const mp_conv_desc *d, const mp_tensor *x,
                                            const mp_tensor *w, mp_tensor *y)
{
    MP_CUDA_DTYPES("conv2d_forward", x, w, y);
    conv_key key;
    MP_TRY(conv_geometry(d, x, w, y, "conv2d_forward", &key));
    if (key.n == 0)
        return MP_OK;
    mp_dtype dt = work_dtype(x, w);
    mp_tensor xw, ww, yw;
    MP_TRY(mp_cuda_operand(x, dt, SLOT_IMAGE, true, &xw));
    MP_TRY(mp_cuda_operand(w, dt, SLOT_FILTER, true, &ww));
    MP_TRY(mp_cuda_operand(y, dt, SLOT_OUTPUT, false, &yw));
    conv_plan *pl;
    void *ws;
    MP_TRY(conv_prepare(&key, CONV_FWD, dt, conv_data{xw.data, ww.data, yw.data}, &pl, &ws));
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnConvolutionForward(c->dnn, &one, pl->xd, xw.data, pl->wd, ww.data, pl->cd,
                                        (cudnnConvolutionFwdAlgo_t)pl->algo, ws, pl->ws_bytes,
                                        &zero, pl->yd, yw.data));
    return yw.data == y->data ? MP_OK : mp_cuda_convert(&yw, y);
}

extern "C" mp_status mp_cuda_conv2d_backward_data(const mp_conv_desc *d, const mp_tensor *dy,
                                                  const mp_tensor *w, mp_tensor *dx)
{
    MP_CUDA_DTYPES("conv2d_backward_data", dy, w, dx);
    conv_key key;
    MP_TRY(conv_geometry(d, dx, w, dy, "conv2d_backward_data", &key));
    if (key.n == 0)
        return MP_OK;
    mp_dtype dt = work_dtype(dy, w);
    mp_tensor dyw, ww, dxw;
    MP_TRY(mp_cuda_operand(dy, dt, SLOT_OUTPUT, true, &dyw));
    MP_TRY(mp_cuda_operand(w, dt, SLOT_FILTER, true, &ww));
    MP_TRY(mp_cuda_operand(dx, dt, SLOT_IMAGE, false, &dxw));
    conv_plan *pl;
    void *ws;
    MP_TRY(conv_prepare(&key, CONV_BWD_DATA, dt, conv_data{dxw.data, ww.data, dyw.data}, &pl,
                        &ws));
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnConvolutionBackwardData(c->dnn, &one, pl->wd, ww.data, pl->yd, dyw.data,
                                             pl->cd, (cudnnConvolutionBwdDataAlgo_t)pl->algo,
                                             ws, pl->ws_bytes, &zero, pl->xd, dxw.data));
    return dxw.data == dx->data ? MP_OK : mp_cuda_convert(&dxw, dx);
}

extern "C" mp_status mp_cuda_conv2d_backward_filter(const mp_conv_desc *d, const mp_tensor *x,
                                                    const mp_tensor *dy, mp_tensor *dw)
{
    MP_CUDA_DTYPES("conv2d_backward_filter", x, dy, dw);
    conv_key key;
    MP_TRY(conv_geometry(d, x, dw, dy, "conv2d_backward_filter", &key));
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    if (key.n == 0) { /* no images: the gradient is zero (all-zero bits in every dtype) */
        CUDA_CHECK(cudaMemsetAsync(dw->data, 0, (size_t)mp_tensor_bytes(dw), c->stream));
        return MP_OK;
    }
    mp_dtype dt = work_dtype(x, dy);
    mp_tensor xw, dyw, dww;
    MP_TRY(mp_cuda_operand(x, dt, SLOT_IMAGE, true, &xw));
    MP_TRY(mp_cuda_operand(dy, dt, SLOT_OUTPUT, true, &dyw));
    MP_TRY(mp_cuda_operand(dw, dt, SLOT_FILTER, false, &dww));
    conv_plan *pl;
    void *ws;
    MP_TRY(conv_prepare(&key, CONV_BWD_FILTER, dt, conv_data{xw.data, dww.data, dyw.data}, &pl,
                        &ws));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->dnn, &one, pl->xd, xw.data, pl->yd, dyw.data,
                                               pl->cd, (cudnnConvolutionBwdFilterAlgo_t)pl->algo,
                                               ws, pl->ws_bytes, &zero, pl->wd, dww.data));
    return dww.data == dw->data ? MP_OK : mp_cuda_convert(&dww, dw);
}

/* cuDNN's two backward calls; the operands are converted per call (only O1's mixed dtypes
 * convert at all). */
extern "C" mp_status mp_cuda_conv2d_backward(const mp_conv_desc *d, const mp_tensor *x,
                                             const mp_tensor *w, const mp_tensor *dy,
                                             mp_tensor *dw, mp_tensor *dx)
{
    MP_TRY(mp_cuda_conv2d_backward_filter(d, x, dy, dw));
    return dx ? mp_cuda_conv2d_backward_data(d, dy, w, dx) : MP_OK;
}

/* cuDNN's name of a direction's algorithm (cudnn_cnn.h's enums, without their prefixes). */
static const char *conv_algo_name(int dir, int algo)
{
    static const char *const fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                      "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *const data[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                       "WINOGRAD_NONFUSED"};
    static const char *const filter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                         "WINOGRAD_NONFUSED", "FFT_TILING"};
    static const struct {
        const char *const *names;
        int n;
    } dirs[] = {{fwd, (int)(sizeof fwd / sizeof *fwd)},
                {data, (int)(sizeof data / sizeof *data)},
                {filter, (int)(sizeof filter / sizeof *filter)}};
    return algo >= 0 && algo < dirs[dir].n ? dirs[dir].names[algo] : "?";
}

/* A math type's name: "fma", "tensor op", "tensor op (fp16 conversion)" or "default". */
static const char *conv_math_name(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_FMA_MATH: return "fma";
    case CUDNN_TENSOR_OP_MATH: return "tensor op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor op (fp16 conversion)";
    default: return "default";
    }
}

extern "C" void mp_cuda_conv_plans(FILE *out)
{
    int n = 0;
    for (int i = 0; i < MP_CONV_PLANS; i++)
        n += mp_conv_plans[i].used;
    if (n == 0)
        return;
    fprintf(out, "convolution plans (cuDNN): %d\n", n);
    for (int i = 0; i < MP_CONV_PLANS; i++) {
        const conv_plan *pl = &mp_conv_plans[i];
        const conv_key *k = &pl->key;
        if (!pl->used)
            continue;
        fprintf(out, "  %-22s %-4s N=%d H=%d W=%d C=%d K=%d %dx%d stride %dx%d pad %dx%d "
                "dilation %dx%d groups %d: %s, %s math, workspace %zu bytes",
                conv_op_names[k->dir], mp_dtype_name((mp_dtype)k->dtype), k->n, k->h, k->w,
                k->c, k->k, k->r, k->s, k->sh, k->sw, k->ph, k->pw, k->dh, k->dw, k->groups,
                conv_algo_name(k->dir, pl->algo), conv_math_name(pl->math), pl->ws_bytes);
        if (pl->trial)
            fprintf(out, ", timed %.3f ms\n", pl->ms);
        else
            fprintf(out, ", heuristic%s\n", k->timed ? " (the timed trial failed)" : "");
    }
}
