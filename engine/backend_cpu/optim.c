/* Optimizer steps on the CPU: SGD, Adam and AdamW with torch.optim's semantics in one pass over
 * flat buffers that unscales the gradient, updates the parameter (FP32 masters, or the half
 * model itself at O3, in FP32 arithmetic) and writes the rounded half copy; and the gradient
 * statistics pass (sum of squares, non-finite flag) behind the overflow check and clipping. */
#include <math.h>

#include "engine/backend_cpu/cpu.h"

#define OPTIM(T, ACC, LD, ST, a, p, copy, g, s1, s2, n)                                      \
    do {                                                                                     \
        T *pp = (p)->data;                                                                   \
        ACC *m1 = (s1) ? (ACC *)(s1)->data : NULL, *m2 = (s2) ? (ACC *)(s2)->data : NULL;    \
        ACC lr = (ACC)(a)->lr, wd = (ACC)(a)->weight_decay, gs = (ACC)(a)->grad_scale;       \
        ACC mom = (ACC)(a)->momentum, damp = (ACC)1 - (ACC)(a)->dampening;                   \
        ACC b1 = (ACC)(a)->beta1, b2 = (ACC)(a)->beta2, eps = (ACC)(a)->eps;                 \
        ACC bc1 = (ACC)1 - (ACC)pow((a)->beta1, (double)(a)->step);                          \
        ACC bc2 = (ACC)sqrt(1.0 - pow((a)->beta2, (double)(a)->step));                       \
        for (int64_t i = 0; i < (n); i++) {                                                  \
            ACC w = LD(pp[i]);                                                               \
            ACC d = (ACC)mp_load((g)->data, (g)->dtype, (size_t)i) * gs;                     \
            if ((a)->kind == MP_OPTIM_SGD) {                                                 \
                d += wd * w;                                                                 \
                if (m1) {                                                                    \
                    ACC m = (a)->step == 1 ? d : mom * m1[i] + damp * d;                     \
                    m1[i] = m;                                                               \
                    d = (a)->nesterov ? d + mom * m : m;                                     \
                }                                                                            \
                w -= lr * d;                                                                 \
            } else {                                                                         \
                if ((a)->kind == MP_OPTIM_ADAMW)                                             \
                    w -= lr * wd * w;                                                        \
                else                                                                         \
                    d += wd * w;                                                             \
                ACC m = b1 * m1[i] + ((ACC)1 - b1) * d;                                      \
                ACC v = b2 * m2[i] + ((ACC)1 - b2) * d * d;                                  \
                m1[i] = m;                                                                   \
                m2[i] = v;                                                                   \
                w -= (lr / bc1) * m / ((ACC)sqrt((double)v) / bc2 + eps);                    \
            }                                                                                \
            pp[i] = ST(w);                                                                   \
            if (copy)                                                                        \
                mp_store((copy)->data, (copy)->dtype, (size_t)i, (double)w);                 \
        }                                                                                    \
    } while (0)

/* Optimizer state (slot1, slot2) is FP32 for FP32 and half parameters, FP64 for FP64: the
 * accumulator type ACC of MP_CPU_DISPATCH. */
mp_status mp_cpu_optim_step(const mp_optim_args *args, mp_tensor *param, mp_tensor *copy,
                            const mp_tensor *grad, mp_tensor *slot1, mp_tensor *slot2)
{
    int64_t n = mp_tensor_numel(param);
    bool adam = args->kind != MP_OPTIM_SGD;
    MP_CPU_REQUIRE(mp_tensor_numel(grad) == n && (!copy || mp_tensor_numel(copy) == n),
                   "optim_step");
    MP_CPU_REQUIRE(args->step >= 1, "optim_step");
    mp_tensor *s1 = (adam || args->momentum != 0.0) ? slot1 : NULL, *s2 = adam ? slot2 : NULL;
    MP_CPU_REQUIRE((s1 != NULL) == (adam || args->momentum != 0.0) && (s2 != NULL) == adam,
                   "optim_step");
    mp_dtype state = param->dtype == MP_F64 ? MP_F64 : MP_F32;
    MP_CPU_REQUIRE(!s1 || (mp_tensor_numel(s1) == n && s1->dtype == state), "optim_step");
    MP_CPU_REQUIRE(!s2 || (mp_tensor_numel(s2) == n && s2->dtype == state), "optim_step");
    MP_CPU_DISPATCH(param->dtype, OPTIM, args, param, copy, grad, s1, s2, n);
    return MP_OK;
}

#define GRAD_STATS(T, ACC, LD, ST, g, scale, sumsq, bad, n)                              \
    do {                                                                             \
        const T *gg = (g)->data;                                                     \
        ACC sc = (ACC)(scale);                                                       \
        double s = 0;                                                                \
        bool nf = false;                                                             \
        (void)ST;                                                                    \
        for (int64_t i = 0; i < (n); i++) {                                          \
            ACC v = LD(gg[i]) * sc;                                                  \
            nf |= !isfinite(v);                                                      \
            s += (double)v * (double)v;                                              \
        }                                                                            \
        *(sumsq) += s;                                                               \
        *(bad) = *(bad) || nf;                                                       \
    } while (0)

mp_status mp_cpu_grad_stats(const mp_tensor *grad, double scale, double *sumsq, bool *nonfinite)
{
    int64_t n = mp_tensor_numel(grad);
    MP_CPU_DISPATCH(grad->dtype, GRAD_STATS, grad, scale, sumsq, nonfinite, n);
    return MP_OK;
}
