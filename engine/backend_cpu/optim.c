/* Optimizer steps on the CPU: SGD, Adam and AdamW with torch.optim's semantics in one pass over
 * flat buffers that unscales the gradient, updates the parameter (FP32 masters, or the half
 * model itself at O3, in FP32 arithmetic) and writes the rounded half copy; and the gradient
 * statistics pass (sum of squares, non-finite flag) behind the overflow check and clipping.
 * Both go block by block in the accumulator type ACC (FP32, FP64 for FP64 parameters): half
 * or other operands are widened with one bulk mp_convert per block into a stack buffer and
 * results rounded back with one bulk mp_convert, which gives the same bits as converting
 * element by element. The update loops run in groups of 8 that the compiler vectorises; every
 * element sees the same operations in the same order either way. The update's blocks spread
 * over the threads (each element's arithmetic is its own); the statistics pass, a sum, runs on
 * one thread: element e adds to partial sum e mod 8 (in element order), and the 8 partials are
 * added pairwise ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)), the same order at every thread
 * count; the 8 partials, held as arrays, let the compiler run the lanes as one vector. */
#include <math.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/parallel.h"
#include "engine/vector_clones.h"
#include "engine/check_rule.h"
#include "engine/optim_rule.h"

/* MP_CHECK_LANES: the statistics pass's partial sums, element e into e % MP_CHECK_LANES (see the
 * file comment). */
enum { MP_OPTIM_BLOCK = 1024, MP_CHECK_LANES = 8 };

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

/* Runs the statement after (i, len) for i in [0, len): in groups of 8 (a loop of known trip
 * count, which -O2 vectorises), then the rest. */
#define FOR_GROUPS_OF_8(i, len, ...)                                                         \
    do {                                                                                     \
        size_t g8_ = 0;                                                                      \
        for (; g8_ + 8 <= (len); g8_ += 8)                                                   \
            for (size_t i = g8_; i < g8_ + 8; i++)                                           \
                __VA_ARGS__                                                                  \
        for (size_t i = g8_; i < (len); i++)                                                 \
            __VA_ARGS__                                                                      \
    } while (0)

/* SGD with momentum over a block (inside update_SFX), for constant FIRST (step 1: the buffer
 * starts as the gradient) and NESTEROV, so that the loop has no branches and vectorises. */
#define SGD_MOMENTUM(SFX, FIRST, NESTEROV)                                                   \
    FOR_GROUPS_OF_8(i, len, { mp_sgd_##SFX(&k, &w[i], g[i], &m1[i], FIRST, NESTEROV); })

/* Defines, for accumulator type ACC of dtype ADT:
 *   update_SFX: one optimizer step over a block with the element rules of engine/optim_rule.h:
 *     w (param), g (unscaled-to-be gradient) and the optimizer state m1, m2 (NULL when
 *     unused), none overlapping;
 *   optim_SFX: the whole step, block by block, with conversions and the half copy;
 *   grad_stats_SFX: the statistics pass. */
#define MP_OPTIM_KERNELS(ACC, ADT, SFX)                                                      \
    MP_VECTOR_CLONES                                                                         \
    static void update_##SFX(const mp_optim_coef_##SFX *c, bool adam, ACC *restrict w,       \
                             const ACC *restrict g, ACC *restrict m1, ACC *restrict m2,      \
                             size_t len)                                                     \
    {                                                                                        \
        const mp_optim_coef_##SFX k = *c; /* a local copy: no store can alias it */          \
        if (adam && k.decoupled) {                                                           \
            FOR_GROUPS_OF_8(i, len, { mp_adam_##SFX(&k, &w[i], g[i], &m1[i], &m2[i], true); });  \
        } else if (adam) {                                                                   \
            FOR_GROUPS_OF_8(i, len, { mp_adam_##SFX(&k, &w[i], g[i], &m1[i], &m2[i], false); }); \
        } else if (!m1) {                                                                    \
            FOR_GROUPS_OF_8(i, len, { mp_sgd_##SFX(&k, &w[i], g[i], NULL, false, false); }); \
        } else if (k.first && k.nesterov) {                                                  \
            SGD_MOMENTUM(SFX, true, true);                                                   \
        } else if (k.first) {                                                                \
            SGD_MOMENTUM(SFX, true, false);                                                  \
        } else if (k.nesterov) {                                                             \
            SGD_MOMENTUM(SFX, false, true);                                                  \
        } else {                                                                             \
            SGD_MOMENTUM(SFX, false, false);                                                 \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    MP_VECTOR_CLONES                                                                         \
    static void optim_##SFX(const mp_optim_args *a, const mp_amp_state *st, mp_tensor *p,    \
                            mp_tensor *copy, const mp_tensor *g, mp_tensor *s1,              \
                            mp_tensor *s2, int64_t n)                                        \
    {                                                                                        \
        const mp_optim_coef_##SFX c = mp_optim_coef_##SFX##_make(a, st);                     \
        bool adam = a->kind != MP_OPTIM_SGD;                                                 \
        MP_CPU_PARALLEL_FOR(n)                                                               \
        for (int64_t o = 0; o < n; o += MP_OPTIM_BLOCK) {                                    \
            ACC wbuf[MP_OPTIM_BLOCK], gbuf[MP_OPTIM_BLOCK];                                  \
            size_t len = (size_t)(n - o < MP_OPTIM_BLOCK ? n - o : MP_OPTIM_BLOCK);           \
            ACC *w = load_block(p, o, len, ADT, wbuf);                                       \
            const ACC *gv = load_block(g, o, len, ADT, gbuf);                                \
            update_##SFX(&c, adam, w, gv, s1 ? (ACC *)s1->data + o : NULL,                   \
                         s2 ? (ACC *)s2->data + o : NULL, len);                              \
            if (w == wbuf)                                                                   \
                mp_convert(at(p, o), p->dtype, wbuf, ADT, len);                              \
            if (copy)                                                                        \
                mp_convert(at(copy, o), copy->dtype, w, ADT, len);                           \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    MP_VECTOR_CLONES                                                                         \
    static void grad_stats_##SFX(const mp_tensor *g, double mult, double *sumsq, bool *bad,  \
                                 double *amax, int64_t n)                                    \
    {                                                                                        \
        ACC gbuf[MP_OPTIM_BLOCK], m = (ACC)mult;                                             \
        double sq[MP_CHECK_LANES] = {0}; /* the lanes' partial results, as arrays */          \
        ACC am[MP_CHECK_LANES] = {0};                                                        \
        int nf[MP_CHECK_LANES] = {0};                                                        \
        for (int64_t o = 0; o < n; o += MP_OPTIM_BLOCK) { /* a multiple of the lanes */      \
            size_t len = (size_t)(n - o < MP_OPTIM_BLOCK ? n - o : MP_OPTIM_BLOCK);           \
            const ACC *gv = load_block(g, o, len, ADT, gbuf);                                \
            size_t i = 0;                                                                    \
            for (; i + MP_CHECK_LANES <= len; i += MP_CHECK_LANES)                           \
                for (int j = 0; j < MP_CHECK_LANES; j++)                                     \
                    mp_check_##SFX##_add(&sq[j], &am[j], &nf[j], gv[i + j], m);              \
            for (; i < len; i++)                                                             \
                mp_check_##SFX##_add(&sq[i % MP_CHECK_LANES], &am[i % MP_CHECK_LANES],       \
                                     &nf[i % MP_CHECK_LANES], gv[i], m);                     \
        }                                                                                    \
        for (int w = 1; w < MP_CHECK_LANES; w *= 2) /* pairwise: (0+1)+(2+3), ... */         \
            for (int j = 0; j + w < MP_CHECK_LANES; j += 2 * w) {                            \
                sq[j] += sq[j + w];                                                          \
                am[j] = am[j + w] > am[j] ? am[j + w] : am[j];                               \
                nf[j] |= nf[j + w];                                                          \
            }                                                                                \
        *sumsq += sq[0];                                                                     \
        *bad = *bad || nf[0];                                                                \
        if (amax)                                                                            \
            *amax = (double)am[0];                                                           \
    }

MP_OPTIM_KERNELS(float, MP_F32, f32)
MP_OPTIM_KERNELS(double, MP_F64, f64)

/* Optimizer state (slot1, slot2) is FP32 for FP32 and half parameters, FP64 for FP64: the
 * accumulator type, as in MP_CPU_DISPATCH. */
mp_status mp_cpu_optim_step(const mp_optim_args *args, const mp_amp_state *st, mp_tensor *param,
                            mp_tensor *copy, const mp_tensor *grad, mp_tensor *slot1,
                            mp_tensor *slot2)
{
    int64_t n = mp_tensor_numel(param);
    bool adam = args->kind != MP_OPTIM_SGD;
    MP_CPU_REQUIRE(mp_tensor_numel(grad) == n && (!copy || mp_tensor_numel(copy) == n),
                   "optim_step");
    MP_CPU_REQUIRE(st || args->step >= 1, "optim_step");
    mp_tensor *s1 = (adam || args->momentum != 0.0) ? slot1 : NULL, *s2 = adam ? slot2 : NULL;
    MP_CPU_REQUIRE((s1 != NULL) == (adam || args->momentum != 0.0) && (s2 != NULL) == adam,
                   "optim_step");
    mp_dtype state = param->dtype == MP_F64 ? MP_F64 : MP_F32;
    MP_CPU_REQUIRE(!s1 || (mp_tensor_numel(s1) == n && s1->dtype == state), "optim_step");
    MP_CPU_REQUIRE(!s2 || (mp_tensor_numel(s2) == n && s2->dtype == state), "optim_step");
    if (st && st->found_inf)
        return MP_OK;
    if (state == MP_F64)
        optim_f64(args, st, param, copy, grad, s1, s2, n);
    else
        optim_f32(args, st, param, copy, grad, s1, s2, n);
    return MP_OK;
}

/* The statistics (engine/check_rule.h) are computed in the gradient's accumulator type: FP32 for
 * FP32 and half, FP64 for FP64; *amax (when not NULL) is the largest |element| of grad itself
 * (NaN ignored). */
static mp_status grad_stats(const mp_tensor *grad, double mult, double *sumsq, bool *nonfinite,
                            double *amax)
{
    int64_t n = mp_tensor_numel(grad);
    if (grad->dtype == MP_F64)
        grad_stats_f64(grad, mult, sumsq, nonfinite, amax, n);
    else
        grad_stats_f32(grad, mult, sumsq, nonfinite, amax, n);
    return MP_OK;
}

mp_status mp_cpu_grad_stats(const mp_tensor *grad, double scale, double *sumsq, bool *nonfinite)
{
    mp_cpu_count_read();
    return grad_stats(grad, scale, sumsq, nonfinite, NULL);
}

mp_status mp_cpu_amp_check(const mp_tensor *grad, double mult, double limit, mp_amp_state *st)
{
    bool bad = st->found_inf != 0;
    double amax = 0.0;
    MP_TRY(grad_stats(grad, mp_check_mult(mult, st), &st->sumsq, &bad, &amax));
    st->found_inf = bad ? 1.0 : 0.0;
    double fill = mp_check_fill(amax, limit);
    if (fill > st->fill)
        st->fill = fill;
    return MP_OK;
}

mp_status mp_cpu_amp_revert(const mp_amp_state *st, const mp_tensor *saved, mp_tensor *live)
{
    MP_CPU_REQUIRE(mp_tensor_numel(saved) == mp_tensor_numel(live) &&
                       saved->dtype == live->dtype,
                   "amp_revert");
    if (st->found_inf != 0.0 && saved->data != live->data)
        memcpy(live->data, saved->data, (size_t)mp_tensor_bytes(live));
    return MP_OK;
}

mp_status mp_cpu_amp_step_values(mp_amp_state *st, double lr, int64_t step)
{
    st->lr = lr;
    st->mask_step = step;
    return MP_OK;
}

mp_status mp_cpu_amp_update(const mp_scaler_config *c, mp_amp_state *st)
{
    mp_amp_state_update(st, c);
    return MP_OK;
}
