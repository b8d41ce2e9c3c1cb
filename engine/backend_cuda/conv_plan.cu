/* Convolution plans (conv_plan.cuh). A plan per (direction, shapes, descriptor, dtype, TF32
 * flag, workspace bound, amp.conv_algo, layout setting) keeps its cuDNN descriptors, layout and
 * algorithm: the first of a list of candidates that succeeds, passes the math-type rules of
 * conv2d.cu's comment and whose workspace fits amp.conv_workspace_mb. The list is cuDNN's
 * heuristic one (cudnnGet*Algorithm_v7, best first; amp.conv_algo = "heuristic", the default: the
 * same choice in every run), or, with "timed", cudnnFind*AlgorithmEx's: the algorithms timed by
 * cuDNN on the call's own operands with a workspace within the bound, fastest first, as
 * PyTorch's cudnn.benchmark does (the choice, and with it the last bits of a run, can differ
 * between runs; FP32 without TF32 takes only entries timed under FMA math; a trial that cannot
 * run falls back to the heuristic list; a shape first met inside a graph capture is refused,
 * since the trial blocks the host). Plans live in a fixed table (the oldest slot is reused when
 * it is full, and a timed one re-timed when met again), so steady-state steps allocate nothing;
 * with amp.deterministic every candidate cuDNN does not list as deterministic is passed over;
 * mp_cuda_conv_plans prints them (log.profile).
 * An FP32 plan may run in NCHW, the layout cuDNN's FP32 (FMA) kernels are tuned for and PyTorch's
 * default: the direction's two inputs are copied into NCHW buffers (cudnnTransformTensor; grown,
 * never shrunk, counted as workspace), the call runs there, and its result is copied back, so
 * the engine's tensors stay NHWC. Under amp.conv_algo = "timed" (with the backend's conv_layout
 * AUTO) the trial times the NCHW candidates too, plus the copies, and keeps the faster layout;
 * half plans, on tensor cores, stay NHWC; conv_layout NHWC or NCHW fixes it (the GPU tests). */
#include "engine/backend_cuda/conv_plan.cuh"

#include <string.h>

static const char *const conv_op_names[] = {"conv2d_forward", "conv2d_backward_data",
                                            "conv2d_backward_filter"};

/* The role a direction writes: y, dx, dw. */
static const int conv_out_role[3] = {ROLE_OUTPUT, ROLE_IMAGE, ROLE_FILTER};

/* The operand of `role` in d. */
static void **conv_role(conv_data *d, int role)
{
    return role == ROLE_IMAGE ? &d->image : role == ROLE_FILTER ? &d->filter : &d->output;
}

enum { MP_CONV_PLANS = 64, MP_CONV_CANDIDATES = 16 };
static conv_plan mp_conv_plans[MP_CONV_PLANS];

/* One candidate, whatever its direction: cuDNN's perf result (time: ms in a timed trial). */
typedef struct conv_candidate {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnMathType_t math;
    float time;
    bool deterministic; /* cuDNN lists it as CUDNN_DETERMINISTIC */
} conv_candidate;

/* The workspace the plan's direction needs with `algo` and the descriptor's current math
 * type; a failure means the algorithm cannot run here. */
static cudnnStatus_t conv_ws_size(const conv_plan *pl, int algo, size_t *bytes)
{
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    int L = pl->layout;
    switch (pl->key.dir) {
    case CONV_FWD:
        return cudnnGetConvolutionForwardWorkspaceSize(dnn, pl->xd[L], pl->wd[L], pl->cd,
                                                       pl->yd[L],
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    case CONV_BWD_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(dnn, pl->wd[L], pl->yd[L], pl->cd,
                                                            pl->xd[L],
                                                            (cudnnConvolutionBwdDataAlgo_t)algo,
                                                            bytes);
    default:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            dnn, pl->xd[L], pl->yd[L], pl->cd, pl->wd[L], (cudnnConvolutionBwdFilterAlgo_t)algo,
            bytes);
    }
}

/* Copies cuDNN's perf results (any direction) into candidates. */
template <typename PERF>
static void conv_take(const PERF *res, int count, conv_candidate *out)
{
    for (int i = 0; i < count; i++)
        out[i] = conv_candidate{(int)res[i].algo, res[i].status, res[i].memory, res[i].mathType,
                                res[i].time, res[i].determinism == CUDNN_DETERMINISTIC};
}

/* cuDNN's heuristic list for the plan's direction and layout, best first. */
static mp_status conv_heuristics(const conv_plan *pl, conv_candidate *out, int *count)
{
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    int L = pl->layout;
    *count = 0;
    switch (pl->key.dir) {
    case CONV_FWD: {
        cudnnConvolutionFwdAlgoPerf_t res[MP_CONV_CANDIDATES];
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dnn, pl->xd[L], pl->wd[L], pl->cd,
                                                           pl->yd[L], MP_CONV_CANDIDATES, count,
                                                           res));
        conv_take(res, *count, out);
        break;
    }
    case CONV_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t res[MP_CONV_CANDIDATES];
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            dnn, pl->wd[L], pl->yd[L], pl->cd, pl->xd[L], MP_CONV_CANDIDATES, count, res));
        conv_take(res, *count, out);
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t res[MP_CONV_CANDIDATES];
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            dnn, pl->xd[L], pl->yd[L], pl->cd, pl->wd[L], MP_CONV_CANDIDATES, count, res));
        conv_take(res, *count, out);
        break;
    }
    }
    return MP_OK;
}

/* The timed trial (amp.conv_algo = "timed") in the plan's layout on the operands d (their
 * contents are overwritten where the direction writes: y, dx or dw, which the call then
 * computes), fastest first, with a workspace of its own: the largest any algorithm asks for
 * within amp.conv_workspace_mb, allocated for the trial and freed after it (counted as workspace
 * meanwhile, as PyTorch's allocator counts its benchmark's; the trial blocks the host). false
 * when the trial could not run (cuDNN refused), the error state cleared: the caller falls back
 * to the heuristic list. */
static bool conv_trial(conv_plan *pl, const conv_data *d, conv_candidate *out, int *count)
{
    static const int algos[] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    int L = pl->layout;
    size_t ws_bytes = 0;
    for (int a = 0; a < algos[pl->key.dir]; a++) {
        size_t b = 0;
        if (conv_ws_size(pl, a, &b) == CUDNN_STATUS_SUCCESS && b <= pl->key.ws_limit &&
            b > ws_bytes)
            ws_bytes = b;
    }
    void *ws = ws_bytes > 0 ? mp_cuda_mem_alloc(ws_bytes, MP_MEM_WORKSPACE) : NULL;
    if (!ws && ws_bytes > 0) { /* the trial runs the algorithms that need none */
        ws_bytes = 0;
        mp_error_clear();
    }
    cudnnStatus_t rc;
    *count = 0;
    switch (pl->key.dir) {
    case CONV_FWD: {
        cudnnConvolutionFwdAlgoPerf_t res[MP_CONV_CANDIDATES];
        rc = cudnnFindConvolutionForwardAlgorithmEx(dnn, pl->xd[L], d->image, pl->wd[L],
                                                    d->filter, pl->cd, pl->yd[L], d->output,
                                                    MP_CONV_CANDIDATES, count, res, ws,
                                                    ws_bytes);
        conv_take(res, rc == CUDNN_STATUS_SUCCESS ? *count : 0, out);
        break;
    }
    case CONV_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t res[MP_CONV_CANDIDATES];
        rc = cudnnFindConvolutionBackwardDataAlgorithmEx(dnn, pl->wd[L], d->filter, pl->yd[L],
                                                         d->output, pl->cd, pl->xd[L],
                                                         d->image, MP_CONV_CANDIDATES, count,
                                                         res, ws, ws_bytes);
        conv_take(res, rc == CUDNN_STATUS_SUCCESS ? *count : 0, out);
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t res[MP_CONV_CANDIDATES];
        rc = cudnnFindConvolutionBackwardFilterAlgorithmEx(dnn, pl->xd[L], d->image, pl->yd[L],
                                                           d->output, pl->cd, pl->wd[L],
                                                           d->filter, MP_CONV_CANDIDATES, count,
                                                           res, ws, ws_bytes);
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

/* Sets the slot's descriptors for key, both layouts, and the convolution's with math type `math`;
 * MP_EINTERNAL when cuDNN's output shape is not the key's. */
static mp_status plan_descriptors(const conv_key *key, conv_plan *pl, cudnnMathType_t math)
{
    if (!pl->made) {
        for (int L = 0; L < 2; L++) {
            CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->xd[L]));
            CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->yd[L]));
            CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->wt[L]));
            CUDNN_CHECK(cudnnCreateFilterDescriptor(&pl->wd[L]));
        }
        CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&pl->cd));
        pl->made = true;
    }
    memcpy(&pl->key, key, sizeof *key); /* padding too: keys are compared with memcmp */
    cudnnDataType_t dt = mp_cudnn_dtype((mp_dtype)key->dtype);
    int cg = key->c / key->groups;
    for (int L = 0; L < 2; L++) {
        cudnnTensorFormat_t f = L == LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
        CUDNN_CHECK(cudnnSetTensor4dDescriptor(pl->xd[L], f, dt, key->n, key->c, key->h,
                                               key->w));
        CUDNN_CHECK(cudnnSetTensor4dDescriptor(pl->yd[L], f, dt, key->n, key->k, key->p,
                                               key->q));
        CUDNN_CHECK(cudnnSetTensor4dDescriptor(pl->wt[L], f, dt, key->k, cg, key->r, key->s));
        CUDNN_CHECK(cudnnSetFilter4dDescriptor(pl->wd[L], dt, f, key->k, cg, key->r, key->s));
    }
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(pl->cd, key->ph, key->pw, key->sh, key->sw,
                                                key->dh, key->dw, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(pl->cd, key->groups));
    CUDNN_CHECK(cudnnSetConvolutionMathType(pl->cd, math));
    int on, oc, oh, ow;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(pl->cd, pl->xd[0], pl->wd[0], &on, &oc,
                                                      &oh, &ow));
    if (on != key->n || oc != key->k || oh != key->p || ow != key->q)
        return mp_fail(MP_EINTERNAL, "cuda %s: cuDNN's output shape %dx%dx%dx%d differs from "
                       "(N, P, Q, K) = %dx%dx%dx%d", conv_op_names[key->dir], on, oh, ow, oc,
                       key->n, key->p, key->q, key->k);
    return MP_OK;
}

/* The NCHW buffers, one per role (counted as workspace), and what the NCHW plans made so far
 * need of each: grown to a plan's shapes when it is made, and cut back to the need when a timed
 * trial grew them and NHWC won. */
static void *mp_conv_nchw[ROLES];
static size_t mp_conv_nchw_bytes[ROLES], mp_conv_nchw_need[ROLES];

/* The bytes of the plan's operands, by role. */
static void conv_sizes(const conv_plan *pl, size_t bytes[ROLES])
{
    const conv_key *k = &pl->key;
    size_t es = mp_dtype_size((mp_dtype)k->dtype);
    bytes[ROLE_IMAGE] = (size_t)k->n * k->h * k->w * k->c * es;
    bytes[ROLE_FILTER] = (size_t)k->k * (k->c / k->groups) * k->r * k->s * es;
    bytes[ROLE_OUTPUT] = (size_t)k->n * k->p * k->q * k->k * es;
}

/* Points r's operands at the NCHW buffers, grown to the plan's shapes. */
static mp_status conv_nchw_data(const conv_plan *pl, conv_data *r)
{
    size_t bytes[ROLES];
    conv_sizes(pl, bytes);
    for (int role = 0; role < ROLES; role++) {
        MP_TRY(mp_cuda_grow(&mp_conv_nchw[role], &mp_conv_nchw_bytes[role], bytes[role]));
        *conv_role(r, role) = mp_conv_nchw[role];
    }
    return MP_OK;
}

/* After an FP32 plan chose its layout: an NCHW plan adds its shapes to the need; otherwise a
 * buffer larger than the need (grown for a trial NHWC won) is freed, a move for the graphs that
 * may point at it (graph_valid), and one smaller (a grow that failed) grown to the need. */
static mp_status conv_nchw_settle(const conv_plan *pl)
{
    size_t bytes[ROLES];
    conv_sizes(pl, bytes);
    for (int role = 0; role < ROLES; role++) {
        size_t *need = &mp_conv_nchw_need[role];
        if (pl->layout == LAYOUT_NCHW) {
            *need = bytes[role] > *need ? bytes[role] : *need;
            continue;
        }
        if (mp_conv_nchw_bytes[role] == *need)
            continue;
        if (mp_conv_nchw_bytes[role] > *need) {
            mp_cuda_ctx_get()->moves++;
            mp_cuda_mem_free(mp_conv_nchw[role]);
            mp_conv_nchw[role] = NULL;
            mp_conv_nchw_bytes[role] = 0;
        }
        if (*need > 0)
            MP_TRY(mp_cuda_grow(&mp_conv_nchw[role], &mp_conv_nchw_bytes[role], *need));
    }
    return MP_OK;
}

/* Copies the operand of `role` from `from` to `to`: from the engine's NHWC layout to NCHW
 * (to_nchw), or back. */
static mp_status conv_copy(const conv_plan *pl, int role, const void *from, void *to,
                           bool to_nchw)
{
    const cudnnTensorDescriptor_t *td = role == ROLE_IMAGE    ? pl->xd
                                        : role == ROLE_FILTER ? pl->wt
                                                              : pl->yd;
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnTransformTensor(mp_cuda_ctx_get()->dnn, &one, td[!to_nchw], from, &zero,
                                     td[to_nchw], to));
    return MP_OK;
}

/* The copies an NCHW call makes around d (the NHWC operands; r: the NCHW buffers): the
 * direction's two inputs into r when `in`, else its result back into d. */
static mp_status conv_copies(const conv_plan *pl, conv_data *d, conv_data *r, bool in)
{
    int out = conv_out_role[pl->key.dir];
    for (int role = 0; role < ROLES; role++)
        if (in && role != out)
            MP_TRY(conv_copy(pl, role, *conv_role(d, role), *conv_role(r, role), true));
        else if (!in && role == out)
            MP_TRY(conv_copy(pl, role, *conv_role(r, role), *conv_role(d, role), false));
    return MP_OK;
}

/* For the timed trial in NCHW (the plan's layout set to it): the inputs of d copied into the
 * NCHW buffers r, and *ms the time of those copies and of the result's copy back (d's output is
 * overwritten, as the trial's calls overwrite it). false, the error state cleared, when they
 * could not be made. */
static bool conv_nchw_trial_data(conv_plan *pl, const conv_data *d, conv_data *r, float *ms)
{
    cudaStream_t stream = mp_cuda_ctx_get()->stream;
    cudaEvent_t ev[2] = {NULL, NULL};
    conv_data nhwc = *d;
    pl->layout = LAYOUT_NCHW;
    *r = *d;
    /* the copies run twice and the second is timed: a first launch may load the kernels */
    bool ok = conv_nchw_data(pl, r) == MP_OK && cudaEventCreate(&ev[0]) == cudaSuccess &&
              cudaEventCreate(&ev[1]) == cudaSuccess;
    for (int pass = 0; pass < 2 && ok; pass++)
        ok = (pass == 0 || cudaEventRecord(ev[0], stream) == cudaSuccess) &&
             conv_copies(pl, &nhwc, r, true) == MP_OK &&
             conv_copies(pl, &nhwc, r, false) == MP_OK;
    ok = ok && cudaEventRecord(ev[1], stream) == cudaSuccess &&
              cudaEventSynchronize(ev[1]) == cudaSuccess &&
              cudaEventElapsedTime(ms, ev[0], ev[1]) == cudaSuccess;
    for (int i = 0; i < 2; i++)
        if (ev[i])
            (void)cudaEventDestroy(ev[i]);
    if (!ok) {
        (void)cudaGetLastError();
        mp_error_clear();
    }
    return ok;
}

/* An algorithm chosen for a plan: what the call runs with. */
typedef struct conv_choice {
    int algo;
    size_t ws_bytes;
    cudnnMathType_t math;
    float ms; /* its time in the trial, when timed */
} conv_choice;

/* The first of cand that passes the math-type rules (see the file comment) and whose workspace
 * fits the bound, in the plan's layout (timed: cand came from the trial); *found says whether
 * one did. Leaves the convolution descriptor's math type set to the last one tried. */
static mp_status conv_pick(conv_plan *pl, const conv_candidate *cand, int count, bool timed,
                           conv_choice *c, bool *found)
{
    const conv_key *key = &pl->key;
    bool f32 = key->dtype == MP_F32;
    *found = false;
    for (int i = 0; i < count; i++) {
        if (cand[i].status != CUDNN_STATUS_SUCCESS || cand[i].memory > key->ws_limit ||
            (key->deterministic && !cand[i].deterministic))
            continue;
        bool converts = cand[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        bool tensor_op = cand[i].math == CUDNN_TENSOR_OP_MATH || converts;
        if ((converts && key->dtype != MP_F16) || (f32 && !key->tf32 && tensor_op))
            continue;
        /* the trial also times each algorithm under default math, which on this GPU may take
         * TF32: such a time says nothing of the FMA kernel that would run (PyTorch's
         * ASSERT_CORRECT_PRECISION) */
        if (timed && f32 && !key->tf32 && cand[i].math != CUDNN_FMA_MATH)
            continue;
        /* cuDNN runs an algorithm with the math type it was listed with (as PyTorch does), except
         * that FP32 without TF32 always runs under CUDNN_FMA_MATH, which admits no tensor-core
         * kernel, whether cuDNN lists the algorithm as FMA or as default math. */
        cudnnMathType_t math = f32 && !key->tf32 ? CUDNN_FMA_MATH : cand[i].math;
        CUDNN_CHECK(cudnnSetConvolutionMathType(pl->cd, math));
        size_t bytes = 0;
        if (conv_ws_size(pl, cand[i].algo, &bytes) != CUDNN_STATUS_SUCCESS ||
            bytes > key->ws_limit)
            continue;
        *c = conv_choice{cand[i].algo, bytes > cand[i].memory ? bytes : cand[i].memory, math,
                         cand[i].time};
        *found = true;
        return MP_OK;
    }
    return MP_OK;
}

/* Sets the slot's descriptors for key and picks the layout and the algorithm (see the file
 * comment); d are the call's operands, for the timed trial. */
static mp_status plan_make(const conv_key *key, const conv_data *d, conv_plan *pl)
{
    bool f32 = key->dtype == MP_F32;
    cudnnMathType_t math = !f32 ? CUDNN_TENSOR_OP_MATH
                           : key->tf32 ? CUDNN_DEFAULT_MATH
                                       : CUDNN_FMA_MATH;
    MP_TRY(plan_descriptors(key, pl, math));
    if (key->timed)
        MP_TRY(mp_cuda_not_capturing("timing convolution algorithms (amp.conv_algo = timed) "
                                     "for a new shape"));
    pl->layout = f32 && key->layouts == MP_CONV_LAYOUT_NCHW ? LAYOUT_NCHW : LAYOUT_NHWC;
    pl->copy_ms = 0;
    conv_data r = *d, nhwc = *d;
    if (pl->layout == LAYOUT_NCHW) { /* the trial runs on the buffers the calls will use */
        MP_TRY(conv_nchw_data(pl, &r));
        if (key->timed)
            MP_TRY(conv_copies(pl, &nhwc, &r, true));
    }
    conv_candidate cand[MP_CONV_CANDIDATES];
    int count = 0;
    pl->trial = key->timed && conv_trial(pl, &r, cand, &count);
    if (!pl->trial)
        MP_TRY(conv_heuristics(pl, cand, &count));
    conv_choice best = {};
    bool found;
    MP_TRY(conv_pick(pl, cand, count, pl->trial, &best, &found));
    /* FP32 under "timed": NCHW too, with its copies, and the faster kept */
    bool tried = found && pl->trial && f32 && key->layouts == MP_CONV_LAYOUT_AUTO;
    if (tried) {
        conv_choice alt = {};
        bool alt_found = false;
        float copy_ms = 0;
        CUDNN_CHECK(cudnnSetConvolutionMathType(pl->cd, math));
        if (conv_nchw_trial_data(pl, d, &r, &copy_ms) && conv_trial(pl, &r, cand, &count))
            MP_TRY(conv_pick(pl, cand, count, true, &alt, &alt_found));
        if (alt_found && alt.ms + copy_ms < best.ms) {
            best = alt;
            pl->copy_ms = copy_ms;
        } else {
            pl->layout = LAYOUT_NHWC;
        }
    }
    if (tried || pl->layout == LAYOUT_NCHW)
        MP_TRY(conv_nchw_settle(pl));
    if (!found)
        return mp_fail(MP_EINTERNAL, "cuda %s: no %scuDNN algorithm for N=%d H=%d W=%d C=%d "
                       "K=%d R=%d S=%d groups=%d %s fits the workspace bound of %zu bytes "
                       "(amp.conv_workspace_mb%s)", conv_op_names[key->dir],
                       key->deterministic ? "deterministic " : "", key->n, key->h, key->w,
                       key->c, key->k, key->r, key->s, key->groups,
                       mp_dtype_name((mp_dtype)key->dtype), key->ws_limit,
                       key->deterministic ? ", amp.deterministic" : "");
    CUDNN_CHECK(cudnnSetConvolutionMathType(pl->cd, best.math));
    pl->algo = best.algo;
    pl->ws_bytes = best.ws_bytes;
    pl->math = best.math;
    pl->ms = best.ms;
    pl->used = true;
    return MP_OK;
}

mp_status mp_conv_plan_get(const conv_key *key, const conv_data *d, conv_plan **out)
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

mp_status mp_conv_plan_run(const conv_plan *pl, conv_data d, void *ws)
{
    conv_data r = d;
    bool nchw = pl->layout == LAYOUT_NCHW;
    if (nchw) {
        MP_TRY(conv_nchw_data(pl, &r));
        MP_TRY(conv_copies(pl, &d, &r, true));
    }
    cudnnHandle_t dnn = mp_cuda_ctx_get()->dnn;
    int L = pl->layout;
    const float one = 1.0f, zero = 0.0f;
    switch (pl->key.dir) {
    case CONV_FWD:
        CUDNN_CHECK(cudnnConvolutionForward(dnn, &one, pl->xd[L], r.image, pl->wd[L], r.filter,
                                            pl->cd, (cudnnConvolutionFwdAlgo_t)pl->algo, ws,
                                            pl->ws_bytes, &zero, pl->yd[L], r.output));
        break;
    case CONV_BWD_DATA:
        CUDNN_CHECK(cudnnConvolutionBackwardData(dnn, &one, pl->wd[L], r.filter, pl->yd[L],
                                                 r.output, pl->cd,
                                                 (cudnnConvolutionBwdDataAlgo_t)pl->algo, ws,
                                                 pl->ws_bytes, &zero, pl->xd[L], r.image));
        break;
    default:
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(dnn, &one, pl->xd[L], r.image, pl->yd[L],
                                                   r.output, pl->cd,
                                                   (cudnnConvolutionBwdFilterAlgo_t)pl->algo,
                                                   ws, pl->ws_bytes, &zero, pl->wd[L],
                                                   r.filter));
        break;
    }
    return nchw ? conv_copies(pl, &d, &r, false) : MP_OK;
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
                "dilation %dx%d groups %d: %s%s, %s math, %s, workspace %zu bytes",
                conv_op_names[k->dir], mp_dtype_name((mp_dtype)k->dtype), k->n, k->h, k->w,
                k->c, k->k, k->r, k->s, k->sh, k->sw, k->ph, k->pw, k->dh, k->dw, k->groups,
                conv_algo_name(k->dir, pl->algo), k->deterministic ? " (deterministic)" : "",
                conv_math_name(pl->math),
                pl->layout == LAYOUT_NCHW ? "NCHW" : "NHWC", pl->ws_bytes);
        if (pl->layout == LAYOUT_NCHW && pl->trial && k->layouts == MP_CONV_LAYOUT_AUTO)
            fprintf(out, ", copies %.3f ms", pl->copy_ms);
        if (pl->trial)
            fprintf(out, ", timed %.3f ms\n", pl->ms);
        else
            fprintf(out, ", heuristic%s\n", k->timed ? " (the timed trial failed)" : "");
    }
}
