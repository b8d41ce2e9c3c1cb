/* Optimizer steps on the CPU: SGD, Adam and AdamW with torch.optim's semantics in one pass over
 * flat buffers that unscales the gradient, updates the parameter (FP32 masters, or the half
 * model itself at O3, in FP32 arithmetic) and writes the rounded half copy; and the gradient
 * statistics pass (sum of squares, non-finite flag) behind the overflow check and clipping.
 * Both go block by block: half (or other non-accumulator) operands are widened with one bulk
 * mp_convert per block into a stack buffer of the accumulator type, and results are rounded
 * back with one bulk mp_convert, which gives the same bits as rounding element by element. */
#include <math.h>

#include "engine/backend_cpu/cpu.h"

enum { MP_OPTIM_BLOCK = 1024 };

/* The dtype of accumulator type ACC (float or double). */
#define ACC_DTYPE(ACC) (sizeof(ACC) == sizeof(double) ? MP_F64 : MP_F32)

/* Element `off` of tensor t's storage, whatever its dtype. */
static void *at(const mp_tensor *t, int64_t off)
{
    return (char *)t->data + (size_t)off * mp_dtype_size(t->dtype);
}

/* A view of elements [off, off + len) of t as `adt`: t's own storage when it already has that
 * dtype, else buf filled by widening them. */
static void *load_block(const mp_tensor *t, int64_t off, size_t len, mp_dtype adt, void *buf)
{
    if (t->dtype == adt)
        return at(t, off);
    mp_convert(buf, adt, at(t, off), t->dtype, len);
    return buf;
}

#define OPTIM(T, ACC, LD, ST, a, p, copy, g, s1, s2, n)                                      \
    do {                                                                                     \
        ACC wbuf[MP_OPTIM_BLOCK], gbuf[MP_OPTIM_BLOCK];                                      \
        const mp_dtype adt = ACC_DTYPE(ACC);                                                 \
        ACC lr = (ACC)(a)->lr, wd = (ACC)(a)->weight_decay, gs = (ACC)(a)->grad_scale;       \
        ACC mom = (ACC)(a)->momentum, damp = (ACC)1 - (ACC)(a)->dampening;                   \
        ACC b1 = (ACC)(a)->beta1, b2 = (ACC)(a)->beta2, eps = (ACC)(a)->eps;                 \
        ACC bc1 = (ACC)1 - (ACC)pow((a)->beta1, (double)(a)->step);                          \
        ACC bc2 = (ACC)sqrt(1.0 - pow((a)->beta2, (double)(a)->step));                       \
        (void)sizeof(T);                                                                     \
        (void)LD;                                                                            \
        (void)ST;                                                                            \
        for (int64_t o = 0; o < (n); o += MP_OPTIM_BLOCK) {                                  \
            size_t len = (size_t)((n) - o < MP_OPTIM_BLOCK ? (n) - o : MP_OPTIM_BLOCK);       \
            ACC *w = load_block(p, o, len, adt, wbuf);                                       \
            const ACC *gv = load_block(g, o, len, adt, gbuf);                                \
            ACC *m1 = (s1) ? (ACC *)(s1)->data + o : NULL;                                   \
            ACC *m2 = (s2) ? (ACC *)(s2)->data + o : NULL;                                   \
            for (size_t i = 0; i < len; i++) {                                               \
                ACC wi = w[i];                                                               \
                ACC d = gv[i] * gs;                                                          \
                if ((a)->kind == MP_OPTIM_SGD) {                                             \
                    d += wd * wi;                                                            \
                    if (m1) {                                                                \
                        ACC m = (a)->step == 1 ? d : mom * m1[i] + damp * d;                 \
                        m1[i] = m;                                                           \
                        d = (a)->nesterov ? d + mom * m : m;                                 \
                    }                                                                        \
                    wi -= lr * d;                                                            \
                } else {                                                                     \
                    if ((a)->kind == MP_OPTIM_ADAMW)                                         \
                        wi -= lr * wd * wi;                                                  \
                    else                                                                     \
                        d += wd * wi;                                                        \
                    ACC m = b1 * m1[i] + ((ACC)1 - b1) * d;                                  \
                    ACC v = b2 * m2[i] + ((ACC)1 - b2) * d * d;                              \
                    m1[i] = m;                                                               \
                    m2[i] = v;                                                               \
                    wi -= (lr / bc1) * m / ((ACC)sqrt((double)v) / bc2 + eps);               \
                }                                                                            \
                w[i] = wi;                                                                   \
            }                                                                                \
            if (w == wbuf)                                                                   \
                mp_convert(at(p, o), (p)->dtype, wbuf, adt, len);                            \
            if (copy)                                                                        \
                mp_convert(at(copy, o), (copy)->dtype, w, adt, len);                         \
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
    do {                                                                                 \
        ACC gbuf[MP_OPTIM_BLOCK];                                                        \
        ACC sc = (ACC)(scale);                                                           \
        double s = 0;                                                                    \
        bool nf = false;                                                                 \
        (void)sizeof(T);                                                                 \
        (void)LD;                                                                        \
        (void)ST;                                                                        \
        for (int64_t o = 0; o < (n); o += MP_OPTIM_BLOCK) {                              \
            size_t len = (size_t)((n) - o < MP_OPTIM_BLOCK ? (n) - o : MP_OPTIM_BLOCK);   \
            const ACC *gv = load_block(g, o, len, ACC_DTYPE(ACC), gbuf);                 \
            for (size_t i = 0; i < len; i++) {                                           \
                ACC v = gv[i] * sc;                                                      \
                nf |= !isfinite(v);                                                      \
                s += (double)v * (double)v;                                              \
            }                                                                            \
        }                                                                                \
        *(sumsq) += s;                                                                   \
        *(bad) = *(bad) || nf;                                                           \
    } while (0)

mp_status mp_cpu_grad_stats(const mp_tensor *grad, double scale, double *sumsq, bool *nonfinite)
{
    int64_t n = mp_tensor_numel(grad);
    MP_CPU_DISPATCH(grad->dtype, GRAD_STATS, grad, scale, sumsq, nonfinite, n);
    return MP_OK;
}
