/* 2-D convolution on the GPU through cuDNN's legacy API: x and dy as NHWC tensors, w and dw as
 * KRSC filters (cuDNN's NHWC filter layout), cross-correlation with FP32 accumulation (compute
 * type CUDNN_DATA_FLOAT) for every dtype. fp16 and bf16 use tensor cores; FP32 uses
 * CUDNN_FMA_MATH, or CUDNN_DEFAULT_MATH (TF32 allowed) when amp.allow_tf32, and without TF32 it
 * runs every algorithm under CUDNN_FMA_MATH, so FP32 never uses TF32 silently. Only fp16 data
 * takes a candidate listed with CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: that math type lets cuDNN
 * convert data to FP16 for the tensor cores (cuDNN's cudnnMathType_t and "FP32-to-FP16
 * conversion"), a rounding amp.allow_tf32 does not ask for, and for bf16 data a loss of range
 * cuDNN does not document either way. How a call's algorithm and layout are chosen (plans,
 * cuDNN's heuristics or a timed trial, and the NCHW copies an FP32 call may run on):
 * conv_plan.cu.
 * cuDNN wants one dtype for the three tensors: the work dtype is the two inputs' dtype (FP32
 * when they differ), and a tensor of another dtype, or one not 16-byte aligned, goes through a
 * scratch buffer per operand (grown, never shrunk) with mp_cuda_convert. The layers need this
 * only at O1, for dw (FP32 gradients of the half weight copy) and for dx when the layer's input
 * is an FP32 activation: these are computed in half with FP32 accumulation and then widened, as
 * PyTorch's autocast does, so their values carry half rounding where the CPU reference rounds
 * once to FP32. Tensors are limited to INT_MAX elements (cuDNN's 32-bit indexing; no batch
 * splitting). The algorithms need not be deterministic (backward data's ALGO_0 and backward
 * filter's ALGO_0 and ALGO_3 sum with atomics) unless amp.deterministic asks for those cuDNN
 * lists as deterministic. */
#include <limits.h>
#include <string.h>

#include "engine/backend_cuda/conv_plan.cuh"
#include "engine/conv_geom.h"

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
    key->deterministic = c->conv_deterministic;
    key->layouts = c->conv_layout;
    key->ws_limit = c->conv_ws_limit;
    MP_TRY(mp_conv_plan_get(key, &d, pl));
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
    MP_TRY(mp_cuda_operand(x, dt, ROLE_IMAGE, true, &xw));
    MP_TRY(mp_cuda_operand(w, dt, ROLE_FILTER, true, &ww));
    MP_TRY(mp_cuda_operand(y, dt, ROLE_OUTPUT, false, &yw));
    conv_plan *pl;
    void *ws;
    conv_data opnd{xw.data, ww.data, yw.data};
    MP_TRY(conv_prepare(&key, CONV_FWD, dt, opnd, &pl, &ws));
    MP_TRY(mp_conv_plan_run(pl, opnd, ws));
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
    MP_TRY(mp_cuda_operand(dy, dt, ROLE_OUTPUT, true, &dyw));
    MP_TRY(mp_cuda_operand(w, dt, ROLE_FILTER, true, &ww));
    MP_TRY(mp_cuda_operand(dx, dt, ROLE_IMAGE, false, &dxw));
    conv_plan *pl;
    void *ws;
    conv_data opnd{dxw.data, ww.data, dyw.data};
    MP_TRY(conv_prepare(&key, CONV_BWD_DATA, dt, opnd, &pl, &ws));
    MP_TRY(mp_conv_plan_run(pl, opnd, ws));
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
    MP_TRY(mp_cuda_operand(x, dt, ROLE_IMAGE, true, &xw));
    MP_TRY(mp_cuda_operand(dy, dt, ROLE_OUTPUT, true, &dyw));
    MP_TRY(mp_cuda_operand(dw, dt, ROLE_FILTER, false, &dww));
    conv_plan *pl;
    void *ws;
    conv_data opnd{xw.data, dww.data, dyw.data};
    MP_TRY(conv_prepare(&key, CONV_BWD_FILTER, dt, opnd, &pl, &ws));
    MP_TRY(mp_conv_plan_run(pl, opnd, ws));
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
