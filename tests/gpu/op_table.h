/* The op table of tests/gpu/test_op_table.c: one row per case (an op, the dtypes of its
 * operands, a shape, the op's parameters), each run on the reference (the plain CPU backend,
 * host tensors) and on the backend under test (the device: CUDA, or the staged CPU backend) on
 * the same random inputs, outputs poisoned with NaN first, and compared within a tolerance
 * from the output's dtype (mp_gpu_rtol, mp_gpu_atol, mp_test_eps) or bitwise. Shapes include
 * odd sizes (no multiple of a warp, a block or a tensor-core tile) and empty ones (numel 0, or a
 * zero dimension where the op allows it); a case marked `refused` has a shape that both backends
 * must refuse with MP_EINTERNAL. A runner is the case's op: it builds the inputs, calls both
 * backends through OP_BOTH and checks. */
#ifndef MP_OP_TABLE_H
#define MP_OP_TABLE_H

#include "tests/util/test_gpu.h"

typedef struct op_case op_case;
typedef void (*op_runner)(const op_case *c);

struct op_case {
    op_runner run;
    mp_dtype dt[4];   /* the operands' dtypes, in the order the runner names */
    int64_t shape[4]; /* gemm (m, n, k); 2-D ops (rows, cols); NHWC (N, H, W, C) */
    union {
        struct {
            bool ta, tb;
            double beta;
        } gemm;
        struct {
            bool nan, in_place, relu;
        } ew;      /* relu (NaN in x, dx aliasing dy / y aliasing x), add (y aliasing a;
                      relu: add_relu) */
        double x;  /* scale's alpha, fill's value */
        struct {
            double smoothing;
            int grad; /* 0: no dlogits, 1: dlogits, 2: dlogits with the scale from a state */
        } xent;
        struct {
            double p;
            uint64_t offset;
            int64_t step; /* >= 0: the step read from the backend's memory (mp_mask_offset) */
        } dropout;
        struct {
            double scale;
            int bad; /* 0: finite, 1: inf, 2: NaN, 3: g * scale overflows FP32 */
        } stats;
        struct {
            mp_conv_desc d;
            int64_t k, r, s; /* filters (K, R, S, C / groups) */
            mp_conv_layout layout; /* FP32 convolutions' layout on CUDA (mp_gpu_conv_plans) */
            bool timed;            /* cuDNN's algorithms timed (amp.conv_algo = "timed") */
        } conv;
        bool no_dx; /* batchnorm_backward, layernorm_backward: parameter gradients only */
        bool accumulate; /* embedding_backward: dtable += the sums */
        struct {
            mp_pool_desc d;
            bool ties; /* every x equal: the gradient goes to each window's first maximum */
        } pool;
        mp_attn_desc attn; /* attention_forward, attention_backward */
    } u;
    bool refused;
    bool dx_over_dy; /* batchnorm_backward: dx is dy's own memory */
    bool bn_relu;    /* batchnorm_forward, batchnorm_backward: with the fused ReLU */
    uint64_t seed; /* the case's index: every case draws its own inputs */
    char name[160];
};

/* The reference and the backend under test; op_side says whose tensors OP_T picks. */
extern const mp_ops *op_ref, *op_uut;
extern int op_side;

/* The pair's tensor for the side being called (host for the reference, device for the backend
 * under test); OP_TO gives NULL for a cleared pair (an absent optional tensor); OP_SIDE picks one
 * of two values (a host or a device pointer). */
#define OP_T(p) (op_side ? &(p)->dev : &(p)->host)
#define OP_TO(p) (op_side ? mp_gpu_dev(p) : mp_gpu_host(p))
#define OP_SIDE(host, dev) (op_side ? (dev) : (host))

/* Calls op `fn` on the reference, then on the backend under test, with the same arguments
 * evaluated once per side (OP_T inside them picks the side's tensors), and checks both
 * statuses: MP_OK, or MP_EINTERNAL on both when the case is refused. */
#define OP_BOTH(c, fn, ...)                                      \
    do {                                                         \
        op_side = 0;                                             \
        mp_status op_ref_st_ = op_ref->fn(__VA_ARGS__);          \
        op_side = 1;                                             \
        mp_status op_uut_st_ = op_uut->fn(__VA_ARGS__);          \
        op_status((c), #fn, op_ref_st_, op_uut_st_);             \
    } while (0)

void op_status(const op_case *c, const char *fn, mp_status ref, mp_status uut);

/* Appends a case to the table, named "<op> <its first ndt dtypes> <its first ndim sizes>
 * <printf-style details>", e.g. "gemm f16.f16.f32 13x7x37 ta 1 tb 0 beta 0.5". */
void op_add(op_case c, const char *op, int ndt, int ndim, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Frees every pair of the list (cleared ones are skipped). */
void op_free(mp_gpu_pair *const *pairs, int n);

/* Element i of the pair's host side, as a double. */
double op_hv(const mp_gpu_pair *p, int64_t i);

/* A malloc'd array of n doubles (n + 1, so n may be 0), zeroed; fails the test when out of
 * memory. */
double *op_zeros(int64_t n);
#define OP_FREE(...)                                                          \
    op_free((mp_gpu_pair *const[]){__VA_ARGS__},                             \
            (int)(sizeof((mp_gpu_pair *const[]){__VA_ARGS__}) / sizeof(mp_gpu_pair *)))

/* The cases of the dense and elementwise ops (op_table_dense.c) and of convolution, batch
 * normalisation and pooling (op_table_dnn.c). */
void op_cases_dense(void);
void op_cases_dnn(void);
/* The cases of LayerNorm, GELU and the token embedding (op_table_norm.c). */
void op_cases_norm(void);
/* The cases of multi-head self-attention (op_table_attn.c). */
void op_cases_attn(void);
/* The cases of the graph ops: a captured chain against its eager run (op_table_graph.c). */
void op_cases_graph(void);

#endif
