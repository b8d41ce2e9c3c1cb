/* Softmax cross-entropy per row, written once for every backend (MP_HD), in the accumulator type
 * (FP32 for FP32 and half logits, FP64 for FP64; suffix f32 / f64). The exponentials are
 * engine/exp_rule.h's (FP32: mp_exp_f32, within 1 ulp, the same bits on every backend and a
 * loop that vectorises; FP64: the C library's exp), their arguments never positive; the row's
 * log is taken in double and rounded to the accumulator type. A row is worked by one thread
 * (the CPU: columns 0, 1, 2, ...) or shared by several (the GPU: a warp, each lane over columns
 * lane, lane + 32, ...): each thread scans its columns with the rules here, and a parallel
 * backend combines the threads' arg-max with the same order (mp_xent_before_SFX) and adds their
 * sums, so the arg-max is the CPU's exactly and the sums may differ in their last bits. Per row:
 *   arg-max: the first maximum, a NaN above every number (a row with a NaN picks its first
 *     NaN, as max pooling's windows do);
 *   lse = mx + log(sum_j exp(x_j - mx));
 *   loss = (1 - eps) (lse - x_y) + eps (lse - sum_j x_j / C)   (label smoothing eps);
 *   dx_j = (exp(x_j - lse) - ((j == y) (1 - eps) + eps / C)) g, g = grad_scale * scale / N;
 *   a label outside [0, C) gives the row a zero gradient: the CPU refuses such labels at once,
 *     the GPU cannot without waiting, so it zeroes the row and marks the step overflowed
 *     (mp_xent_bad_label) so that it is skipped, and reports the count at its next result. */
#ifndef MP_XENT_RULE_H
#define MP_XENT_RULE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/amp_state.h"
#include "engine/cast_rule.h"
#include "engine/exp_rule.h"
#include "engine/hd.h"

/* One thread's part of row r: the columns j0, j0 + step, ... below C of logits x (N, C) and of
 * their gradient dx (NULL: none), both of dtype dt; base = r C. */
typedef struct mp_xent_span {
    const void *x;
    void *dx;
    mp_dtype dt;
    int64_t base, j0, step;
} mp_xent_span;

/* Whether label y is a class of C. */
MP_HD static inline bool mp_xent_label_ok(int32_t y, int64_t cols) { return y >= 0 && y < cols; }

/* The gradient factor g: grad_scale times the loss scale read from st (NULL: 1), over N rows. */
MP_HD static inline double mp_xent_grad_factor(double grad_scale, const mp_amp_state *st,
                                               int64_t rows)
{
    return (st ? grad_scale * st->scaler.scale : grad_scale) / (double)rows;
}

/* A row whose label is outside [0, C) on a backend that cannot refuse it at once: marks the
 * step overflowed in st (when given) so that the optimizer skips it, and the state's sticky
 * bad_labels so that the host ends the run at its next host point. */
MP_HD static inline void mp_xent_bad_label(mp_amp_state *st)
{
    if (st) {
        st->found_inf = 1.0;
        st->bad_labels = 1.0;
    }
}

/* Defines, for accumulator type ACC with exponential EXP:
 *   mp_xent_coef_SFX: the op's constants (eps, 1 - eps, eps / C, g, C) and
 *     mp_xent_coef_SFX_make(eps, g, cols);
 *   mp_xent_before_SFX(v, j, mx, best): whether element (v, j) comes before the arg-max so far
 *     (mx, best): a NaN before any number, then the larger value, then the smaller index. The
 *     start (-INFINITY, C) comes after every element;
 *   mp_xent_max_SFX(s, c, mx, best): scans the span into the arg-max (*mx, *best);
 *   mp_xent_sums_SFX(s, c, mx, sum, zsum): adds exp(x_j - mx) to *sum and x_j to *zsum;
 *   mp_xent_lse_SFX(mx, sum), mp_xent_loss_SFX(c, lse, xy, zsum): the row's log-sum-exp and
 *     loss (xy: the label's logit);
 *   mp_xent_grad_SFX(c, s, lse, y): writes the span's gradient, zero for a label outside [0, C). */
#define MP_XENT_RULES(ACC, SFX, EXP)                                                        \
    typedef struct mp_xent_coef_##SFX {                                                     \
        ACC eps, on, off, g;                                                                \
        int64_t cols;                                                                       \
    } mp_xent_coef_##SFX;                                                                   \
                                                                                            \
    MP_HD static inline mp_xent_coef_##SFX mp_xent_coef_##SFX##_make(double eps, double g,  \
                                                                     int64_t cols)          \
    {                                                                                       \
        mp_xent_coef_##SFX c;                                                               \
        c.eps = (ACC)eps;                                                                   \
        c.on = (ACC)1 - c.eps;                                                              \
        c.off = c.eps / (ACC)cols;                                                          \
        c.g = (ACC)g;                                                                       \
        c.cols = cols;                                                                      \
        return c;                                                                           \
    }                                                                                       \
                                                                                            \
    MP_HD static inline bool mp_xent_before_##SFX(ACC v, int64_t j, ACC mx, int64_t best)   \
    {                                                                                       \
        bool vn = isnan(v), mn = isnan(mx);                                                 \
        if (vn || mn)                                                                       \
            return vn && (!mn || j < best);                                                 \
        return v > mx || (v == mx && j < best);                                             \
    }                                                                                       \
                                                                                            \
    MP_HD_INLINE static inline void mp_xent_max_##SFX(const mp_xent_span *s,                \
                                                      const mp_xent_coef_##SFX *c, ACC *mx, \
                                                      int64_t *best)                        \
    {                                                                                       \
        for (int64_t j = s->j0; j < c->cols; j += s->step) {                                \
            ACC v = mp_elem_load_##SFX(s->x, s->dt, s->base + j);                           \
            if (mp_xent_before_##SFX(v, j, *mx, *best)) {                                   \
                *mx = v;                                                                    \
                *best = j;                                                                  \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MP_HD_INLINE static inline void mp_xent_sums_##SFX(const mp_xent_span *s,               \
                                                       const mp_xent_coef_##SFX *c, ACC mx, \
                                                       ACC *sum, ACC *zsum)                 \
    {                                                                                       \
        for (int64_t j = s->j0; j < c->cols; j += s->step) {                                \
            ACC v = mp_elem_load_##SFX(s->x, s->dt, s->base + j);                           \
            *sum += EXP(v - mx);                                                            \
            *zsum += v;                                                                     \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MP_HD static inline ACC mp_xent_lse_##SFX(ACC mx, ACC sum)                              \
    {                                                                                       \
        return mx + (ACC)log((double)sum);                                                  \
    }                                                                                       \
                                                                                            \
    MP_HD static inline ACC mp_xent_loss_##SFX(const mp_xent_coef_##SFX *c, ACC lse, ACC xy, \
                                               ACC zsum)                                    \
    {                                                                                       \
        return c->on * (lse - xy) + c->eps * (lse - zsum / (ACC)c->cols);                   \
    }                                                                                       \
                                                                                            \
    MP_HD_INLINE static inline void mp_xent_grad_##SFX(const mp_xent_coef_##SFX *c,         \
                                                       const mp_xent_span *s, ACC lse,      \
                                                       int32_t y)                           \
    {                                                                                       \
        if (!mp_xent_label_ok(y, c->cols)) {                                                \
            for (int64_t j = s->j0; j < c->cols; j += s->step)                              \
                mp_elem_store_##SFX(s->dx, s->dt, s->base + j, (ACC)0);                     \
            return;                                                                         \
        }                                                                                   \
        for (int64_t j = s->j0; j < c->cols; j += s->step) {                                \
            ACC v = mp_elem_load_##SFX(s->x, s->dt, s->base + j);                           \
            ACC p = EXP(v - lse);                                                           \
            ACC d = (p - (j == y ? c->on + c->off : c->off)) * c->g;                        \
            mp_elem_store_##SFX(s->dx, s->dt, s->base + j, d);                              \
        }                                                                                   \
    }

MP_XENT_RULES(float, f32, mp_exp_f32)
MP_XENT_RULES(double, f64, mp_exp_f64)

#endif
