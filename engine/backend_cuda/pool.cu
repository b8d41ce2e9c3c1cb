/* 2-D max and average pooling on the GPU over NHWC tensors (mp_pool_desc), with the CPU
 * reference's rules and its order of operations, so that results are the CPU's bit for bit:
 * max pooling ignores padding, takes the first maximum of each window in row-major order (a NaN
 * beats any number, so it propagates) and routes the gradient to it, ties included (cuDNN
 * leaves open which of equal maxima receives it, and ReLU outputs tie at zero all the time);
 * average pooling divides the FP32 sum of the window, in row-major order, by the full window
 * area (PyTorch's count_include_pad=True). Forward has one thread per output element; backward
 * one per input element, which gathers the windows covering it (recomputing each window's
 * maximum from x), adds their contributions in FP32 and rounds once. x, y, dy and dx share one
 * dtype (FP32, fp16 or bf16); dx must not alias x or dy. Indices are 64-bit. */
#include "engine/backend_cuda/cuda.h"
#include "engine/pool_geom.h"

/* The flat position h W + w of the first maximum of window (p, q) of channel c of image n
 * (NaN beats any number), and its value in *best. */
__device__ static int64_t window_argmax(const void *x, mp_dtype dt, const mp_pool_geom &g, int64_t n,
                                        int64_t p, int64_t q, int64_t c, float *best)
{
    int64_t hs, he, ws, we;
    mp_pool_span(p, g.sh, g.ph, g.kh, g.H, &hs, &he);
    mp_pool_span(q, g.sw, g.pw, g.kw, g.W, &ws, &we);
    int64_t at = hs * g.W + ws;
    float b = mp_elem_load_f32(x, dt, (n * g.H * g.W + at) * g.C + c);
    for (int64_t hh = hs; hh < he; hh++)
        for (int64_t ww = ws; ww < we; ww++) {
            float v = mp_elem_load_f32(x, dt, (n * g.H * g.W + hh * g.W + ww) * g.C + c);
            if (v > b || (isnan(v) && !isnan(b))) {
                b = v;
                at = hh * g.W + ww;
            }
        }
    *best = b;
    return at;
}

/* y (N, P, Q, C): each window's first maximum, or its FP32 sum over the area. */
__global__ static void k_pool_fwd(const void *x, void *y, mp_dtype dt, mp_pool_geom g, bool is_max)
{
    const float area = (float)(g.kh * g.kw);
    const int64_t total = g.N * g.P * g.Q * g.C;
    MP_CUDA_FOR(i, total)
    {
        int64_t c = i % g.C, t = i / g.C;
        int64_t q = t % g.Q;
        t /= g.Q;
        int64_t p = t % g.P, n = t / g.P;
        float v;
        if (is_max) {
            window_argmax(x, dt, g, n, p, q, c, &v);
        } else {
            int64_t hs, he, ws, we;
            mp_pool_span(p, g.sh, g.ph, g.kh, g.H, &hs, &he);
            mp_pool_span(q, g.sw, g.pw, g.kw, g.W, &ws, &we);
            float acc = 0.0f;
            for (int64_t hh = hs; hh < he; hh++)
                for (int64_t ww = ws; ww < we; ww++)
                    acc += mp_elem_load_f32(x, dt, (n * g.H * g.W + hh * g.W + ww) * g.C + c);
            v = acc / area;
        }
        mp_elem_store_f32(y, dt, i, v);
    }
}

/* dx (N, H, W, C): the dy of every window covering the element whose first maximum it is (max),
 * or the sum of the covering windows' dy over the area (average), windows in row-major order. */
__global__ static void k_pool_bwd(const void *x, const void *dy, void *dx, mp_dtype dt,
                                  mp_pool_geom g, bool is_max)
{
    const float area = (float)(g.kh * g.kw);
    const int64_t total = g.N * g.H * g.W * g.C;
    MP_CUDA_FOR(i, total)
    {
        int64_t c = i % g.C, t = i / g.C;
        int64_t w = t % g.W;
        t /= g.W;
        int64_t h = t % g.H, n = t / g.H;
        int64_t plo, phi, qlo, qhi;
        mp_pool_covering(h, g.sh, g.ph, g.kh, g.P, &plo, &phi);
        mp_pool_covering(w, g.sw, g.pw, g.kw, g.Q, &qlo, &qhi);
        float acc = 0.0f;
        for (int64_t p = plo; p <= phi; p++)
            for (int64_t q = qlo; q <= qhi; q++) {
                float gv = mp_elem_load_f32(dy, dt, ((n * g.P + p) * g.Q + q) * g.C + c);
                float best;
                if (!is_max || window_argmax(x, dt, g, n, p, q, c, &best) == h * g.W + w)
                    acc += gv;
            }
        mp_elem_store_f32(dx, dt, i, is_max ? acc : acc / area);
    }
}

extern "C" mp_status mp_cuda_pool_forward(const mp_pool_desc *d, const mp_tensor *x,
                                          mp_tensor *y)
{
    MP_CUDA_DTYPES("pool_forward", x, y);
    mp_pool_geom g;
    MP_CUDA_REQUIRE(mp_pool_geometry(d, x, &g), "pool_forward");
    MP_CUDA_REQUIRE(mp_pool_shaped(y, &g, g.P, g.Q) && y->dtype == x->dtype, "pool_forward");
    int64_t n = mp_tensor_numel(y);
    MP_LAUNCH(k_pool_fwd, mp_cuda_blocks(n), 256, x->data, y->data, x->dtype, g, d->max);
    return MP_OK;
}

extern "C" mp_status mp_cuda_pool_backward(const mp_pool_desc *d, const mp_tensor *x,
                                           const mp_tensor *y, const mp_tensor *dy,
                                           mp_tensor *dx)
{
    MP_CUDA_DTYPES("pool_backward", x, dy, dx);
    mp_pool_geom g;
    MP_CUDA_REQUIRE(mp_pool_geometry(d, x, &g), "pool_backward");
    MP_CUDA_REQUIRE(mp_pool_shaped(y, &g, g.P, g.Q) && mp_pool_shaped(dy, &g, g.P, g.Q), "pool_backward");
    MP_CUDA_REQUIRE(mp_pool_shaped(dx, &g, g.H, g.W), "pool_backward");
    MP_CUDA_REQUIRE(dy->dtype == x->dtype && dx->dtype == x->dtype, "pool_backward");
    int64_t n = mp_tensor_numel(dx);
    MP_LAUNCH(k_pool_bwd, mp_cuda_blocks(n), 256, x->data, dy->data, dx->data, x->dtype, g,
              d->max);
    return MP_OK;
}
