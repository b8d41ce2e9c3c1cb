/* A stand-in for a CUDA device, in tests only, so that kernels written against the CUDA API
 * (engine/backend_cuda/attention_mma_kernels.cuh) can run on the CPU where the suite has no GPU:
 * a block's threads are std::threads meeting at std::barriers (__syncthreads; __syncwarp per
 * warp of 32), shuffles go through a per-warp exchange, shared memory is one buffer filled with
 * NaN bytes before each block and checked for writes past the bytes the launch asked for, and
 * nvcuda::wmma's 16 x 16 x 16 fragments are plain matrices (an accumulator's elements owned by
 * the lanes as on no GPU in particular: lane l holds row l / 2, columns 8 (l % 2) .. + 7, so that
 * a kernel that reads an accumulator's elements without a store/load fails here too) whose loads
 * check WMMA's rules (256-bit aligned pointers, ldm a multiple of 8 for 16-bit and of 4 for FP32
 * elements) and whose products add in FP32 in k order. The real device runs the same kernels in
 * the op table (tests/gpu). One block at a time; the threads of a block run concurrently. A
 * kernel run here takes its shared memory dynamically (extern __shared__ ... smem[]): a static
 * __shared__ array would be one per thread, as __shared__ means nothing here. */
#ifndef MP_CUDA_EMU_H
#define MP_CUDA_EMU_H

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
#include "engine/backends.h"
#include "engine/half.h"
}

/* The kernels' CUDA keywords. */
#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)

struct emu_dim3 {
    unsigned x, y, z;
};
/* __thread, not thread_local: no TLS wrapper functions across files (UBSan took their result
 * for a null pointer) */
extern __thread emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

/* The running block: its barriers and its warps' shuffle slots. */
struct emu_block {
    std::barrier<> *all, *warp[32];
    volatile float xf[32][32];
    volatile int xi[32][32];
};
extern emu_block *emu_current;
extern long emu_misaligned; /* WMMA pointers found not 256-bit aligned */

/* The calling thread's index in its block, x fastest (warps are its runs of 32). */
static inline unsigned emu_tid()
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

static inline void __syncthreads() { emu_current->all->arrive_and_wait(); }
static inline void __syncwarp() { emu_current->warp[emu_tid() / 32]->arrive_and_wait(); }

template <typename T> static inline T emu_shfl_xor(T v, int mask, volatile T (*slot)[32])
{
    const unsigned w = emu_tid() / 32, l = emu_tid() % 32;
    slot[w][l] = v;
    __syncwarp();
    T r = slot[w][l ^ (unsigned)mask];
    __syncwarp();
    return r;
}
static inline float __shfl_xor_sync(unsigned, float v, int mask)
{
    return emu_shfl_xor(v, mask, emu_current->xf);
}
static inline int __shfl_xor_sync(unsigned, int v, int mask)
{
    return emu_shfl_xor(v, mask, emu_current->xi);
}

/* The warp's predicates as bits, lane l's at bit l (lanes past a partial warp's end: 0). */
static inline unsigned __ballot_sync(unsigned, int pred)
{
    const unsigned w = emu_tid() / 32, l = emu_tid() % 32;
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned lanes = threads - 32 * w < 32 ? threads - 32 * w : 32;
    emu_current->xi[w][l] = pred != 0;
    __syncwarp();
    unsigned bits = 0;
    for (unsigned q = 0; q < lanes; q++)
        bits |= emu_current->xi[w][q] ? 1u << q : 0u;
    __syncwarp();
    return bits;
}
static inline int __popc(unsigned v) { return __builtin_popcount(v); }

struct alignas(16) uint4 { /* as CUDA's: a misaligned 16-byte load is UB here (UBSan says so) */
    uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    return {a, b, c, d};
}

/* The 16-bit types WMMA takes, as their bits. */
struct __half {
    uint16_t bits;
};
struct __nv_bfloat16 {
    uint16_t bits;
};
static inline float emu_f32(__half h) { return mp_f16_to_f32(h.bits); }
static inline float emu_f32(__nv_bfloat16 h) { return mp_bf16_to_f32(h.bits); }

static inline void emu_aligned(const void *p, unsigned ldm, unsigned multiple)
{
    if ((uintptr_t)p % 32 != 0)
        __atomic_add_fetch(&emu_misaligned, 1, __ATOMIC_RELAXED);
    if (ldm % multiple != 0)
        abort(); /* a kernel bug the GPU would not report as plainly */
}

namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class L = void> struct fragment {
    float x[16][16];
};

/* The accumulator elements lane l owns: row l / 2, columns c0 .. c0 + 7. */
static inline int own_row() { return (int)(emu_tid() % 32) / 2; }
static inline int own_col0() { return (int)(emu_tid() % 32) % 2 * 8; }

template <class U, class T, class L> void fill_fragment(fragment<U, 16, 16, 16, T, L> &f, float v)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r][c] = v;
}
template <class T>
void load_matrix_sync(fragment<matrix_a, 16, 16, 16, T, row_major> &f, const T *p, unsigned ldm)
{
    emu_aligned(p, ldm, 8);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r][c] = emu_f32(p[r * ldm + c]);
}
template <class T>
void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, row_major> &f, const T *p, unsigned ldm)
{
    emu_aligned(p, ldm, 8);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++)
            f.x[k][n] = emu_f32(p[k * ldm + n]);
}
template <class T>
void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, col_major> &f, const T *p, unsigned ldm)
{
    emu_aligned(p, ldm, 8);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++)
            f.x[k][n] = emu_f32(p[n * ldm + k]);
}
template <class L>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, float, L> &f, const float *p,
                      unsigned ldm, layout_t layout)
{
    emu_aligned(p, ldm, 4);
    if (layout != mem_row_major)
        abort();
    const int r = own_row(), c0 = own_col0();
    for (int c = c0; c < c0 + 8; c++)
        f.x[r][c] = p[r * ldm + c];
}
template <class L>
void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float, L> &f,
                       unsigned ldm, layout_t layout)
{
    emu_aligned(p, ldm, 4);
    if (layout != mem_row_major)
        abort();
    const int r = own_row(), c0 = own_col0();
    for (int c = c0; c < c0 + 8; c++)
        p[r * ldm + c] = f.x[r][c];
}
template <class T, class LA, class LB, class L>
void mma_sync(fragment<accumulator, 16, 16, 16, float, L> &d,
              const fragment<matrix_a, 16, 16, 16, T, LA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LB> &b,
              const fragment<accumulator, 16, 16, 16, float, L> &c)
{
    const int r = own_row(), c0 = own_col0();
    for (int n = c0; n < c0 + 8; n++) {
        float s = c.x[r][n];
        for (int k = 0; k < 16; k++)
            s += a.x[r][k] * b.x[k][n];
        d.x[r][n] = s;
    }
}
} // namespace wmma
} // namespace nvcuda

/* The CPU backend (mp_engine's), the reference a kernel's bits are compared with; on failure a
 * FAIL line and exit 1. */
const mp_ops *emu_cpu_ops();

/* Shared memory: the kernels' `extern __shared__ unsigned char smem[]` is this buffer.
 * EMU_SMEM_MAX: the most a block may have on sm_90 (227 KiB, with the opt-in). */
enum { EMU_SMEM = 256 * 1024, EMU_SMEM_MAX = 232448, EMU_GUARD = 4096 };
extern unsigned char emu_smem[EMU_SMEM + EMU_GUARD];
#define smem emu_smem

/* Runs body() as `grid` blocks of `block` threads (within CUDA's limits, else it aborts; a last
 * warp may be partial), a block at a time on the same `block` std::threads, with `bytes` of
 * shared memory poisoned before each block; false (after a line on stderr) when a block wrote
 * shared memory past `bytes`. The globals below are tests/emu/cuda_emu.cpp's. */
template <class F> static bool emu_launch3(emu_dim3 grid, emu_dim3 block, size_t bytes, F body)
{
    const unsigned threads = block.x * block.y * block.z;
    const unsigned long blocks = (unsigned long)grid.x * grid.y * grid.z;
    if (bytes > EMU_SMEM_MAX || threads == 0 || threads > 1024 || block.z > 64 || grid.y > 65535 ||
        grid.z > 65535 || grid.x == 0 || grid.y == 0 || grid.z == 0)
        abort(); /* a launch CUDA refuses */
    bool ok = true;
    auto fresh = [&]() noexcept { /* between blocks: the last one's guard, then new poison */
        for (size_t b = bytes; ok && b < bytes + EMU_GUARD; b++)
            if (emu_smem[b] != 0xff) {
                fprintf(stderr, "shared memory written at byte %zu of %zu\n", b, bytes);
                ok = false;
            }
        memset(emu_smem, 0xff, sizeof emu_smem); /* NaN bytes */
    };
    memset(emu_smem, 0xff, sizeof emu_smem);
    std::barrier<> all(threads);
    std::barrier<decltype(fresh)> between(threads, fresh);
    std::vector<std::barrier<> *> warps;
    emu_block blk;
    blk.all = &all;
    for (unsigned w = 0; w * 32 < threads; w++)
        warps.push_back(blk.warp[w] = new std::barrier<>(
                            (std::ptrdiff_t)(threads - 32 * w < 32 ? threads - 32 * w : 32)));
    emu_current = &blk;
    std::vector<std::thread> th;
    for (unsigned t = 0; t < threads; t++)
        th.emplace_back([&, t] {
            threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
            blockDim = block;
            gridDim = grid;
            for (unsigned long i = 0; i < blocks; i++) {
                blockIdx = {(unsigned)(i % grid.x), (unsigned)(i / grid.x % grid.y),
                            (unsigned)(i / ((unsigned long)grid.x * grid.y))};
                body();
                between.arrive_and_wait();
            }
        });
    for (auto &t : th)
        t.join();
    for (auto *w : warps)
        delete w;
    return ok;
}

/* emu_launch3 with the grid (gx, gy, gz) of one-dimensional blocks of `threads` threads. */
template <class F> static bool emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                                          size_t bytes, F body)
{
    return emu_launch3({gx, gy, gz}, {threads, 1, 1}, bytes, body);
}

#endif
