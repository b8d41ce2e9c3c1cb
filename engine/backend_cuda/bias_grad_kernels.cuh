/* bias_grad's kernels (engine/backend_cuda/elementwise.cu launches them): db, the column sums of
 * dy (rows, cols), in two deterministic passes whose layout depends on the shape alone. The rows
 * are cut into bg_chunks(rows) chunks of consecutive rows; in k_bias_part a block of 32 x 8
 * threads owns 32 columns of one chunk, thread row y adds rows y, y + 8, ... of the chunk in
 * order (its loads issued ahead of the adds), and the 8 sums of a column are added in order in
 * shared memory into part[chunk cols + j]; k_bias_sum adds a column's chunk sums in chunk order
 * and rounds once to db's dtype. One thread walked all the rows of its column before (4096 rows
 * of gpt's linears: 512 dependent loads a thread on 4 blocks). The order is this kernel's own,
 * not the CPU's; every addition is engine/elem_rule.h's mp_add_f32. The header builds without
 * the CUDA runtime's headers (tests/emu/test_bias_grad_kernels.cpp runs it on the CPU). */
#ifndef MP_BACKEND_CUDA_BIAS_GRAD_KERNELS_CUH
#define MP_BACKEND_CUDA_BIAS_GRAD_KERNELS_CUH

#include "engine/backend_cuda/grid.cuh"
#include "engine/elem_rule.h"

/* Rows a chunk at least, and chunks at most (longer chunks past BG_ROWS * BG_MAX_CHUNKS rows). */
enum { BG_ROWS = 64, BG_MAX_CHUNKS = 1024 };

/* The chunks of `rows` rows (0 for none), *per rows each but the last. */
static inline int64_t bg_chunks(int64_t rows, int64_t *per)
{
    int64_t n = (rows + BG_ROWS - 1) / BG_ROWS;
    n = n < (int64_t)BG_MAX_CHUNKS ? n : (int64_t)BG_MAX_CHUNKS;
    *per = n ? (rows + n - 1) / n : 0;
    return n ? (rows + *per - 1) / *per : 0;
}

/* Shared memory of k_bias_part: the 8 row lanes' sums of 32 columns (a column of padding). */
enum { BG_SMEM = 8 * 33 * sizeof(float) };

/* Chunk blockIdx.y's sum of columns blockIdx.x 32 + threadIdx.x (blocks of 32 x 8, BG_SMEM bytes
 * of dynamic shared memory) into part[chunk cols + j]. */
__global__ static void k_bias_part(const void *dy, mp_dtype dt, int64_t rows, int64_t cols,
                                   int64_t per, float *part)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float(*lanes)[33] = (float(*)[33])smem;
    const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x, r0 = (int64_t)blockIdx.y * per;
    const int64_t r1 = r0 + per < rows ? r0 + per : rows;
    float s = 0.0f;
    if (j < cols) {
#pragma unroll 4
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 8)
            s = mp_add_f32(s, mp_elem_load_f32(dy, dt, r * cols + j));
    }
    lanes[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        float t = 0.0f;
        for (int q = 0; q < 8; q++)
            t = mp_add_f32(t, lanes[q][threadIdx.x]);
        part[blockIdx.y * cols + j] = t;
    }
}

/* db[j] = the chunks' sums of column j in chunk order, rounded to db's dtype bt. */
__global__ static void k_bias_sum(const float *part, int64_t chunks, int64_t cols, void *db,
                                  mp_dtype bt)
{
    MP_CUDA_FOR(j, cols)
    {
        float t = 0.0f;
#pragma unroll 8
        for (int64_t c = 0; c < chunks; c++)
            t = mp_add_f32(t, part[c * cols + j]);
        mp_elem_store_f32(db, bt, j, t);
    }
}

#endif
