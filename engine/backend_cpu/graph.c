/* Graphs on the staged CPU backend (engine/op_list.h: graph_begin, graph_end, graph_launch,
 * graph_free, graph_valid): record-then-replay as CUDA's stream capture does it, so that CI runs a captured
 * step without a GPU. While this thread captures, each queued op is recorded with its arguments
 * as they are at the call (scalars, memory pointers and copy_in's host pointer as given; the
 * tensor and descriptor structs it points to copied, as a kernel's parameters are), and nothing
 * runs; a launch runs the records in order with those arguments. A value the host changes
 * after the capture (a learning rate passed as a double, a tensor struct pointed elsewhere) is
 * therefore not seen by a replay, on the GPU or here, and a test that compares replayed steps
 * with eager ones sees it. Ops that hand a value back to the host or wait for the queue,
 * allocate or free memory, or copy in from memory not host_alloc's fail while capturing (the
 * capture then fails at graph_end), as they do on a GPU. A graph is valid until a workspace
 * moves (mp_cpu_workspace_moves), as a GPU's is. The plain CPU backend, which queues nothing,
 * has no graphs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"

/* One recorded op: the function that replays it and its arguments (a struct of the op's own
 * type, its pointers to host structs redirected to copies in the graph's blocks). */
typedef struct mp_cpu_record {
    mp_status (*play)(const void *args);
    void *args;
} mp_cpu_record;

typedef struct mp_cpu_graph {
    uint64_t moves; /* mp_cpu_workspace_moves at the end of the capture (graph_valid) */
    mp_cpu_record *rec;
    int n, cap;
    void **blocks; /* every allocation of the graph: the records' arguments and their copies */
    int nblocks, capblocks;
    mp_status failed; /* the first failure while capturing (MP_OK: none) */
    char error[512];
} mp_cpu_graph;

/* The graph this thread is capturing into, or NULL. */
static _Thread_local mp_cpu_graph *capturing;

/* `array` (n elements of `elem` bytes, room for *cap) with room for one more: itself, or moved
 * with its capacity doubled from 64 (*cap updated); NULL when memory runs out (array is left
 * as it was). */
static void *room(void *array, int n, int *cap, size_t elem)
{
    if (n < *cap)
        return array;
    int grown = *cap ? 2 * *cap : 64;
    void *a = realloc(array, (size_t)grown * elem);
    if (a)
        *cap = grown;
    return a;
}

/* A zeroed block of `bytes` owned by graph g, or NULL (g then failed). */
static void *graph_alloc(mp_cpu_graph *g, size_t bytes)
{
    void **blocks = room(g->blocks, g->nblocks, &g->capblocks, sizeof *g->blocks);
    if (!blocks)
        return NULL;
    g->blocks = blocks;
    void *p = calloc(1, bytes ? bytes : 1);
    if (p)
        g->blocks[g->nblocks++] = p;
    return p;
}

/* Records that the capture failed (the first failure is kept) and returns st. */
static mp_status graph_failed(mp_cpu_graph *g, mp_status st)
{
    if (g->failed == MP_OK) {
        g->failed = st;
        snprintf(g->error, sizeof g->error, "%s", mp_error_message());
    }
    return st;
}

/* Appends a record of `play` with `args`. */
static mp_status record(mp_cpu_graph *g, mp_status (*play)(const void *), void *args)
{
    mp_cpu_record *rec = room(g->rec, g->n, &g->cap, sizeof *g->rec);
    if (!rec)
        return graph_failed(g, mp_fail(MP_EINTERNAL, "graph capture: out of host memory"));
    g->rec = rec;
    g->rec[g->n++] = (mp_cpu_record){play, args};
    return MP_OK;
}

/* A copy of the host struct at p (`bytes`) owned by graph g, or NULL (g then failed). */
static void *copy_pointee(mp_cpu_graph *g, const void *p, size_t bytes)
{
    void *c = graph_alloc(g, bytes);
    if (!c) {
        graph_failed(g, mp_fail(MP_EINTERNAL, "graph capture: out of host memory"));
        return NULL;
    }
    return memcpy(c, p, bytes);
}
/* The deep copies of a record's fields: *f (a pointer to a host struct of type T) is pointed at
 * a copy owned by the graph; NULL stays NULL. */
#define MP_G_DEEP_FN(name, T)                                                                 \
    static void name(mp_cpu_graph *g, T **f)                                                  \
    {                                                                                         \
        if (*f)                                                                               \
            *f = copy_pointee(g, *f, sizeof **f);                                             \
    }
MP_G_DEEP_FN(deep_ct, const mp_tensor)
MP_G_DEEP_FN(deep_t, mp_tensor)
MP_G_DEEP_FN(deep_conv, const mp_conv_desc)
MP_G_DEEP_FN(deep_pool, const mp_pool_desc)
MP_G_DEEP_FN(deep_bn, const mp_bn_args)
MP_G_DEEP_FN(deep_attn, const mp_attn_desc)
MP_G_DEEP_FN(deep_optim, const mp_optim_args)
MP_G_DEEP_FN(deep_scaler, const mp_scaler_config)
/* Any other field (a scalar, memory of the backend, a host pointer copy_in reads) as it is. */
static void deep_none(mp_cpu_graph *g, const void *f)
{
    (void)g;
    (void)f;
}
#define MP_G_DEEP(g, field)                                                                   \
    _Generic((field), const mp_tensor *: deep_ct, mp_tensor *: deep_t,                        \
             const mp_conv_desc *: deep_conv, const mp_pool_desc *: deep_pool,                \
             const mp_bn_args *: deep_bn, const mp_attn_desc *: deep_attn,                    \
             const mp_optim_args *: deep_optim, const mp_scaler_config *: deep_scaler,        \
             default: deep_none)(g, &(field))

/* MP_G_EACH(M, T1, a1, T2, a2, ...): M(T, a, sep) for each (type, name) pair, sep the
 * separator macro's suffix (1 for the last pair): up to 10 pairs (batchnorm_forward and
 * batchnorm_backward take 10; an op with more needs MP_G_EACH_11 and a longer MP_G_NPAIRS). */
#define MP_G_CAT(a, b) MP_G_CAT_(a, b)
#define MP_G_CAT_(a, b) a##b
#define MP_G_NPAIRS(...)                                                                      \
    MP_G_NPAIRS_(__VA_ARGS__, 10, x, 9, x, 8, x, 7, x, 6, x, 5, x, 4, x, 3, x, 2, x, 1, x)
#define MP_G_NPAIRS_(a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7, a8, b8, a9, b9,   \
                     a10, b10, n, ...)                                                        \
    n
#define MP_G_EACH(M, ...) MP_G_CAT(MP_G_EACH_, MP_G_NPAIRS(__VA_ARGS__))(M, __VA_ARGS__)
#define MP_G_EACH_1(M, T, a) M(T, a, 1)
#define MP_G_EACH_2(M, T, a, ...) M(T, a, 0) MP_G_EACH_1(M, __VA_ARGS__)
#define MP_G_EACH_3(M, T, a, ...) M(T, a, 0) MP_G_EACH_2(M, __VA_ARGS__)
#define MP_G_EACH_4(M, T, a, ...) M(T, a, 0) MP_G_EACH_3(M, __VA_ARGS__)
#define MP_G_EACH_5(M, T, a, ...) M(T, a, 0) MP_G_EACH_4(M, __VA_ARGS__)
#define MP_G_EACH_6(M, T, a, ...) M(T, a, 0) MP_G_EACH_5(M, __VA_ARGS__)
#define MP_G_EACH_7(M, T, a, ...) M(T, a, 0) MP_G_EACH_6(M, __VA_ARGS__)
#define MP_G_EACH_8(M, T, a, ...) M(T, a, 0) MP_G_EACH_7(M, __VA_ARGS__)
#define MP_G_EACH_9(M, T, a, ...) M(T, a, 0) MP_G_EACH_8(M, __VA_ARGS__)
#define MP_G_EACH_10(M, T, a, ...) M(T, a, 0) MP_G_EACH_9(M, __VA_ARGS__)
#define MP_G_COMMA_0 ,
#define MP_G_COMMA_1
#define MP_G_PARAM(T, a, last) T a MP_G_CAT(MP_G_COMMA_, last)
#define MP_G_NAME(T, a, last) a MP_G_CAT(MP_G_COMMA_, last)
#define MP_G_FIELD(T, a, last) T a;
#define MP_G_ARG(T, a, last) r->a MP_G_CAT(MP_G_COMMA_, last)
#define MP_G_COPY(T, a, last) MP_G_DEEP(g, r->a);

/* The recording form of queued op `op` with parameters (type, name, ...) as engine/op_list.h
 * declares them (the op table's field type checks them): its argument struct, its replay, and
 * the wrapper that runs mp_cpu_<op> when this thread is not capturing and records it when it
 * is. */
#define MP_G_RECORDED(op, ...)                                                                \
    typedef struct {                                                                          \
        MP_G_EACH(MP_G_FIELD, __VA_ARGS__)                                                    \
    } rec_##op##_args;                                                                        \
    static mp_status play_##op(const void *p)                                                 \
    {                                                                                         \
        const rec_##op##_args *r = p;                                                         \
        return mp_cpu_##op(MP_G_EACH(MP_G_ARG, __VA_ARGS__));                                 \
    }                                                                                         \
    static mp_status rec_##op(MP_G_EACH(MP_G_PARAM, __VA_ARGS__))                             \
    {                                                                                         \
        mp_cpu_graph *g = capturing;                                                          \
        if (!g)                                                                               \
            return mp_cpu_##op(MP_G_EACH(MP_G_NAME, __VA_ARGS__));                            \
        rec_##op##_args *r = graph_alloc(g, sizeof *r);                                       \
        if (!r)                                                                               \
            return graph_failed(g, mp_fail(MP_EINTERNAL, "graph capture: out of host memory")); \
        *r = (rec_##op##_args){MP_G_EACH(MP_G_NAME, __VA_ARGS__)};                            \
        MP_G_EACH(MP_G_COPY, __VA_ARGS__)                                                     \
        return g->failed != MP_OK ? g->failed : record(g, play_##op, r);                      \
    }

/* The form of an op that waits for the queue or hands a value to the host: refused while this
 * thread captures, as CUDA refuses it in a capture. */
#define MP_G_REFUSED(op, ...)                                                                 \
    static mp_status rec_##op(MP_G_EACH(MP_G_PARAM, __VA_ARGS__))                             \
    {                                                                                         \
        if (capturing)                                                                        \
            return graph_failed(capturing, refused(#op));                                     \
        return mp_cpu_##op(MP_G_EACH(MP_G_NAME, __VA_ARGS__));                                \
    }

static mp_status refused(const char *op)
{
    return mp_fail(MP_EINTERNAL, "graph capture: %s waits for the queue or hands a value to the "
                   "host, which a graph cannot hold (do it before the capture or after a launch)",
                   op);
}

MP_G_RECORDED(copy, void *, dst, const void *, src, size_t, bytes)
MP_G_RECORDED(gemm, bool, ta, bool, tb, double, alpha, const mp_tensor *, a, const mp_tensor *, b,
              double, beta, mp_tensor *, c)
MP_G_RECORDED(gemm_bias, bool, ta, bool, tb, const mp_tensor *, a, const mp_tensor *, b,
              const mp_tensor *, bias, mp_tensor *, c)
MP_G_RECORDED(bias_add, mp_tensor *, y, const mp_tensor *, b)
MP_G_RECORDED(bias_grad, const mp_tensor *, dy, mp_tensor *, db)
MP_G_RECORDED(linear_backward, const mp_tensor *, x, const mp_tensor *, w, const mp_tensor *, dy,
              mp_tensor *, dw, mp_tensor *, db, mp_tensor *, dx)
MP_G_RECORDED(relu_forward, const mp_tensor *, x, mp_tensor *, y)
MP_G_RECORDED(relu_backward, const mp_tensor *, y, const mp_tensor *, dy, mp_tensor *, dx)
MP_G_RECORDED(optim_step, const mp_optim_args *, args, const mp_amp_state *, st,
              mp_tensor *, param, mp_tensor *, copy, const mp_tensor *, grad, mp_tensor *, slot1,
              mp_tensor *, slot2)
MP_G_RECORDED(amp_check, const mp_tensor *, grad, double, mult, double, limit, mp_amp_state *, st)
MP_G_RECORDED(amp_revert, const mp_amp_state *, st, const mp_tensor *, saved, mp_tensor *, live)
MP_G_RECORDED(amp_step_values, mp_amp_state *, st, double, lr, int64_t, step)
MP_G_RECORDED(amp_update, const mp_scaler_config *, c, mp_amp_state *, st)
MP_G_RECORDED(scale, mp_tensor *, x, double, alpha)
MP_G_RECORDED(fill, mp_tensor *, x, double, value)
MP_G_RECORDED(convert, const mp_tensor *, src, mp_tensor *, dst)
MP_G_RECORDED(add, const mp_tensor *, a, const mp_tensor *, b, mp_tensor *, y)
MP_G_RECORDED(add_relu, const mp_tensor *, a, const mp_tensor *, b, mp_tensor *, y)
MP_G_RECORDED(conv2d_forward, const mp_conv_desc *, d, const mp_tensor *, x, const mp_tensor *, w,
              mp_tensor *, y)
MP_G_RECORDED(conv2d_backward_data, const mp_conv_desc *, d, const mp_tensor *, dy,
              const mp_tensor *, w, mp_tensor *, dx)
MP_G_RECORDED(conv2d_backward_filter, const mp_conv_desc *, d, const mp_tensor *, x,
              const mp_tensor *, dy, mp_tensor *, dw)
MP_G_RECORDED(conv2d_backward, const mp_conv_desc *, d, const mp_tensor *, x, const mp_tensor *, w,
              const mp_tensor *, dy, mp_tensor *, dw, mp_tensor *, dx)
MP_G_RECORDED(batchnorm_forward, const mp_bn_args *, a, bool, train, const mp_tensor *, x,
              const mp_tensor *, gamma, const mp_tensor *, beta, mp_tensor *, running_mean,
              mp_tensor *, running_var, mp_tensor *, save_mean, mp_tensor *, save_invstd,
              mp_tensor *, y)
MP_G_RECORDED(batchnorm_backward, const mp_bn_args *, a, const mp_tensor *, x, const mp_tensor *, y,
              const mp_tensor *, dy, const mp_tensor *, gamma, const mp_tensor *, save_mean,
              const mp_tensor *, save_invstd, mp_tensor *, dx, mp_tensor *, dgamma,
              mp_tensor *, dbeta)
MP_G_RECORDED(pool_forward, const mp_pool_desc *, d, const mp_tensor *, x, mp_tensor *, y)
MP_G_RECORDED(pool_backward, const mp_pool_desc *, d, const mp_tensor *, x, const mp_tensor *, y,
              const mp_tensor *, dy, mp_tensor *, dx)
MP_G_RECORDED(dropout_forward, double, p, uint64_t, seed, uint64_t, offset, const int64_t *, step,
              const mp_tensor *, x, mp_tensor *, y)
MP_G_RECORDED(dropout_backward, double, p, uint64_t, seed, uint64_t, offset, const int64_t *,
              step, const mp_tensor *, dy, mp_tensor *, dx)
MP_G_RECORDED(layernorm_forward, double, eps, const mp_tensor *, x, const mp_tensor *, gamma,
              const mp_tensor *, beta, mp_tensor *, y)
MP_G_RECORDED(layernorm_backward, double, eps, const mp_tensor *, x, const mp_tensor *, dy,
              const mp_tensor *, gamma, mp_tensor *, dx, mp_tensor *, dgamma, mp_tensor *, dbeta)
MP_G_RECORDED(gelu_forward, const mp_tensor *, x, mp_tensor *, y)
MP_G_RECORDED(gelu_backward, const mp_tensor *, x, const mp_tensor *, dy, mp_tensor *, dx)
MP_G_RECORDED(embedding_forward, const mp_tensor *, ids, const mp_tensor *, table, mp_tensor *, y)
MP_G_RECORDED(embedding_backward, const mp_tensor *, ids, const mp_tensor *, dy, bool, accumulate,
              mp_tensor *, dtable)
MP_G_RECORDED(attention_forward, const mp_attn_desc *, d, const mp_tensor *, qkv,
              mp_tensor *, probs, mp_tensor *, out)
MP_G_RECORDED(attention_backward, const mp_attn_desc *, d, const mp_tensor *, qkv,
              const mp_tensor *, probs, const mp_tensor *, dout, mp_tensor *, dqkv)
MP_G_RECORDED(attention_flash_forward, const mp_attn_desc *, d, const mp_tensor *, qkv,
              mp_tensor *, stats, mp_tensor *, out)
MP_G_RECORDED(attention_flash_backward, const mp_attn_desc *, d, const mp_tensor *, qkv,
              const mp_tensor *, out, const mp_tensor *, stats, const mp_tensor *, dout,
              mp_tensor *, dqkv)

MP_G_REFUSED(copy_out, void *, host, const void *, src, size_t, bytes)
MP_G_REFUSED(fence_record, void **, fence)
MP_G_REFUSED(fence_wait, void *, fence)
MP_G_REFUSED(mark_record, void **, mark)
MP_G_REFUSED(mark_elapsed, void *, from, void *, to, double *, ms)
MP_G_REFUSED(grad_stats, const mp_tensor *, grad, double, scale, double *, sumsq, bool *, nonfinite)

static mp_status rec_sync(void)
{
    return capturing ? graph_failed(capturing, refused("sync")) : mp_cpu_sync();
}

/* copy_in is recorded from host_alloc's memory (pinned on a GPU, where a capture holds such a
 * copy and reads the block at each launch), refused from any other. */
MP_G_RECORDED(copy_in, void *, dst, const void *, host, size_t, bytes)
static mp_status rec_copy_in_pinned(void *dst, const void *host, size_t bytes)
{
    if (capturing && bytes && !mp_cpu_host_block(host, bytes))
        return graph_failed(capturing, mp_fail(MP_EINTERNAL, "graph capture: copy_in from host "
                                                "memory not from host_alloc (pageable on a "
                                                "GPU), which a graph cannot hold"));
    return rec_copy_in(dst, host, bytes);
}

/* Memory is allocated and freed as called, and fails the capture: a GPU refuses both in one. */
static void *rec_mem_alloc(size_t bytes, mp_mem_cat cat)
{
    if (capturing)
        graph_failed(capturing, mp_fail(MP_EINTERNAL, "graph capture: mem_alloc inside a "
                                        "capture, which a graph cannot hold"));
    return mp_cpu_mem_alloc(bytes, cat);
}

static void rec_mem_free(void *p)
{
    if (capturing && p)
        graph_failed(capturing, mp_fail(MP_EINTERNAL, "graph capture: mem_free inside a "
                                        "capture, which a graph cannot hold"));
    mp_cpu_mem_free(p);
}

/* softmax_xent is recorded when it hands nothing back (out NULL), refused otherwise. */
MP_G_RECORDED(softmax_xent, const mp_tensor *, logits, const int32_t *, labels, double, smoothing,
              double, grad_scale, mp_amp_state *, st, mp_xent_result *, out, mp_tensor *, dlogits)
static mp_status rec_softmax_xent_out(const mp_tensor *logits, const int32_t *labels,
                                      double smoothing, double grad_scale, mp_amp_state *st,
                                      mp_xent_result *out, mp_tensor *dlogits)
{
    if (capturing && out)
        return graph_failed(capturing, refused("softmax_xent with a result for the host"));
    return rec_softmax_xent(logits, labels, smoothing, grad_scale, st, out, dlogits);
}

/* graph_call: recorded with a copy of its argument inside a capture, run now outside one. */
typedef struct rec_call_args {
    mp_status (*fn)(const void *arg);
    const void *arg; /* the copy, owned by the graph */
} rec_call_args;

static mp_status play_call(const void *p)
{
    const rec_call_args *r = p;
    return r->fn(r->arg);
}

static mp_status rec_graph_call(mp_status (*fn)(const void *arg), const void *arg, size_t bytes)
{
    mp_cpu_graph *g = capturing;
    if (!g)
        return fn(arg);
    rec_call_args *r = graph_alloc(g, sizeof *r);
    if (!r)
        return graph_failed(g, mp_fail(MP_EINTERNAL, "graph capture: out of host memory"));
    void *copy = copy_pointee(g, arg, bytes);
    if (!copy)
        return g->failed;
    *r = (rec_call_args){fn, copy};
    return record(g, play_call, r);
}

static void graph_free(void *p)
{
    mp_cpu_graph *g = p;
    if (!g)
        return;
    for (int i = 0; i < g->nblocks; i++)
        free(g->blocks[i]);
    free(g->blocks);
    free(g->rec);
    free(g);
}

static mp_status graph_begin(void)
{
    if (capturing)
        return mp_fail(MP_EINTERNAL, "graph capture: this thread is capturing already");
    capturing = calloc(1, sizeof *capturing);
    return capturing ? MP_OK : mp_fail(MP_EINTERNAL, "graph capture: out of host memory");
}

static mp_status graph_end(void **graph)
{
    *graph = NULL;
    mp_cpu_graph *g = capturing;
    if (!g)
        return mp_fail(MP_EINTERNAL, "graph capture: graph_end without graph_begin");
    capturing = NULL;
    if (g->failed != MP_OK) {
        mp_status st = mp_fail(g->failed, "%s", g->error);
        graph_free(g);
        return st;
    }
    g->moves = mp_cpu_workspace_moves();
    *graph = g;
    return MP_OK;
}

static bool graph_valid(const void *p)
{
    const mp_cpu_graph *g = p;
    return g && g->moves == mp_cpu_workspace_moves();
}

static mp_status graph_launch(void *p)
{
    const mp_cpu_graph *g = p;
    if (capturing)
        return mp_fail(MP_EINTERNAL, "graph capture: graph_launch inside a capture");
    for (int i = 0; i < g->n; i++)
        MP_TRY(g->rec[i].play(g->rec[i].args));
    return MP_OK;
}

void mp_cpu_graph_staged(mp_ops *ops)
{
#define MP_G_SET(op) ops->op = rec_##op;
    MP_G_SET(copy) MP_G_SET(gemm) MP_G_SET(gemm_bias) MP_G_SET(bias_add)
    MP_G_SET(bias_grad) MP_G_SET(linear_backward) MP_G_SET(relu_forward)
    MP_G_SET(relu_backward) MP_G_SET(optim_step) MP_G_SET(amp_check) MP_G_SET(amp_revert)
    MP_G_SET(amp_step_values) MP_G_SET(amp_update) MP_G_SET(scale) MP_G_SET(fill) MP_G_SET(convert)
    MP_G_SET(add)
    MP_G_SET(add_relu) MP_G_SET(conv2d_forward) MP_G_SET(conv2d_backward_data)
    MP_G_SET(conv2d_backward_filter) MP_G_SET(conv2d_backward) MP_G_SET(batchnorm_forward)
    MP_G_SET(batchnorm_backward) MP_G_SET(pool_forward) MP_G_SET(pool_backward)
    MP_G_SET(dropout_forward) MP_G_SET(dropout_backward) MP_G_SET(layernorm_forward)
    MP_G_SET(layernorm_backward) MP_G_SET(gelu_forward) MP_G_SET(gelu_backward)
    MP_G_SET(embedding_forward) MP_G_SET(embedding_backward) MP_G_SET(attention_forward)
    MP_G_SET(attention_backward) MP_G_SET(attention_flash_forward)
    MP_G_SET(attention_flash_backward) MP_G_SET(copy_out) MP_G_SET(fence_record)
    MP_G_SET(fence_wait) MP_G_SET(mark_record) MP_G_SET(mark_elapsed) MP_G_SET(grad_stats)
    MP_G_SET(sync) MP_G_SET(mem_alloc) MP_G_SET(mem_free) MP_G_SET(graph_call)
#undef MP_G_SET
    ops->copy_in = rec_copy_in_pinned;
    ops->softmax_xent = rec_softmax_xent_out;
    ops->graph_valid = graph_valid;
    ops->graph_begin = graph_begin;
    ops->graph_end = graph_end;
    ops->graph_launch = graph_launch;
    ops->graph_free = graph_free;
}

/* The plain CPU backend queues nothing: its ops run as they are called, and it has no graphs. */
mp_status mp_cpu_graph_begin(void)
{
    return mp_fail(MP_EUSAGE, "graphs need a backend that queues its ops (CUDA, or the staged "
                   "CPU backend: MPDIST_CPU_STAGED=1)");
}

mp_status mp_cpu_graph_end(void **graph)
{
    *graph = NULL;
    return mp_fail(MP_EINTERNAL, "graph capture: graph_end without graph_begin");
}

mp_status mp_cpu_graph_launch(void *graph)
{
    (void)graph;
    return mp_fail(MP_EINTERNAL, "graph_launch: the plain CPU backend has no graphs");
}

void mp_cpu_graph_free(void *graph) { (void)graph; }

bool mp_cpu_graph_valid(const void *graph)
{
    (void)graph;
    return false;
}

mp_status mp_cpu_graph_call(mp_status (*fn)(const void *arg), const void *arg, size_t bytes)
{
    (void)bytes;
    return fn(arg);
}
