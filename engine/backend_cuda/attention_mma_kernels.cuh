/* The tensor-core kernels of tiled attention (see attention_mma.cu, which launches them): device
 * code only, written against CUDA's WMMA API (nvcuda::wmma), so that the suite can also build it
 * on the CPU over a stand-in of the device (tests/emu/cuda_emu.h) and check its arithmetic
 * against a direct computation (tests/emu/test_attention_mma.cpp), where no GPU is. The includer
 * provides the CUDA types and intrinsics (cuda_fp16.h, cuda_bf16.h, mma.h, or the stand-in),
 * `using namespace nvcuda`, and MP_MMA_BUILT where WMMA with bf16 exists (sm_80 on). */
#ifndef MP_ATTENTION_MMA_KERNELS_CUH
#define MP_ATTENTION_MMA_KERNELS_CUH

#include "engine/backend_cuda/attention_flash_args.cuh"

enum {
    MMA_ROWS = 64,     /* a block's query (key) rows */
    MMA_TILE = 64,     /* the other operand's rows a step */
    MMA_WARPS = 4,     /* warps a block, 16 rows each */
    MMA_THREADS = 128, /* threads a block */
    MMA_PAIR_COLS = MMA_TILE / 2, /* a row's columns per lane of its pair */
};

/* Row strides (elements) of a kernel's shared tiles at dh = 16 NB: with PAD each padded past a
 * multiple of 128 bytes, so that the 8 rows a WMMA load or store reads or writes at once start
 * in different banks (unpadded, the rows of a 64-column tile all start in one: 4- to 8-way
 * conflicts); the lanes' own accesses stay conflict-free with the rotation of mma_col either way.
 * The forward and dQ are always padded; dK/dV, the largest, both ways, and attention_mma.cu
 * launches the padded one unless it would leave fewer blocks an SM (dh = 128 on sm_90, dh = 64
 * on sm_80). Pointers into the tiles stay 32-byte aligned and the strides multiples of 16
 * bytes, as WMMA asks. */
template <int NB, bool PAD> struct mma_lay {
    static constexpr int dh = 16 * NB;
    static constexpr bool pad = PAD;
    static constexpr int hs = dh + (pad ? 8 : 0);       /* a staged 16-bit row: q, k, v, dO */
    static constexpr int ps = MMA_TILE + (pad ? 8 : 0); /* a 16-bit row of P' or dS */
    static constexpr int ss = MMA_TILE + (pad ? 4 : 0); /* an FP32 row of S or dP' */
    static constexpr int os = dh + (pad ? 4 : 0);       /* an FP32 accumulator row */
    static constexpr int w16 = MMA_WARPS * 16;          /* rows of the warps' own tiles */
};

/* The 16-bit type WMMA takes for dtype DT. */
template <mp_dtype DT> struct mma_half;
template <> struct mma_half<MP_F16> {
    typedef __half T;
};
template <> struct mma_half<MP_BF16> {
    typedef __nv_bfloat16 T;
};

/* v rounded to DT's 16 bits (engine/cast_rule.h's rounding, as every backend rounds). */
template <mp_dtype DT> __device__ static uint16_t to_half(float v)
{
    uint16_t h;
    mp_elem_store_f32(&h, DT, 0, v);
    return h;
}

/* Rows t0 .. t0 + MMA_TILE - 1 of a (T, dh) operand into dst (MMA_TILE rows of dh, row
 * stride ds, a multiple of 8), rows from T on zero: row t starts at src + t stride (16-bit
 * elements, 16-byte aligned); 16 bytes a load. */
__device__ static void stage16(uint16_t *dst, int ds, const uint16_t *src, int64_t stride,
                               int64_t t0, int64_t T, int dh)
{
    const int per = dh / 8;
    for (int e = threadIdx.x; e < MMA_TILE * per; e += MMA_THREADS) {
        const int r = e / per, c = e % per;
        const int64_t t = t0 + r;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (t < T)
            v = *(const uint4 *)(src + t * stride + c * 8);
        *(uint4 *)(dst + r * ds + c * 8) = v;
    }
}

/* stage16 of a tensor of dtype dt (row t's elements at e0 + t stride), each value rounded to DT
 * when dt is not DT. */
template <mp_dtype DT>
__device__ static void stage_any(uint16_t *dst, int ds, const void *src, mp_dtype dt,
                                 int64_t e0, int64_t stride, int64_t t0, int64_t T, int dh)
{
    if (dt == DT) {
        stage16(dst, ds, (const uint16_t *)src + e0, stride, t0, T, dh);
        return;
    }
    for (int e = threadIdx.x; e < MMA_TILE * dh; e += MMA_THREADS) {
        const int r = e / dh, c = e % dh;
        const int64_t t = t0 + r;
        dst[r * ds + c] = t < T ? to_half<DT>(mp_elem_load_f32(src, dt, e0 + t * stride + c))
                                : (uint16_t)0;
    }
}

#ifdef MP_MMA_BUILT
/* out (16 x MMA_TILE FP32, row stride L::ss) = A B^T for A 16 x dh at a and B MMA_TILE x dh at
 * b (both row-major, row stride L::hs): one warp. */
template <mp_dtype DT, class L>
__device__ static void mma_abt(float *out, const uint16_t *a, const uint16_t *b)
{
    typedef typename mma_half<DT>::T H;
#pragma unroll
    for (int jb = 0; jb < MMA_TILE / 16; jb++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < L::dh / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major> fb;
            wmma::load_matrix_sync(fa, (const H *)a + kk * 16, L::hs);
            wmma::load_matrix_sync(fb, (const H *)b + jb * 16 * L::hs + kk * 16, L::hs);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(out + jb * 16, acc, L::ss, wmma::mem_row_major);
    }
}

/* acc += P V[:, 16 db .. 16 db + 15] for P 16 x MMA_TILE at p (row stride L::ps) and V
 * MMA_TILE x dh at v (row stride L::hs): one warp. */
template <mp_dtype DT, class L>
__device__ static void mma_pv(wmma::fragment<wmma::accumulator, 16, 16, 16, float> &acc,
                              const uint16_t *p, const uint16_t *v, int db)
{
    typedef typename mma_half<DT>::T H;
#pragma unroll
    for (int kk = 0; kk < MMA_TILE / 16; kk++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, (const H *)p + kk * 16, L::ps);
        wmma::load_matrix_sync(fb, (const H *)v + kk * 16 * L::hs + db * 16, L::hs);
        wmma::mma_sync(acc, fa, fb, acc);
    }
}
#endif

/* Whether query row i attends to key j. */
__device__ static bool mma_sees(const flash_args &a, int64_t i, int64_t j)
{
    return i < a.T && j < a.T && (!a.causal || j <= i);
}

/* The end of the keys a block of query rows from i0 attends to. */
__device__ static int64_t mma_keys_end(const flash_args &a, int64_t i0)
{
    return a.causal && i0 + MMA_ROWS < a.T ? i0 + MMA_ROWS : a.T;
}

/* Column k (0 .. n / 2 - 1) of the n (a power of 2) that lane `lane` of a warp takes in its row
 * (lane / 2): its pair's halves are the even and the odd columns, rotated by the row, so that
 * the 32 lanes read and write 32 banks of shared memory at once. */
__device__ static int mma_col(int k, int lane, int n)
{
    return (2 * k + lane) & (n - 1);
}

/* d_i = dO_i . out_i of every row (n, h, i) into dd[(n heads + h) T + i], in FP32 in column
 * order: the backward kernels' term of each row, formed once. */
__global__ static void k_mma_rowdot(flash_args a, const void *o, const void *dout, float *dd)
{
    const int64_t rows = a.N * a.heads * a.T;
    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = r / (a.heads * a.T), h = r / a.T % a.heads, i = r % a.T;
        const int64_t e = (n * a.T + i) * a.D + h * a.dh;
        float acc = 0.0f;
        for (int64_t c = 0; c < a.dh; c++)
            acc += mp_elem_load_f32(dout, a.dodt, e + c) * mp_elem_load_f32(o, a.outdt, e + c);
        dd[r] = acc;
    }
}

/* Row i's saved statistics (m, 1 / l) and d_i (dd, k_mma_rowdot's); zeros past T. */
__device__ static void mma_row_terms(const flash_args &a, const void *stats, const float *dd,
                                     int64_t n, int64_t h, int64_t i, float *m, float *inv,
                                     float *d)
{
    *m = *inv = *d = 0.0f;
    if (i < a.T) {
        const int64_t row = (n * a.heads + h) * a.T + i;
        *m = mp_elem_load_f32(stats, a.sdt, 2 * row);
        *inv = 1.0f / mp_elem_load_f32(stats, a.sdt, 2 * row + 1);
        *d = dd[row];
    }
}

/* The forward: block (query block, h, n). */
template <mp_dtype DT, int NB>
__global__ static void __launch_bounds__(MMA_THREADS)
    k_mma_fwd(flash_args a, const void *qkv, void *stats, void *out)
{
#ifdef MP_MMA_BUILT
    typedef mma_lay<NB, true> L;
    constexpr int dh = L::dh;
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *qs = (uint16_t *)smem, *ks = qs + MMA_ROWS * L::hs, *vs = ks + MMA_TILE * L::hs;
    float *sf = (float *)(vs + MMA_TILE * L::hs);
    uint16_t *ph = (uint16_t *)(sf + L::w16 * L::ss);
    float *of = (float *)(ph + L::w16 * L::ps);
    a.offset = mp_mask_offset(a.offset, a.step);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    const int64_t n = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * MMA_ROWS;
    const int64_t i = i0 + warp * 16 + r, ld = 3 * a.D;
    const uint16_t *q16 = (const uint16_t *)qkv + n * a.T * ld + h * dh;
    float *sw = sf + warp * 16 * L::ss, *ow = of + warp * 16 * L::os;
    uint16_t *pw = ph + warp * 16 * L::ps;
    stage16(qs, L::hs, q16, ld, i0, a.T, dh);
    for (int e = lane; e < 16 * L::os; e += 32)
        ow[e] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j0 = 0; j0 < mma_keys_end(a, i0); j0 += MMA_TILE) {
        __syncthreads();
        stage16(ks, L::hs, q16 + a.D, ld, j0, a.T, dh);
        stage16(vs, L::hs, q16 + 2 * a.D, ld, j0, a.T, dh);
        __syncthreads();
        mma_abt<DT, L>(sw, qs + warp * 16 * L::hs, ks);
        __syncwarp();
        float s[MMA_PAIR_COLS], tmax = -INFINITY;
        int live = 0, bad = 0;
#pragma unroll
        for (int k = 0; k < MMA_PAIR_COLS; k++) {
            const int c = mma_col(k, lane, MMA_TILE);
            s[k] = sw[r * L::ss + c] * a.scale;
            if (mma_sees(a, i, j0 + c)) {
                live++;
                bad |= !isfinite(s[k]);
                tmax = fmaxf(tmax, s[k]);
            }
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        bad |= __shfl_xor_sync(0xffffffffu, bad, 1);
        live += __shfl_xor_sync(0xffffffffu, live, 1);
        const float m2 = mp_attn_flash_max(m, tmax, bad != 0);
        const float cf = mp_attn_flash_rescale(m, m2);
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < MMA_PAIR_COLS; k++) {
            const int c = mma_col(k, lane, MMA_TILE);
            const int64_t j = j0 + c;
            float pv = 0.0f;
            if (mma_sees(a, i, j)) {
                const float p = mp_exp_f32(s[k] - m2);
                sum += p;
                pv = p * drop_mult(a, n, h, i, j);
            }
            pw[r * L::ps + c] = to_half<DT>(pv);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        if (live > 0) { /* a row that sees none of this tile keeps its state */
            l = l * cf + sum;
            m = m2;
            for (int k = 0; k < dh / 2; k++)
                ow[r * L::os + mma_col(k, lane, dh)] *= cf;
        }
        __syncwarp();
#pragma unroll
        for (int db = 0; db < NB; db++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, ow + db * 16, L::os, wmma::mem_row_major);
            mma_pv<DT, L>(acc, pw, vs, db);
            wmma::store_matrix_sync(ow + db * 16, acc, L::os, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (i >= a.T)
        return;
    const float inv = 1.0f / l;
    for (int k = 0; k < dh / 2; k++) {
        const int d = mma_col(k, lane, dh);
        mp_elem_store_f32(out, a.odt, (n * a.T + i) * a.D + h * dh + d,
                          ow[r * L::os + d] * inv);
    }
    if (half == 0) {
        const int64_t so = ((n * a.heads + h) * a.T + i) * 2;
        mp_elem_store_f32(stats, a.sdt, so, m);
        mp_elem_store_f32(stats, a.sdt, so + 1, l);
    }
#else
    __trap(); /* launched only where mma_usable found this code built (sm_80 on) */
#endif
}

#ifdef MP_MMA_BUILT
/* Writes the warp's 16 rows (the lane pair's row j) of an accumulator (dh / 16 fragments) into
 * dqkv's part at column offset `part` (0: dQ, D: dK, 2 D: dV) times `scale`, through st
 * (16 rows of FP32, row stride L::os, the warp's). */
template <class L>
__device__ static void mma_store_rows(const flash_args &a, wmma::fragment<wmma::accumulator, 16,
                                      16, 16, float> (&acc)[L::dh / 16], float *st, void *dqkv,
                                      int64_t n, int64_t h, int64_t j, int r, int lane,
                                      int64_t part, float scale)
{
    constexpr int dh = L::dh;
#pragma unroll
    for (int db = 0; db < dh / 16; db++)
        wmma::store_matrix_sync(st + db * 16, acc[db], L::os, wmma::mem_row_major);
    __syncwarp();
    if (j < a.T)
        for (int k = 0; k < dh / 2; k++) {
            const int d = mma_col(k, lane, dh);
            mp_elem_store_f32(dqkv, a.odt, (n * a.T + j) * 3 * a.D + part + h * dh + d,
                              st[r * L::os + d] * scale);
        }
    __syncwarp();
}
#endif

/* dQ: block (query block, h, n), over the key tiles. */
template <mp_dtype DT, int NB>
__global__ static void __launch_bounds__(MMA_THREADS)
    k_mma_dq(flash_args a, const void *qkv, const void *stats, const float *dd, const void *dout,
             void *dqkv)
{
#ifdef MP_MMA_BUILT
    typedef mma_lay<NB, true> L;
    constexpr int dh = L::dh;
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *qs = (uint16_t *)smem, *dos = qs + MMA_ROWS * L::hs, *ks = dos + MMA_ROWS * L::hs;
    uint16_t *vs = ks + MMA_TILE * L::hs;
    float *sf = (float *)(vs + MMA_TILE * L::hs), *df = sf + L::w16 * L::ss;
    uint16_t *ph = (uint16_t *)(df + L::w16 * L::ss);
    a.offset = mp_mask_offset(a.offset, a.step);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2;
    const int64_t n = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * MMA_ROWS;
    const int64_t i = i0 + warp * 16 + r, ld = 3 * a.D;
    const uint16_t *q16 = (const uint16_t *)qkv + n * a.T * ld + h * dh;
    float *sw = sf + warp * 16 * L::ss, *dw = df + warp * 16 * L::ss;
    uint16_t *pw = ph + warp * 16 * L::ps;
    stage16(qs, L::hs, q16, ld, i0, a.T, dh);
    stage_any<DT>(dos, L::hs, dout, a.dodt, n * a.T * a.D + h * dh, a.D, i0, a.T, dh);
    float m, inv, dr;
    mma_row_terms(a, stats, dd, n, h, i, &m, &inv, &dr);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dq[NB];
#pragma unroll
    for (int db = 0; db < NB; db++)
        wmma::fill_fragment(dq[db], 0.0f);
    for (int64_t j0 = 0; j0 < mma_keys_end(a, i0); j0 += MMA_TILE) {
        __syncthreads();
        stage16(ks, L::hs, q16 + a.D, ld, j0, a.T, dh);
        stage16(vs, L::hs, q16 + 2 * a.D, ld, j0, a.T, dh);
        __syncthreads();
        mma_abt<DT, L>(sw, qs + warp * 16 * L::hs, ks);
        mma_abt<DT, L>(dw, dos + warp * 16 * L::hs, vs);
        __syncwarp();
#pragma unroll 8
        for (int k = 0; k < MMA_PAIR_COLS; k++) {
            const int c = mma_col(k, lane, MMA_TILE), e = r * L::ss + c;
            const int64_t j = j0 + c;
            float ds = 0.0f;
            if (mma_sees(a, i, j)) {
                const float p = mp_attn_flash_p(sw[e] * a.scale, m, inv);
                ds = p * (dw[e] * drop_mult(a, n, h, i, j) - dr);
            }
            pw[r * L::ps + c] = to_half<DT>(ds);
        }
        __syncwarp();
#pragma unroll
        for (int db = 0; db < NB; db++)
            mma_pv<DT, L>(dq[db], pw, ks, db);
    }
    __syncthreads(); /* qs and dos are free: the warps' dQ goes through them */
    mma_store_rows<L>(a, dq, (float *)smem + warp * 16 * L::os, dqkv, n, h, i, r, lane, 0,
                      a.scale);
#else
    __trap();
#endif
}

/* dK and dV: block (key block, h, n), over the query tiles that see it; PAD: mma_lay's. */
template <mp_dtype DT, int NB, bool PAD>
__global__ static void __launch_bounds__(MMA_THREADS)
    k_mma_dkv(flash_args a, const void *qkv, const void *stats, const float *dd, const void *dout,
              void *dqkv)
{
#ifdef MP_MMA_BUILT
    typedef mma_lay<NB, PAD> L;
    constexpr int dh = L::dh;
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *ks = (uint16_t *)smem, *vs = ks + MMA_ROWS * L::hs, *qs = vs + MMA_ROWS * L::hs;
    uint16_t *dos = qs + MMA_TILE * L::hs;
    float *rm = (float *)(dos + MMA_TILE * L::hs), *ri = rm + MMA_TILE, *rd = ri + MMA_TILE;
    float *sf = rm + 256, *df = sf + L::w16 * L::ss; /* rows: 1 KiB */
    uint16_t *pp = (uint16_t *)(df + L::w16 * L::ss);
    uint16_t *pd = pp + L::w16 * L::ps;
    a.offset = mp_mask_offset(a.offset, a.step);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2;
    const int64_t n = blockIdx.z, h = blockIdx.y, j0 = (int64_t)blockIdx.x * MMA_ROWS;
    const int64_t j = j0 + warp * 16 + r, ld = 3 * a.D;
    const uint16_t *q16 = (const uint16_t *)qkv + n * a.T * ld + h * dh;
    float *sw = sf + warp * 16 * L::ss, *dw = df + warp * 16 * L::ss;
    uint16_t *pw = pp + warp * 16 * L::ps, *dsw = pd + warp * 16 * L::ps;
    stage16(ks, L::hs, q16 + a.D, ld, j0, a.T, dh);
    stage16(vs, L::hs, q16 + 2 * a.D, ld, j0, a.T, dh);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dk[NB], dv[NB];
#pragma unroll
    for (int db = 0; db < NB; db++) {
        wmma::fill_fragment(dk[db], 0.0f);
        wmma::fill_fragment(dv[db], 0.0f);
    }
    for (int64_t q0 = a.causal ? j0 : 0; q0 < a.T; q0 += MMA_TILE) {
        __syncthreads();
        stage16(qs, L::hs, q16, ld, q0, a.T, dh);
        stage_any<DT>(dos, L::hs, dout, a.dodt, n * a.T * a.D + h * dh, a.D, q0, a.T, dh);
        if (threadIdx.x < MMA_TILE)
            mma_row_terms(a, stats, dd, n, h, q0 + threadIdx.x, &rm[threadIdx.x],
                          &ri[threadIdx.x], &rd[threadIdx.x]);
        __syncthreads();
        mma_abt<DT, L>(sw, ks + warp * 16 * L::hs, qs);  /* S^T */
        mma_abt<DT, L>(dw, vs + warp * 16 * L::hs, dos); /* dP'^T */
        __syncwarp();
#pragma unroll 8
        for (int k = 0; k < MMA_PAIR_COLS; k++) {
            const int col = mma_col(k, lane, MMA_TILE), e = r * L::ss + col;
            const int64_t qi = q0 + col;
            float pv = 0.0f, ds = 0.0f;
            if (mma_sees(a, qi, j)) {
                const float p = mp_attn_flash_p(sw[e] * a.scale, rm[col], ri[col]);
                const float mult = drop_mult(a, n, h, qi, j);
                pv = p * mult;
                ds = p * (dw[e] * mult - rd[col]);
            }
            pw[r * L::ps + col] = to_half<DT>(pv);
            dsw[r * L::ps + col] = to_half<DT>(ds);
        }
        __syncwarp();
#pragma unroll
        for (int db = 0; db < NB; db++) {
            mma_pv<DT, L>(dv[db], pw, dos, db);
            mma_pv<DT, L>(dk[db], dsw, qs, db);
        }
    }
    __syncthreads(); /* ks and vs are free: the warps' dK and dV go through them */
    float *st = (float *)smem + warp * 16 * L::os;
    mma_store_rows<L>(a, dk, st, dqkv, n, h, j, r, lane, a.D, a.scale);
    mma_store_rows<L>(a, dv, st, dqkv, n, h, j, r, lane, 2 * a.D, 1.0f);
#else
    __trap();
#endif
}

/* Dynamic shared memory of each kernel at dh = 16 NB (the layouts above): the staged 16-bit
 * tiles, the warps' FP32 S (and dP') and 16-bit P' (and dS) tiles, the forward's FP32
 * accumulators, dK/dV's 1 KiB of row terms. At dh = 128: 110, 111 and 113 KiB (121 padded). */
template <int NB> static constexpr size_t fwd_bytes()
{
    typedef mma_lay<NB, true> L;
    return 2 * L::hs * (MMA_ROWS + 2 * MMA_TILE) + 4 * L::w16 * L::ss + 2 * L::w16 * L::ps +
           4 * L::w16 * L::os;
}
template <int NB> static constexpr size_t dq_bytes()
{
    typedef mma_lay<NB, true> L;
    return 2 * L::hs * (2 * MMA_ROWS + 2 * MMA_TILE) + 8 * L::w16 * L::ss + 2 * L::w16 * L::ps;
}
template <int NB, bool PAD> static constexpr size_t dkv_bytes()
{
    typedef mma_lay<NB, PAD> L;
    return 2 * L::hs * (2 * MMA_ROWS + 2 * MMA_TILE) + 1024 + 8 * L::w16 * L::ss +
           4 * L::w16 * L::ps;
}
/* Two blocks share an SM of sm_90 (228 KiB, 1 KiB of it kept per block) at every dh. */
static_assert(fwd_bytes<8>() <= 115712 && dq_bytes<8>() <= 115712 &&
                  dkv_bytes<8, false>() <= 115712,
              "a kernel's shared memory at dh = 128 leaves an sm_90 SM one block");

#endif
