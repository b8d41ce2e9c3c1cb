/* The dropout mask, written once for every backend (MP_HD): element i of a tensor is kept when
 * a counter-based hash of (seed, offset + i) says so, so the same (seed, offset) gives the same
 * mask on the CPU and the GPU and backward recomputes it instead of storing it:
 *   key  = mix64(seed + 0x9e3779b97f4a7c15)
 *   bits = mix64(key ^ (counter * 0x9e3779b97f4a7c15))
 *   keep = (bits >> 32) >= ceil(p * 2^32)      (a uniform u = (bits >> 32) / 2^32 >= p)
 * where mix64 is splitmix64's finaliser. The comparison is on integers, so no backend's float
 * rounding of p can flip an element. */
#ifndef MP_DROPOUT_MASK_H
#define MP_DROPOUT_MASK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/hd.h"

#define MP_GOLDEN 0x9e3779b97f4a7c15ull

MP_HD static inline uint64_t mp_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The key of a seed. */
MP_HD static inline uint64_t mp_dropout_key(uint64_t seed) { return mp_mix64(seed + MP_GOLDEN); }

/* The integer threshold of probability p in [0, 1). */
MP_HD static inline uint64_t mp_dropout_threshold(double p)
{
    return (uint64_t)ceil(p * 4294967296.0);
}

/* Each training step draws its masks from its own range of 2^32 counters: a layer's offset is
 * step * MP_MASK_STEP_STRIDE (dropout layers and attention alike). */
#define MP_MASK_STEP_STRIDE ((uint64_t)1 << 32)

/* The counter offset of an op given `offset` and `step` (NULL: none): offset, plus
 * *step * MP_MASK_STEP_STRIDE read where and when the op runs (on the GPU, in the kernel), so
 * that a replayed graph draws the masks of the step whose index is in that memory now (the
 * amp_step_values op writes it before each step, or micro-batch with accumulation). */
MP_HD static inline uint64_t mp_mask_offset(uint64_t offset, const int64_t *step)
{
    return step ? offset + (uint64_t)*step * MP_MASK_STEP_STRIDE : offset;
}

/* Whether the element at `counter` (offset + i) is kept. */
MP_HD static inline bool mp_dropout_keep(uint64_t key, uint64_t counter, uint64_t thr)
{
    return (mp_mix64(key ^ (counter * MP_GOLDEN)) >> 32) >= thr;
}

#endif
