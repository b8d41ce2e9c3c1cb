/* Convolution plans of the CUDA backend (engine/backend_cuda/conv_plan.cu), shared with its
 * entry points (conv2d.cu): what a plan is keyed by, what it holds, and how a call runs it.
 * Internal to the backend. */
#ifndef MP_CONV_PLAN_CUH
#define MP_CONV_PLAN_CUH

#include "engine/backend_cuda/cuda.h"

typedef enum conv_dir { CONV_FWD, CONV_BWD_DATA, CONV_BWD_FILTER } conv_dir;

/* Everything a plan depends on; built with memset so that memcmp compares it. */
typedef struct conv_key {
    int dir;
    int n, h, w, c, k, r, s, p, q;
    int groups, ph, pw, sh, sw, dh, dw;
    int dtype, tf32, timed, layouts; /* layouts: the backend's mp_conv_layout */
    int deterministic;               /* only algorithms cuDNN lists as deterministic */
    size_t ws_limit;
} conv_key;

/* The layout a plan's call runs in; descriptors are kept for both. */
enum { LAYOUT_NHWC, LAYOUT_NCHW };

typedef struct conv_plan {
    conv_key key;
    bool used;  /* key, descriptors and algo are valid */
    bool made;  /* the descriptors exist (kept for the slot's lifetime) */
    /* by layout: the image side (x, dx), the output side (y, dy), the filter (w, dw) and the
     * filter viewed as a tensor (K, C / groups, R, S), which the copies between layouts take */
    cudnnTensorDescriptor_t xd[2], yd[2], wt[2];
    cudnnFilterDescriptor_t wd[2];
    cudnnConvolutionDescriptor_t cd;
    int layout; /* the layout the call runs in */
    int algo;   /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t by direction */
    size_t ws_bytes;
    cudnnMathType_t math; /* the math type it runs with */
    bool trial;    /* chosen by the timed trial (else by the heuristic list) */
    float ms;      /* its time in the trial */
    float copy_ms; /* an NCHW plan's copies in the trial (0 when not timed) */
} conv_plan;

/* A call's operands by role, as the plan's descriptors name them: the image side (x, or dx),
 * the filter (w, or dw) and the output side (y, or dy), in the plan's work dtype. */
typedef struct conv_data {
    void *image, *filter, *output;
} conv_data;

/* The roles, which also number the scratch slots of staged operands (mp_cuda_operand). */
enum { ROLE_IMAGE, ROLE_FILTER, ROLE_OUTPUT, ROLES };

/* The plan for key (descriptors, layout and algorithm): found, or made in the next slot of the
 * table (round-robin) for the call whose operands are d (the timed trial runs on them and
 * overwrites the direction's output). MP_EINTERNAL when no algorithm fits the workspace bound or
 * cuDNN or an allocation fails; inside a graph capture, a timed plan met first, or an NCHW plan
 * whose buffers must grow, is refused. */
mp_status mp_conv_plan_get(const conv_key *key, const conv_data *d, conv_plan **out);

/* Runs the plan's direction on d (the engine's NHWC operands in the plan's work dtype) with
 * workspace ws (at least pl->ws_bytes): in NCHW, on the NCHW buffers between the copies of the
 * inputs and of the result. */
mp_status mp_conv_plan_run(const conv_plan *pl, conv_data d, void *ws);

#endif
