/* MP_HD marks a small inline function that both the C host code and CUDA kernels call, so that
 * a rule (the loss scaler's update, an optimizer's element update) is written once and gives the
 * same bits on the CPU and on the GPU. */
#ifndef MP_HD_H
#define MP_HD_H

#ifdef __CUDACC__
#define MP_HD __host__ __device__
#else
#define MP_HD
#endif

/* MP_HD_INLINE: MP_HD, always inlined, for a shared loop over elements loaded by runtime dtype
 * that the CPU backend instantiates once per dtype: inlined into each instance, the constant
 * dtype folds the per-element dtype switch away. */
#ifdef __GNUC__
#define MP_HD_INLINE MP_HD __attribute__((always_inline))
#else
#define MP_HD_INLINE MP_HD
#endif

#endif
