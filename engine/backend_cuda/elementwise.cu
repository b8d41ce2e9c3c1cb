/* Elementwise and row-broadcast kernels: bias add and its gradient, ReLU forward and backward,
 * scale, fill, convert, add and add_relu, each around engine/elem_rule.h's body for element i
 * (FP32 arithmetic, each output element rounded once): the CPU backend's rules, so every op but
 * bias_grad gives the CPU's bits. ReLU, scale, fill and add of one dtype run through
 * mp_cuda_elementwise (below: engine/backend_cuda/vec.cuh's vectors, the dtype fixed at compile
 * time, 16-byte loads and stores), and convert the same way with a dtype for each side; bias add
 * and add of mixed dtypes are grid-stride loops that load and store by the tensors' runtime
 * dtypes. bias_grad's column sums are a parallel reduction whose order is its own
 * (engine/backend_cuda/bias_grad_kernels.cuh); only its additions, loads and stores are the
 * shared rules. */
#include "engine/backend_cuda/cuda.h"

#include "engine/backend_cuda/bias_grad_kernels.cuh"
#include "engine/backend_cuda/vec.cuh"
#include "engine/elem_rule.h"

/* An element-wise op for mp_cuda_elementwise: N operands of dtype OP::dt indexed alike, t[k]
 * their data; operand k is read when bit k of OP::in is set and written when bit k of OP::out
 * is; OP::at(p, i) applies the op's rule (engine/elem_rule.h) to element i of operands p[0..N).
 * at must write every output element it is called for. */
template <typename OP>
__global__ static void k_elementwise(OP op, int64_t n, bool packed)
{
    typedef mp_vec<OP::dt, MP_VEC> vec;
    const int64_t packs = packed ? n / MP_VEC : 0;
    MP_CUDA_FOR(q, packs)
    {
        vec v[OP::N];
        void *p[OP::N];
#pragma unroll
        for (int k = 0; k < OP::N; k++) {
            if (OP::in >> k & 1u)
                v[k].load(op.t[k], q * MP_VEC);
            p[k] = v[k].e;
        }
#pragma unroll
        for (int e = 0; e < MP_VEC; e++)
            op.at(p, e);
#pragma unroll
        for (int k = 0; k < OP::N; k++)
            if (OP::out >> k & 1u)
                v[k].store(op.t[k], q * MP_VEC);
    }
    MP_CUDA_FOR(j, n - packs * MP_VEC)
        op.at(op.t, packs * MP_VEC + j);
}

/* Launches op over n elements on the backend's stream: packs of MP_VEC elements with vector
 * loads when every operand is aligned to a pack's size, the rest (or all, when one is not)
 * element by element. */
template <typename OP>
static mp_status mp_cuda_elementwise(const OP &op, int64_t n)
{
    bool packed = true;
    for (int k = 0; k < OP::N; k++)
        packed = packed && mp_vec_aligned(alignof(mp_vec<OP::dt, MP_VEC>), {op.t[k]});
    if (n > 0)
        MP_LAUNCH(k_elementwise<OP>, mp_cuda_blocks(packed ? n / MP_VEC : n), 256, op,
                  n, packed);
    return MP_OK;
}

__global__ static void k_bias_add(void *y, mp_dtype yt, const void *b, mp_dtype bt, int64_t n,
                                  int64_t cols)
{
    MP_CUDA_FOR(i, n)
        mp_bias_add_at(y, yt, b, bt, cols, i);
}

extern "C" mp_status mp_cuda_bias_add(mp_tensor *y, const mp_tensor *b)
{
    MP_CUDA_DTYPES("bias_add", y, b);
    int64_t n = mp_tensor_numel(y), cols = mp_tensor_row(y);
    MP_CUDA_REQUIRE(mp_tensor_numel(b) == cols, "bias_add");
    if (n)
        MP_LAUNCH(k_bias_add, mp_cuda_blocks(n), 256, y->data, y->dtype, b->data, b->dtype, n,
                  cols);
    return MP_OK;
}

static void *mp_bg_scratch;
static size_t mp_bg_scratch_bytes;

extern "C" mp_status mp_cuda_bias_grad(const mp_tensor *dy, mp_tensor *db)
{
    MP_CUDA_DTYPES("bias_grad", dy, db);
    int64_t rows = dy->shape[0], cols = mp_tensor_row(dy), per;
    MP_CUDA_REQUIRE(mp_tensor_numel(db) == cols, "bias_grad");
    if (!cols)
        return MP_OK;
    const int64_t chunks = bg_chunks(rows, &per);
    if (!chunks) { /* no rows: zero sums */
        CUDA_CHECK(cudaMemsetAsync(db->data, 0, (size_t)mp_tensor_bytes(db),
                                   mp_cuda_ctx_get()->stream));
        return MP_OK;
    }
    MP_TRY(mp_cuda_grow(&mp_bg_scratch, &mp_bg_scratch_bytes,
                        (size_t)(chunks * cols) * sizeof(float)));
    float *part = (float *)mp_bg_scratch;
    MP_LAUNCH_SMEM(k_bias_part, dim3((unsigned)((cols + 31) / 32), (unsigned)chunks), dim3(32, 8),
                   BG_SMEM, dy->data, dy->dtype, rows, cols, per, part);
    MP_LAUNCH(k_bias_sum, mp_cuda_blocks(cols), 256, part, chunks, cols, db->data, db->dtype);
    return MP_OK;
}

/* relu_forward's operands: x (read), y (written). */
template <mp_dtype DT> struct relu_fwd_op {
    static constexpr mp_dtype dt = DT;
    static constexpr int N = 2;
    static constexpr unsigned in = 1u, out = 2u;
    void *t[N];
    __device__ void at(void *const *p, int64_t i) const { mp_relu_forward_at(p[0], p[1], DT, i); }
};

extern "C" mp_status mp_cuda_relu_forward(const mp_tensor *x, mp_tensor *y)
{
    MP_CUDA_DTYPES("relu_forward", x, y);
    int64_t n = mp_tensor_numel(x);
    MP_CUDA_REQUIRE(mp_tensor_numel(y) == n && x->dtype == y->dtype, "relu_forward");
    MP_VEC_BY_DTYPE(x->dtype, DT,
                    return mp_cuda_elementwise(relu_fwd_op<DT>{{(void *)x->data, y->data}}, n));
    return MP_OK;
}

/* relu_backward's operands: y and dy (read), dx (written). */
template <mp_dtype DT> struct relu_bwd_op {
    static constexpr mp_dtype dt = DT;
    static constexpr int N = 3;
    static constexpr unsigned in = 3u, out = 4u;
    void *t[N];
    __device__ void at(void *const *p, int64_t i) const
    {
        mp_relu_backward_at(p[0], p[1], p[2], DT, i);
    }
};

extern "C" mp_status mp_cuda_relu_backward(const mp_tensor *y, const mp_tensor *dy,
                                           mp_tensor *dx)
{
    MP_CUDA_DTYPES("relu_backward", y, dy, dx);
    int64_t n = mp_tensor_numel(y);
    MP_CUDA_REQUIRE(mp_tensor_numel(dy) == n && mp_tensor_numel(dx) == n, "relu_backward");
    MP_CUDA_REQUIRE(y->dtype == dy->dtype && dy->dtype == dx->dtype, "relu_backward");
    void *t[3] = {(void *)y->data, (void *)dy->data, dx->data};
    MP_VEC_BY_DTYPE(y->dtype, DT,
                    return mp_cuda_elementwise(relu_bwd_op<DT>{{t[0], t[1], t[2]}}, n));
    return MP_OK;
}

/* scale's operand x, read and written in place, times a. */
template <mp_dtype DT> struct scale_op {
    static constexpr mp_dtype dt = DT;
    static constexpr int N = 1;
    static constexpr unsigned in = 1u, out = 1u;
    void *t[N];
    float a;
    __device__ void at(void *const *p, int64_t i) const { mp_scale_at(p[0], DT, a, i); }
};

extern "C" mp_status mp_cuda_scale(mp_tensor *x, double alpha)
{
    MP_CUDA_DTYPES("scale", x);
    int64_t n = mp_tensor_numel(x);
    MP_VEC_BY_DTYPE(x->dtype, DT,
                    return mp_cuda_elementwise(scale_op<DT>{{x->data}, (float)alpha}, n));
    return MP_OK;
}

/* fill's operand x (written) and the value v. */
template <mp_dtype DT> struct fill_op {
    static constexpr mp_dtype dt = DT;
    static constexpr int N = 1;
    static constexpr unsigned in = 0u, out = 1u;
    void *t[N];
    float v;
    __device__ void at(void *const *p, int64_t i) const { mp_elem_store_f32(p[0], DT, i, v); }
};

extern "C" mp_status mp_cuda_fill(mp_tensor *x, double value)
{
    MP_CUDA_DTYPES("fill", x);
    int64_t n = mp_tensor_numel(x);
    MP_VEC_BY_DTYPE(x->dtype, DT,
                    return mp_cuda_elementwise(fill_op<DT>{{x->data}, (float)value}, n));
    return MP_OK;
}

/* n elements of src (dtype ST) rounded into dst (DT) by engine/cast_rule.h: packs of MP_VEC
 * (one or two 16-byte loads, one or two stores) when `packed`, then the tail one by one. */
template <mp_dtype ST, mp_dtype DT>
__global__ static void k_convert(const void *src, void *dst, int64_t n, bool packed)
{
    const int64_t packs = packed ? n / MP_VEC : 0;
    MP_CUDA_FOR(q, packs)
    {
        mp_vec<ST, MP_VEC> a;
        mp_vec<DT, MP_VEC> b;
        a.load(src, q * MP_VEC);
#pragma unroll
        for (int e = 0; e < MP_VEC; e++)
            b.set(e, a.f32(e));
        b.store(dst, q * MP_VEC);
    }
    MP_CUDA_FOR(j, n - packs * MP_VEC)
        mp_convert_at(src, ST, dst, DT, packs * MP_VEC + j);
}

/* Launches k_convert<ST, DT> over n elements, packed when both tensors are aligned to a pack. */
template <mp_dtype ST, mp_dtype DT>
static mp_status convert_as(const void *src, void *dst, int64_t n)
{
    typedef mp_vec<ST, MP_VEC> src_pack;
    typedef mp_vec<DT, MP_VEC> dst_pack;
    bool packed = mp_vec_aligned(alignof(src_pack), {src}) &&
                  mp_vec_aligned(alignof(dst_pack), {dst});
    MP_LAUNCH((k_convert<ST, DT>), mp_cuda_blocks(packed ? n / MP_VEC : n), 256, src, dst, n,
              packed);
    return MP_OK;
}

extern "C" mp_status mp_cuda_convert(const mp_tensor *src, mp_tensor *dst)
{
    MP_CUDA_DTYPES("convert", src, dst);
    int64_t n = mp_tensor_numel(src);
    MP_CUDA_REQUIRE(mp_tensor_numel(dst) == n, "convert");
    if (n && src->dtype == dst->dtype)
        return mp_cuda_copy(dst->data, src->data, (size_t)mp_tensor_bytes(src));
    if (n == 0)
        return MP_OK;
    MP_VEC_BY_DTYPE(src->dtype, ST, MP_VEC_BY_DTYPE(dst->dtype, DT,
                                                    return convert_as<ST, DT>(src->data,
                                                                              dst->data, n)));
    return MP_OK;
}

/* add's (or with relu add_relu's) operands of one dtype: a and b (read), y (written). */
template <mp_dtype DT, bool RELU> struct add_op {
    static constexpr mp_dtype dt = DT;
    static constexpr int N = 3;
    static constexpr unsigned in = 3u, out = 4u;
    void *t[N];
    __device__ void at(void *const *p, int64_t i) const
    {
        if (RELU)
            mp_add_relu_at(p[0], DT, p[1], DT, p[2], DT, i);
        else
            mp_add_at(p[0], DT, p[1], DT, p[2], DT, i);
    }
};

/* y = a + b, or with relu y = relu(a + b) (add_relu), each operand of its own dtype. */
__global__ static void k_add(const void *a, mp_dtype at, const void *b, mp_dtype bt, void *y,
                             mp_dtype yt, int64_t n, bool relu)
{
    if (relu) {
        MP_CUDA_FOR(i, n)
            mp_add_relu_at(a, at, b, bt, y, yt, i);
    } else {
        MP_CUDA_FOR(i, n)
            mp_add_at(a, at, b, bt, y, yt, i);
    }
}

static mp_status add(const char *op, const mp_tensor *a, const mp_tensor *b, mp_tensor *y,
                     bool relu)
{
    MP_CUDA_DTYPES(op, a, b, y);
    int64_t n = mp_tensor_numel(y);
    MP_CUDA_REQUIRE(mp_tensor_numel(a) == n && mp_tensor_numel(b) == n, op);
    void *t[3] = {(void *)a->data, (void *)b->data, y->data};
    if (a->dtype == y->dtype && b->dtype == y->dtype)
        MP_VEC_BY_DTYPE(y->dtype, DT,
                        return relu ? mp_cuda_elementwise(add_op<DT, true>{{t[0], t[1], t[2]}}, n)
                                    : mp_cuda_elementwise(add_op<DT, false>{{t[0], t[1], t[2]}},
                                                          n));
    if (n)
        MP_LAUNCH(k_add, mp_cuda_blocks(n), 256, a->data, a->dtype, b->data, b->dtype, y->data,
                  y->dtype, n, relu);
    return MP_OK;
}

extern "C" mp_status mp_cuda_add(const mp_tensor *a, const mp_tensor *b, mp_tensor *y)
{
    return add("add", a, b, y, false);
}

extern "C" mp_status mp_cuda_add_relu(const mp_tensor *a, const mp_tensor *b, mp_tensor *y)
{
    return add("add_relu", a, b, y, true);
}
