/* The optimizer's arithmetic, written once for the CPU backend and the CUDA kernels (MP_HD), so
 * that both take the same operations in the same order and FP32 masters come out bitwise equal
 * (CUDA code is compiled without FMA contraction; x86-64 C without FMA instructions).
 * mp_optim_coef_* turns the hyper-parameters (and, on the device path, the mp_amp_state) into
 * per-step constants; mp_optim_elem_* updates one element. */
#ifndef MP_OPTIM_RULE_H
#define MP_OPTIM_RULE_H

#include <math.h>
#include <stdbool.h>

#include "engine/hd.h"
#include "engine/ops.h"

/* x^n for n >= 0 by repeated squaring in double: the same bits on every machine, unlike pow. */
MP_HD static inline double mp_powi(double x, int64_t n)
{
    double r = 1.0;
    while (n > 0) {
        if (n & 1)
            r *= x;
        x *= x;
        n >>= 1;
    }
    return r;
}

/* The gradient multiplier and the 1-based step count of a step: from args alone (st NULL), or
 * args->grad_scale / scale times the clipping coefficient, and st->steps + 1. st->sumsq is that
 * of amp_check with mult = args->grad_scale: the squared norm of the unscaled gradients. */
MP_HD static inline double mp_optim_grad_mult(const mp_optim_args *a, const mp_amp_state *st,
                                              int64_t *step)
{
    if (!st) {
        *step = a->step;
        return a->grad_scale;
    }
    *step = st->steps + 1;
    double inv = a->grad_scale / st->scaler.scale, coef = 1.0;
    if (a->max_norm > 0.0) {
        double norm = sqrt(st->sumsq);
        if (norm > a->max_norm)
            coef = a->max_norm / (norm + 1e-6);
    }
    return inv * coef;
}

/* Defines, for accumulator type ACC:
 *   mp_optim_coef_SFX: the step's constants in ACC;
 *   mp_optim_coef_SFX_make(args, st): them, from the hyper-parameters;
 *   mp_sgd_SFX(c, w, g, m1, FIRST, NESTEROV): SGD on one element, m1 NULL without momentum
 *     (FIRST: step 1, the momentum buffer starts as the gradient);
 *   mp_adam_SFX(c, w, g, m1, m2, decoupled): Adam, or AdamW when decoupled (c->decoupled,
 *     passed apart so that a loop given a constant has no branch and vectorises, as for SGD's
 *     FIRST and NESTEROV). */
#define MP_OPTIM_RULES(ACC, SFX)                                                            \
    typedef struct mp_optim_coef_##SFX {                                                    \
        ACC lr, wd, gs, mom, damp, b1, b2, eps, bc1, bc2;                                   \
        bool first, nesterov, decoupled;                                                    \
    } mp_optim_coef_##SFX;                                                                  \
                                                                                            \
    MP_HD static inline mp_optim_coef_##SFX mp_optim_coef_##SFX##_make(                     \
        const mp_optim_args *a, const mp_amp_state *st)                                     \
    {                                                                                       \
        int64_t step;                                                                       \
        double gs = mp_optim_grad_mult(a, st, &step);                                       \
        mp_optim_coef_##SFX c;                                                              \
        c.lr = (ACC)(a->lr_from_state && st ? st->lr : a->lr);                              \
        c.wd = (ACC)a->weight_decay;                                                        \
        c.gs = (ACC)gs;                                                                     \
        c.mom = (ACC)a->momentum;                                                           \
        c.damp = (ACC)1 - (ACC)a->dampening;                                                \
        c.b1 = (ACC)a->beta1;                                                               \
        c.b2 = (ACC)a->beta2;                                                               \
        c.eps = (ACC)a->eps;                                                                \
        c.bc1 = (ACC)1 - (ACC)mp_powi(a->beta1, step);                                      \
        c.bc2 = (ACC)sqrt(1.0 - mp_powi(a->beta2, step));                                   \
        c.first = step == 1;                                                                \
        c.nesterov = a->nesterov;                                                           \
        c.decoupled = a->kind == MP_OPTIM_ADAMW;                                            \
        return c;                                                                           \
    }                                                                                       \
                                                                                            \
    MP_HD static inline void mp_sgd_##SFX(const mp_optim_coef_##SFX *c, ACC *w, ACC g,      \
                                          ACC *m1, bool first, bool nesterov)               \
    {                                                                                       \
        ACC d = g * c->gs;                                                                  \
        d += c->wd * *w;                                                                    \
        if (m1) {                                                                           \
            ACC m = first ? d : c->mom * *m1 + c->damp * d;                                 \
            *m1 = m;                                                                        \
            d = nesterov ? d + c->mom * m : m;                                              \
        }                                                                                   \
        *w -= c->lr * d;                                                                    \
    }                                                                                       \
                                                                                            \
    MP_HD static inline void mp_adam_##SFX(const mp_optim_coef_##SFX *c, ACC *w, ACC g,     \
                                           ACC *m1, ACC *m2, bool decoupled)                \
    {                                                                                       \
        ACC wi = *w, d = g * c->gs;                                                         \
        if (decoupled)                                                                      \
            wi -= c->lr * c->wd * wi;                                                       \
        else                                                                                \
            d += c->wd * wi;                                                                \
        ACC m = c->b1 * *m1 + ((ACC)1 - c->b1) * d;                                         \
        ACC v = c->b2 * *m2 + ((ACC)1 - c->b2) * d * d;                                     \
        *m1 = m;                                                                            \
        *m2 = v;                                                                            \
        *w = wi - (c->lr / c->bc1) * m / ((ACC)sqrt((double)v) / c->bc2 + c->eps);          \
    }

MP_OPTIM_RULES(float, f32)
MP_OPTIM_RULES(double, f64)

#endif
