/* The embedding's backward kernel (engine/backend_cuda/embedding.cu launches it), in a header
 * that builds without the CUDA runtime's headers (tests/emu/test_embedding_kernels.cpp runs it
 * on the CPU against the CPU backend's bits). A block owns one vocabulary row v and up to
 * MP_EMB_TILE of its columns (MP_EMB_COLS per thread, accumulated in FP32 registers that start at
 * dtable's old value when accumulating, else 0); it scans all R ids in chunks of one per thread,
 * gathers the chunk's rows with id v in increasing order in shared memory (a ballot per warp,
 * warps in order), and every thread adds those rows of dy to its columns in that order, the
 * loads of MP_EMB_AHEAD rows issued before their adds (a frequent id, a space in text, has tens
 * of rows a chunk, each a dependent load before): the CPU's increasing-r sums, bit for bit. An
 * id that is not an integer in [0, V) matches no row. The scan costs O(V R) id loads per call. */
#ifndef MP_BACKEND_CUDA_EMBEDDING_KERNELS_CUH
#define MP_BACKEND_CUDA_EMBEDDING_KERNELS_CUH

#include "engine/cast_rule.h"

enum {
    MP_EMB_THREADS = 256,
    MP_EMB_COLS = 8,
    MP_EMB_TILE = MP_EMB_THREADS * MP_EMB_COLS,
    MP_EMB_WARPS = MP_EMB_THREADS / 32,
    MP_EMB_MAX_GRID = 65535,
    MP_EMB_AHEAD = 8,
    /* dynamic shared memory: the chunk's matching rows, then each warp's count */
    MP_EMB_SMEM = MP_EMB_THREADS * sizeof(int64_t) + MP_EMB_WARPS * sizeof(int)
};

/* Whether element r of ids (dtype it) is the id v (an integer in [0, V) equal to v). */
__device__ static bool id_is(const void *ids, mp_dtype it, int64_t r, int64_t v)
{
    return (double)mp_elem_load_f32(ids, it, r) == (double)v;
}

/* Units u of work: vocabulary row u / tiles, columns from (u % tiles) MP_EMB_TILE. Blocks of
 * MP_EMB_THREADS threads, MP_EMB_SMEM bytes of dynamic shared memory. */
__global__ static void k_emb_bwd(const void *ids, mp_dtype it, const void *dy, mp_dtype dyt,
                                 bool accumulate, void *dt, mp_dtype dtt, int64_t R, int64_t V,
                                 int64_t D, int64_t tiles)
{
    extern __shared__ __align__(16) unsigned char smem[];
    int64_t *hit = (int64_t *)smem;
    int *wcount = (int *)(hit + MP_EMB_THREADS);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int64_t u = blockIdx.x; u < V * tiles; u += gridDim.x) {
        int64_t v = u / tiles, d0 = (u % tiles) * MP_EMB_TILE + threadIdx.x;
        float acc[MP_EMB_COLS];
        for (int k = 0; k < MP_EMB_COLS; k++) {
            int64_t d = d0 + k * MP_EMB_THREADS;
            acc[k] = accumulate && d < D ? mp_elem_load_f32(dt, dtt, v * D + d) : 0.0f;
        }
        for (int64_t r0 = 0; r0 < R; r0 += MP_EMB_THREADS) {
            int64_t r = r0 + threadIdx.x;
            bool match = r < R && id_is(ids, it, r, v);
            unsigned ballot = __ballot_sync(0xffffffffu, match);
            __syncthreads(); /* the previous chunk's readers are done with hit and wcount */
            if (lane == 0)
                wcount[warp] = __popc(ballot);
            __syncthreads();
            int off = 0, n = 0;
            for (int w = 0; w < MP_EMB_WARPS; w++) {
                off += w < warp ? wcount[w] : 0;
                n += wcount[w];
            }
            if (match)
                hit[off + __popc(ballot & ((1u << lane) - 1u))] = r;
            __syncthreads();
            for (int h0 = 0; h0 < n; h0 += MP_EMB_AHEAD) {
                const int hn = n - h0 < MP_EMB_AHEAD ? n - h0 : MP_EMB_AHEAD;
#pragma unroll
                for (int k = 0; k < MP_EMB_COLS; k++) {
                    const int64_t d = d0 + k * MP_EMB_THREADS;
                    float got[MP_EMB_AHEAD];
#pragma unroll
                    for (int q = 0; q < MP_EMB_AHEAD; q++)
                        got[q] = q < hn && d < D ? mp_elem_load_f32(dy, dyt, hit[h0 + q] * D + d)
                                                 : 0.0f;
#pragma unroll
                    for (int q = 0; q < MP_EMB_AHEAD; q++)
                        if (q < hn && d < D)
                            acc[k] += got[q];
                }
            }
        }
        for (int k = 0; k < MP_EMB_COLS; k++) {
            int64_t d = d0 + k * MP_EMB_THREADS;
            if (d < D)
                mp_elem_store_f32(dt, dtt, v * D + d, acc[k]);
        }
    }
}

#endif
