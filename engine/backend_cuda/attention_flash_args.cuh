/* What the GPU's tiled attention kernels take from their call (attention_flash.cu,
 * attention_mma_kernels.cuh): the arguments and the dropout multiplier. Device code without the
 * CUDA headers, so that tests/emu can build the kernels on the CPU. */
#ifndef MP_ATTENTION_FLASH_ARGS_CUH
#define MP_ATTENTION_FLASH_ARGS_CUH

#include <stdbool.h>
#include <stdint.h>

#include "engine/attn_flash.h"
#include "engine/dropout_mask.h"

/* What the kernels need of the call. */
typedef struct flash_args {
    int64_t N, T, D, heads, dh;
    bool causal, drop;
    uint64_t key, thr, offset;
    const int64_t *step;     /* device memory: each kernel starts with offset =
                                mp_mask_offset(offset, step), read once */
    float scale, keep_scale; /* 1 / sqrt(dh), 1 / (1 - p) */
    mp_dtype w, sdt, odt;    /* qkv's, stats', out's (backward: dqkv's) dtypes */
    mp_dtype dodt, outdt;    /* backward: dout's and out's dtypes */
} flash_args;

/* The dropout multiplier of probability (n, h, i, j): 1 without dropout, else 0 or
 * 1 / (1 - p) by engine/dropout_mask.h at mp_attn_counter. */
__device__ static inline float drop_mult(const flash_args &a, int64_t n, int64_t h, int64_t i,
                                         int64_t j)
{
    if (!a.drop)
        return 1.0f;
    uint64_t c = mp_attn_counter(a.offset, a.heads, a.T, n, h, i, j);
    return mp_dropout_keep(a.key, c, a.thr) ? a.keep_scale : 0.0f;
}

#endif
