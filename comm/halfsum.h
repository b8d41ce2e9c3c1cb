/* MPI reduction callbacks for the half types: element-wise sums that add in FP32 and round once
 * to the half type (what a tensor core's FP32 accumulation and a half store do), through the
 * engine's fused half add (F16C where the CPU has it). */
#ifndef MP_HALFSUM_H
#define MP_HALFSUM_H

#include <mpi.h>

/* MPI_User_function for fp16 / bf16 words (2-byte elements): inout[i] = half(in[i] + inout[i]). */
void mp_halfsum_f16(void *in, void *inout, int *len, MPI_Datatype *dt);
void mp_halfsum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt);

#endif
