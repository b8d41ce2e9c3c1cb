/* The CPU backend's bf16 GEMMs through oneDNN's matmul (engine/backend_cpu/gemm_dnnl.c). */
#ifndef MP_GEMM_DNNL_H
#define MP_GEMM_DNNL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/dtype.h"

/* Whether GEMMs of two dt operands go to oneDNN here: dt is MP_BF16, oneDNN is built in, the
 * CPU has bf16 dot products (mp_cpu_isa() is MP_ISA_AVX512BF16, which needs a build with
 * isa.h's levels; AMX CPUs have them too) and
 * MPDIST_CPU_GEMM=openblas is not set. Then widening the operands to FP32 first would only cost
 * time: callers keep them as they are. */
bool mp_cpu_dnnl_gemm_takes(mp_dtype dt);

/* c (m, n, row-major, overwritten, of dtype cdt: MP_F32, or MP_BF16 for the FP32 result
 * rounded once to nearest even, as mp_convert rounds it) = op(a) op(b), op(a) (m, k) and op(b)
 * (k, n) of dtype dt in row-major storage (a stored (k, m) when ta, b stored (n, k) when tb),
 * m, n, k >= 1: exact products summed in FP32 in oneDNN's order for the shape, thread count and
 * cdt (the same bits every call; with AVX512-BF16 the same order for either cdt, which
 * tests/unit/test_gemm_bf16.c checks, while on AMX with 16 threads or more and a long k oneDNN
 * may split k otherwise for a bf16 c), except that subnormal bf16 inputs and
 * subnormal FP32 sums are taken as zero (the bf16 instructions' rule, whatever MXCSR says; as in
 * conv_dnnl.c). False, with c unspecified, when mp_cpu_dnnl_gemm_takes(dt) is false, cdt is
 * another dtype or oneDNN has no fast kernel for the shape: the caller then computes it
 * itself. */
bool mp_cpu_dnnl_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, mp_dtype dt,
                      const void *a, const void *b, mp_dtype cdt, void *c);

/* Writes `mpdist info`'s oneDNN line to out: the library's version and what runs on it here
 * (convolutions; bf16 GEMMs, or why they are widened for OpenBLAS), or that it is not built in. */
void mp_cpu_dnnl_info(FILE *out);

#endif
