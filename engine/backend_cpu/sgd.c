/* SGD on the CPU with torch.optim.SGD's semantics: weight decay added to the gradient, a
 * momentum buffer initialised to the first gradient, dampening, Nesterov. One pass over the
 * flat buffers, arithmetic in the parameter's precision (FP32 masters, FP64 in tests). */
#include "engine/backend_cpu/cpu.h"

#define SGD(T, ACC, LD, ST, a, p, g, buf, n)                                           \
    do {                                                                               \
        T *pp = (p)->data, *bb = (buf) ? (T *)(buf)->data : NULL;                      \
        const T *gg = (g)->data;                                                       \
        ACC lr = (ACC)(a)->lr, mom = (ACC)(a)->momentum, wd = (ACC)(a)->weight_decay;  \
        ACC damp = (ACC)1 - (ACC)(a)->dampening;                                       \
        for (int64_t i = 0; i < (n); i++) {                                            \
            ACC w = LD(pp[i]);                                                         \
            ACC d = LD(gg[i]) + wd * w;                                                \
            if (bb) {                                                                  \
                ACC m = (a)->first_step ? d : mom * LD(bb[i]) + damp * d;              \
                bb[i] = ST(m);                                                         \
                d = (a)->nesterov ? d + mom * m : m;                                   \
            }                                                                          \
            pp[i] = ST(w - lr * d);                                                    \
        }                                                                              \
    } while (0)

mp_status mp_cpu_sgd_step(const mp_sgd_args *args, mp_tensor *param, const mp_tensor *grad,
                          mp_tensor *momentum)
{
    int64_t n = mp_tensor_numel(param);
    MP_CPU_REQUIRE(mp_tensor_numel(grad) == n && grad->dtype == param->dtype, "sgd_step");
    MP_CPU_REQUIRE(param->dtype == MP_F32 || param->dtype == MP_F64, "sgd_step");
    mp_tensor *buf = args->momentum != 0.0 ? momentum : NULL;
    MP_CPU_REQUIRE(args->momentum == 0.0 || buf, "sgd_step");
    MP_CPU_REQUIRE(!buf || (mp_tensor_numel(buf) == n && buf->dtype == param->dtype), "sgd_step");
    MP_CPU_DISPATCH(param->dtype, SGD, args, param, grad, buf, n);
    return MP_OK;
}
