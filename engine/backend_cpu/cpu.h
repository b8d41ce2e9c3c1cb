/* Internals shared by the CPU backend's op files: one dispatch macro instantiates a kernel for
 * each storage type with its accumulator, loader and storer, so an op is written once for all
 * dtypes (docs/ARCHITECTURE.md §7). Half types load as float and store rounded to nearest even. */
#ifndef MP_BACKEND_CPU_H
#define MP_BACKEND_CPU_H

#include "engine/dtype.h"
#include "engine/ops.h"

static inline float mp_ld_f32(float v) { return v; }
static inline float mp_st_f32(float v) { return v; }
static inline double mp_ld_f64(double v) { return v; }
static inline double mp_st_f64(double v) { return v; }

/* MP_CPU_DISPATCH(dtype, KERNEL, args...) expands KERNEL(T, ACC, LD, ST, args...) for the
 * storage type T, accumulator ACC, LD: T -> ACC and ST: ACC -> T of `dtype`. */
#define MP_CPU_DISPATCH(dt, KERNEL, ...)                                              \
    switch (dt) {                                                                    \
    case MP_F32: KERNEL(float, float, mp_ld_f32, mp_st_f32, __VA_ARGS__); break;     \
    case MP_F64: KERNEL(double, double, mp_ld_f64, mp_st_f64, __VA_ARGS__); break;   \
    case MP_F16: KERNEL(uint16_t, float, mp_f16_to_f32, mp_f32_to_f16, __VA_ARGS__); break; \
    case MP_BF16: KERNEL(uint16_t, float, mp_bf16_to_f32, mp_f32_to_bf16, __VA_ARGS__); break; \
    }

/* The dtype of accumulator type ACC: MP_F64 for double, MP_F32 for float. */
#define MP_CPU_ACC_DTYPE(ACC) (sizeof(ACC) == sizeof(double) ? MP_F64 : MP_F32)

/* Element `off` of tensor t's storage, whatever its dtype. */
static inline void *mp_cpu_at(const mp_tensor *t, int64_t off)
{
    return (char *)t->data + (size_t)off * mp_dtype_size(t->dtype);
}

/* Elements [off, off + n) of t in dtype acc (MP_F32 or MP_F64): t's own storage when t has that
 * dtype, else widened into buf (mp_convert's bulk paths), which is returned. */
static inline const void *mp_cpu_widen(const mp_tensor *t, int64_t off, int64_t n, mp_dtype acc,
                                       void *buf)
{
    if (t->dtype == acc)
        return mp_cpu_at(t, off);
    mp_convert(buf, acc, mp_cpu_at(t, off), t->dtype, (size_t)n);
    return buf;
}

/* mp_convert of n elements (dst and src do not overlap), cut into contiguous pieces run on the
 * rank's threads: the same bits as mp_convert, since each element converts on its own. For
 * whole tensors outside a parallel loop; inside one it runs on the calling thread. */
void mp_cpu_convert_bulk(void *dst, mp_dtype dt, const void *src, mp_dtype st, size_t n);

/* mp_cpu_widen into accumulator type ACC (a kernel's), as a pointer to ACC. */
#define MP_CPU_WIDEN(ACC, t, off, n, buf) \
    ((const ACC *)mp_cpu_widen(t, off, n, MP_CPU_ACC_DTYPE(ACC), buf))

/* Fails with MP_EINTERNAL naming the op when cond is false. */
#define MP_CPU_REQUIRE(cond, op)                                                        \
    do {                                                                                \
        if (!(cond))                                                                    \
            return mp_fail(MP_EINTERNAL, "cpu %s: shape or dtype mismatch (%s)", op, #cond); \
    } while (0)

/* Makes the staged backend's table ops record while the calling thread captures a graph
 * (engine/backend_cpu/graph.c), and gives it graphs. */
void mp_cpu_graph_staged(mp_ops *ops);

/* The op implementations collected in the table (mp_backend_cpu): mp_cpu_<op> for every op of
 * engine/op_list.h. */
#define MP_OP(ret, op, params) ret mp_cpu_##op params;
#include "engine/op_list.h"

/* The CPU ops' working memory: one block per slot and thread that only grows (mp_alloc, counted
 * as workspace), so steady-state training steps allocate nothing. An op uses its own slots,
 * so an op that calls another keeps its block. */
typedef enum mp_cpu_ws {
    MP_CPU_WS_GEMM, MP_CPU_WS_CONV, MP_CPU_WS_ATTN, MP_CPU_WS_NORM, MP_CPU_WS_EMBED_IDS,
    MP_CPU_WS_EMBED_ACC, MP_CPU_WS_POOL, MP_CPU_WS_BN, MP_CPU_WS_BN_TILE, MP_CPU_WS_DNNL,
    MP_CPU_WS_CONV_COL, MP_CPU_WS_BN_LANES, MP_CPU_WS_CONV_SUM, MP_CPU_WS_ATTN_TILE,
    MP_CPU_WS_NORM_STATS, MP_CPU_WS_GEMM_BIAS, MP_CPU_WS_GEMM_DY, MP_CPU_WS_BN_MASK,
    MP_CPU_WS_GEMM_DNNL, MP_CPU_WS_XENT, MP_CPU_WS_N
} mp_cpu_ws;

/* FP32 bytes of a chunk's image- and output-side working copies when a convolution widens half
 * tensors (conv2d.c): twice the L2 of this project's 2-core VMs (2 MiB a core), which the op's
 * threads share. */
#define MP_CPU_CONV_HALF_CHUNK_BYTES ((int64_t)4 << 20)

/* At least `bytes` of slot `slot`'s block for this thread, 64-byte aligned, contents
 * unspecified (zero it where needed); valid until the next call for the same slot. */
void *mp_cpu_workspace(mp_cpu_ws slot, size_t bytes);

/* How many times mp_cpu_workspace has grown a slot beyond the most any thread's block of it
 * held before, since the process started: the event that moves a GPU's one workspace of that
 * kind, after which a graph captured before is stale (graph_valid). A thread's own block growing
 * to a size some thread's block has held is not counted (the threads' blocks are per thread
 * here; which thread first runs a larger share depends on scheduling, not on the shapes). */
uint64_t mp_cpu_workspace_moves(void);

/* Whether [p, p + bytes) lies inside one block of host_alloc (pinned memory on a GPU). */
bool mp_cpu_host_block(const void *p, size_t bytes);

/* Counts a result handed to the host (mp_ops_counters.reads). */
void mp_cpu_count_read(void);

/* Counts a wait for a point in the queue (mp_ops_counters.fence_waits). */
void mp_cpu_count_fence_wait(void);

#endif
