/* Internals shared by the CPU backend's op files: one dispatch macro instantiates a kernel for
 * each storage type with its accumulator, loader and storer, so an op is written once for all
 * dtypes (DESIGN §7). Half types load as float and store rounded to nearest even. */
#ifndef MP_BACKEND_CPU_H
#define MP_BACKEND_CPU_H

#include "engine/dtype.h"
#include "engine/ops.h"

static inline float mp_ld_f32(float v) { return v; }
static inline float mp_st_f32(float v) { return v; }
static inline double mp_ld_f64(double v) { return v; }
static inline double mp_st_f64(double v) { return v; }

/* MP_CPU_DISPATCH(dtype, KERNEL, args...) expands KERNEL(T, ACC, LD, ST, args...) for the
 * storage type T, accumulator ACC, LD: T -> ACC and ST: ACC -> T of `dtype`. */
#define MP_CPU_DISPATCH(dt, KERNEL, ...)                                              \
    switch (dt) {                                                                    \
    case MP_F32: KERNEL(float, float, mp_ld_f32, mp_st_f32, __VA_ARGS__); break;     \
    case MP_F64: KERNEL(double, double, mp_ld_f64, mp_st_f64, __VA_ARGS__); break;   \
    case MP_F16: KERNEL(uint16_t, float, mp_f16_to_f32, mp_f32_to_f16, __VA_ARGS__); break; \
    case MP_BF16: KERNEL(uint16_t, float, mp_bf16_to_f32, mp_f32_to_bf16, __VA_ARGS__); break; \
    }

/* Fails with MP_EINTERNAL naming the op when cond is false. */
#define MP_CPU_REQUIRE(cond, op)                                                        \
    do {                                                                                \
        if (!(cond))                                                                    \
            return mp_fail(MP_EINTERNAL, "cpu %s: shape or dtype mismatch (%s)", op, #cond); \
    } while (0)

void *mp_cpu_mem_alloc(size_t bytes, mp_mem_cat cat);
void mp_cpu_mem_free(void *p);
/* host_alloc: mp_alloc's block, listed so that copy_in can tell it from other host memory. */
void *mp_cpu_host_alloc(size_t bytes, mp_mem_cat cat);
void mp_cpu_host_free(void *p);
/* copy_in: a copy, counted (copies_in, and pageable_in unless the source is host_alloc's). */
mp_status mp_cpu_copy_in(void *dst, const void *host, size_t bytes);
mp_status mp_cpu_copy(void *dst, const void *src, size_t bytes);
mp_status mp_cpu_copy_out(void *host, const void *src, size_t bytes);
mp_status mp_cpu_sync(void);
mp_status mp_cpu_fence_record(void **fence);
mp_status mp_cpu_fence_wait(void *fence);
void mp_cpu_fence_free(void *fence);
void *mp_cpu_queue(void);
void mp_cpu_counters(mp_ops_counters *out);
/* Counts a result handed to the host (mp_ops_counters.reads). */
void mp_cpu_count_read(void);
int64_t mp_cpu_mem_free_bytes(void);
mp_status mp_cpu_gemm(bool ta, bool tb, double alpha, const mp_tensor *a, const mp_tensor *b,
                      double beta, mp_tensor *c);
mp_status mp_cpu_gemm_bias(bool ta, bool tb, const mp_tensor *a, const mp_tensor *b,
                           const mp_tensor *bias, mp_tensor *c);
mp_status mp_cpu_bias_add(mp_tensor *y, const mp_tensor *b);
mp_status mp_cpu_bias_grad(const mp_tensor *dy, mp_tensor *db);
mp_status mp_cpu_relu_forward(const mp_tensor *x, mp_tensor *y);
mp_status mp_cpu_relu_backward(const mp_tensor *y, const mp_tensor *dy, mp_tensor *dx);
mp_status mp_cpu_softmax_xent(const mp_tensor *logits, const int32_t *labels, double smoothing,
                              double grad_scale, mp_amp_state *st, mp_xent_result *out,
                              mp_tensor *dlogits);
mp_status mp_cpu_optim_step(const mp_optim_args *args, const mp_amp_state *st, mp_tensor *param,
                            mp_tensor *copy, const mp_tensor *grad, mp_tensor *slot1,
                            mp_tensor *slot2);
mp_status mp_cpu_amp_check(const mp_tensor *grad, double mult, double limit, mp_amp_state *st);
mp_status mp_cpu_amp_revert(const mp_amp_state *st, const mp_tensor *saved, mp_tensor *live);
mp_status mp_cpu_amp_update(const mp_scaler_config *c, mp_amp_state *st);
mp_status mp_cpu_grad_stats(const mp_tensor *grad, double scale, double *sumsq, bool *nonfinite);
mp_status mp_cpu_scale(mp_tensor *x, double alpha);
mp_status mp_cpu_add(const mp_tensor *a, const mp_tensor *b, mp_tensor *y);
mp_status mp_cpu_batchnorm_forward(const mp_bn_args *a, bool train, const mp_tensor *x,
                                   const mp_tensor *gamma, const mp_tensor *beta,
                                   mp_tensor *running_mean, mp_tensor *running_var,
                                   mp_tensor *save_mean, mp_tensor *save_invstd, mp_tensor *y);
mp_status mp_cpu_batchnorm_backward(const mp_bn_args *a, const mp_tensor *x,
                                    const mp_tensor *dy, const mp_tensor *gamma,
                                    const mp_tensor *save_mean, const mp_tensor *save_invstd,
                                    mp_tensor *dx, mp_tensor *dgamma, mp_tensor *dbeta);
mp_status mp_cpu_pool_forward(const mp_pool_desc *d, const mp_tensor *x, mp_tensor *y);
mp_status mp_cpu_pool_backward(const mp_pool_desc *d, const mp_tensor *x, const mp_tensor *y,
                               const mp_tensor *dy, mp_tensor *dx);
mp_status mp_cpu_dropout_forward(double p, uint64_t seed, uint64_t offset, const mp_tensor *x,
                                 mp_tensor *y);
mp_status mp_cpu_dropout_backward(double p, uint64_t seed, uint64_t offset, const mp_tensor *dy,
                                  mp_tensor *dx);
mp_status mp_cpu_fill(mp_tensor *x, double value);
mp_status mp_cpu_convert(const mp_tensor *src, mp_tensor *dst);
mp_status mp_cpu_conv2d_forward(const mp_conv_desc *d, const mp_tensor *x, const mp_tensor *w,
                                mp_tensor *y);
mp_status mp_cpu_conv2d_backward_data(const mp_conv_desc *d, const mp_tensor *dy,
                                      const mp_tensor *w, mp_tensor *dx);
mp_status mp_cpu_conv2d_backward_filter(const mp_conv_desc *d, const mp_tensor *x,
                                        const mp_tensor *dy, mp_tensor *dw);

#endif
