/* The CPU backend's FP32 convolutions through oneDNN (engine/backend_cpu/conv_dnnl.c). */
#ifndef MP_CONV_DNNL_H
#define MP_CONV_DNNL_H

#include <stdbool.h>

#include "engine/conv_geom.h"
#include "engine/dtype.h"

typedef enum mp_dnnl_kind { MP_DNNL_FWD, MP_DNNL_BWD_DATA, MP_DNNL_BWD_WEIGHTS } mp_dnnl_kind;

/* One convolution of descriptor d and geometry g (N >= 1) through oneDNN, on contiguous NHWC /
 * KRSC buffers all of dtype dt (MP_F32, MP_F16 or MP_BF16; halves are multiplied exactly and
 * summed in FP32, each result rounded once; bf16 subnormals flushed): MP_DNNL_FWD out (y) = conv(a (x), b (w));
 * MP_DNNL_BWD_DATA out (dx) from a (dy) and b (w); MP_DNNL_BWD_WEIGHTS out (dw) from a (x) and
 * b (dy). out is overwritten. False, with out unspecified, when oneDNN is not built in,
 * MPDIST_CPU_CONV=im2col is set, or oneDNN has no fast implementation for the geometry and
 * dtype: the caller then computes it itself. */
bool mp_cpu_dnnl_conv(mp_dnnl_kind kind, mp_dtype dt, const mp_conv_desc *d,
                      const mp_conv_geom *g, const void *a, const void *b, void *out);

#endif
