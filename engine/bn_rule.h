/* The order in which batch normalisation sums its M rows per channel, written once for every
 * backend so that the CPU and the GPU add the same values in the same order and their
 * statistics and gradients are the same bits (neither contracts a * b + c into an FMA):
 * the rows are cut into chunks (mp_bn_chunks); within a chunk, lane q (0 .. MP_BN_LANES - 1)
 * adds rows q, q + MP_BN_LANES, ... of the chunk in row order, starting from 0; a chunk's sum is
 * 0 + lane 0 + lane 1 + ... in lane order; the channel's sum is 0 + chunk 0 + chunk 1 + ... in
 * chunk order. The layout depends on M alone, never on the threads. Each lane adds about
 * M / (MP_BN_LANES chunks) terms, so the rounding error grows with that plus the lanes and
 * chunks, not with M (a sequential sum's). */
#ifndef MP_BN_RULE_H
#define MP_BN_RULE_H

#include <stdint.h>

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

#endif
