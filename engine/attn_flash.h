/* The rules of tiled ("flash") attention (engine/op_list.h's attention_flash_forward and
 * attention_flash_backward), written once for every backend: the geometry of the row statistics
 * and the online softmax's steps, so that the CPU and the GPU keep their statistics by the same
 * rules (their tiles and the order of their sums differ, so the last bits may). The forward
 * goes over the keys in tiles, keeping per query row i only its running maximum m_i and its
 * running sum l_i = sum_j e^(S_ij - m_i): a tile of scores s raises m to m' = max(m, max_j s_j),
 * multiplies l and the row's output accumulator by c = e^(m - m') (mp_attn_flash_rescale; c = 0
 * for the first tile, whose m is -inf), adds sum_j e^(s_j - m') to l and P'_j V_j to the
 * accumulator. At the end out_i = acc_i (1 / l_i)
 * and (m_i, l_i) are stored (the stats tensor, 2 numbers per row): the backward recomputes
 * P_ij = e^(S_ij - m_i) (1 / l_i) (mp_attn_flash_p) tile by tile, so no T x T matrix is ever
 * stored. The exponential is engine/exp_rule.h's mp_exp_f32 in FP32. A row that meets an
 * inf or NaN score gets m = NaN, and so a NaN output. */
#ifndef MP_ATTN_FLASH_H
#define MP_ATTN_FLASH_H

#include "engine/attn_geom.h"

/* The widest head (dh = D / heads) the tiled kernels take: the GPU keeps a query row and its
 * accumulator in registers and a key tile in shared memory. */
#define MP_ATTN_FLASH_MAX_DH 128

/* Whether a head of dh columns fits the tiled kernels. */
static inline bool mp_attn_flash_fits(int64_t dh)
{
    return dh >= 1 && dh <= MP_ATTN_FLASH_MAX_DH;
}

/* Whether the GPU runs the tiled ops for qkv of dtype w and heads of dh columns on tensor cores
 * (engine/backend_cuda/attention_mma.cu, on GPUs from sm_80): half qkv and dh of 16, 32, 64 or
 * 128. Those kernels multiply half operands as the (T, T) path's GEMMs do, so they round P' (the
 * probabilities the values are weighed by) and dS to w, and dout of another dtype to w, before
 * their products; the others keep them in FP32. */
static inline bool mp_attn_flash_mma(mp_dtype w, int64_t dh)
{
    return (w == MP_F16 || w == MP_BF16) && (dh == 16 || dh == 32 || dh == 64 || dh == 128);
}

/* mp_attn_geom_of with stats (N, heads, T, 2) and heads of at most MP_ATTN_FLASH_MAX_DH
 * columns. */
static inline bool mp_attn_flash_geometry(const mp_attn_desc *d, const mp_tensor *qkv,
                                          const mp_tensor *stats, const mp_tensor *out,
                                          mp_attn_geom *g)
{
    return mp_attn_geom_of(d, qkv, out, g) && mp_attn_flash_fits(g->dh) &&
           mp_attn_shaped(stats, g->N, g->heads, g->T, 2);
}

/* The statistics' dtype for a working type: FP64 when the op works in FP64, else FP32 (half
 * statistics would move every probability by half's rounding). */
static inline mp_dtype mp_attn_flash_stats_dtype(mp_dtype work)
{
    return work == MP_F64 ? MP_F64 : MP_F32;
}

/* The new running maximum of a row from its old one m and a tile's maximum tile_max: NaN when
 * the tile held an inf or NaN score (bad) or m already is NaN. */
MP_HD static inline float mp_attn_flash_max(float m, float tile_max, bool bad)
{
    return bad || m != m ? (float)NAN : tile_max > m ? tile_max : m;
}

/* The factor c = e^(m - m2) by which a row's sum and accumulator shrink when its maximum rises
 * from m to m2 (0 when m is -inf: nothing was accumulated). */
MP_HD static inline float mp_attn_flash_rescale(float m, float m2)
{
    return m == -INFINITY ? 0.0f : mp_exp_f32(m - m2);
}

/* Probability P_ij = e^(s - m) inv_l from the score s and row i's statistics (inv_l = 1 / l). */
MP_HD static inline float mp_attn_flash_p(float s, float m, float inv_l)
{
    return mp_exp_f32(s - m) * inv_l;
}

/* The columns j0 .. j0 + result - 1 of a key tile [j0, j1) that query row i attends to (<= 0:
 * none): all of them, or under the causal mask those j <= i. */
MP_HD static inline int64_t mp_attn_flash_cols(bool causal, int64_t i, int64_t j0, int64_t j1)
{
    return (causal && i + 1 < j1 ? i + 1 : j1) - j0;
}

#endif
