/* The order in which batch normalisation sums its M rows per channel, written once for every
 * backend so that the CPU and the GPU add the same values in the same order and their
 * statistics and gradients are the same bits (neither contracts a * b + c into an FMA):
 * the rows are cut into chunks (mp_bn_chunks); within a chunk, lane q (0 .. MP_BN_LANES - 1)
 * adds rows q, q + MP_BN_LANES, ... of the chunk in row order, starting from 0; a chunk's sum is
 * 0 + lane 0 + lane 1 + ... in lane order; the channel's sum is 0 + chunk 0 + chunk 1 + ... in
 * chunk order. The layout depends on M alone, never on the threads. Each lane adds about
 * M / (MP_BN_LANES chunks) terms, so the rounding error grows with that plus the lanes and
 * chunks, not with M (a sequential sum's).
 * The variance is formed chunk by chunk, so that x is read from memory once for both
 * statistics (the chunk's second sweep finds it in cache): chunk k of n_k rows has sum s_k (as
 * above) and mean MP_BN_CHUNK_MEAN(s_k, n_k); q_k is the sum, in the same lane order, of
 * (x - that chunk mean)^2 over its rows; the batch mean is (the channel's sum) / M, and the sum
 * of squared deviations from it is 0 + dev_0 + dev_1 + ... in chunk order, with
 * dev_k = MP_BN_CHUNK_DEV(s_k, q_k, n_k, mean) = q_k + n_k (s_k / n_k - mean)^2 (the parallel
 * variance formula of Chan, Golub and LeVeque: no cancellation, as in a two-pass variance).
 * With one chunk (M <= MP_BN_MIN_ROWS) this is the two-pass variance exactly. */
#ifndef MP_BN_RULE_H
#define MP_BN_RULE_H

#include <stdint.h>

#if defined(__CUDACC__)
#define MP_BN_HD __host__ __device__
#else
#define MP_BN_HD
#endif

enum { MP_BN_LANES = 8, MP_BN_MAX_CHUNKS = 512, MP_BN_MIN_ROWS = 64 };

/* The chunks of M rows: at most MP_BN_MAX_CHUNKS, of *rows rows each (at least MP_BN_MIN_ROWS
 * unless M is smaller; the last may be shorter, never empty). Returns their count (0 when
 * M <= 0). */
static inline int64_t mp_bn_chunks(int64_t M, int64_t *rows)
{
    if (M <= 0) {
        *rows = 0;
        return 0;
    }
    int64_t n = (M + MP_BN_MIN_ROWS - 1) / MP_BN_MIN_ROWS;
    n = n < (int64_t)MP_BN_MAX_CHUNKS ? n : (int64_t)MP_BN_MAX_CHUNKS;
    *rows = (M + n - 1) / n;
    return (M + *rows - 1) / *rows;
}

/* Rows in chunk k (0 <= k < chunks) of M rows cut into chunks of `rows` (mp_bn_chunks). */
static inline MP_BN_HD int64_t mp_bn_chunk_n(int64_t M, int64_t rows, int64_t k)
{
    return ((k + 1) * rows < M ? (k + 1) * rows : M) - k * rows;
}

/* The mean of a chunk of n rows whose sum is s, and its term of the sum of squared deviations
 * from the batch mean `mean` (q: its rows' sum of squared deviations from its own mean), in the
 * accumulator type ACC of the backend (float, or double for FP64 data on the CPU). */
#define MP_BN_CHUNK_MEAN(ACC, s, n) ((s) / (ACC)(n))
#define MP_BN_CHUNK_DEV(ACC, s, q, n, mean)                                                   \
    ((q) + (ACC)(n) * ((MP_BN_CHUNK_MEAN(ACC, s, n) - (mean)) *                                \
                       (MP_BN_CHUNK_MEAN(ACC, s, n) - (mean))))

#endif
