/* The CPU backend's FP32 convolutions through oneDNN (engine/backend_cpu/conv_dnnl.c). */
#ifndef MP_CONV_DNNL_H
#define MP_CONV_DNNL_H

#include <stdbool.h>

#include "engine/conv_geom.h"

typedef enum mp_dnnl_kind { MP_DNNL_FWD, MP_DNNL_BWD_DATA, MP_DNNL_BWD_WEIGHTS } mp_dnnl_kind;

/* One FP32 convolution of descriptor d and geometry g (N >= 1) through oneDNN, on contiguous
 * NHWC / KRSC buffers: MP_DNNL_FWD out (y) = conv(a (x), b (w)); MP_DNNL_BWD_DATA out (dx) from
 * a (dy) and b (w); MP_DNNL_BWD_WEIGHTS out (dw) from a (x) and b (dy). out is overwritten.
 * False, with out unspecified, when oneDNN is not built in, MPDIST_CPU_CONV=im2col is set, or
 * oneDNN has no implementation for the geometry: the caller then computes it itself. */
bool mp_cpu_dnnl_conv(mp_dnnl_kind kind, const mp_conv_desc *d, const mp_conv_geom *g,
                      const float *a, const float *b, float *out);

#endif
