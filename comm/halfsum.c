/* Half sums for MPI (see halfsum.h). One loop for both half types, blocks of BLOCK elements
 * converted to FP32 on the stack. */
#include "comm/halfsum.h"

#include <stddef.h>
#include <stdint.h>

#include "engine/dtype.h"

#define BLOCK 512

static void half_sum(const uint16_t *in, uint16_t *inout, size_t n, mp_dtype dt)
{
    float a[BLOCK], b[BLOCK];
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t m = n - i < BLOCK ? n - i : BLOCK;
        mp_convert(a, MP_F32, in + i, dt, m);
        mp_convert(b, MP_F32, inout + i, dt, m);
        for (size_t j = 0; j < m; j++)
            a[j] += b[j];
        mp_convert(inout + i, dt, a, MP_F32, m);
    }
}

void mp_halfsum_f16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    half_sum(in, inout, (size_t)*len, MP_F16);
}

void mp_halfsum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    half_sum(in, inout, (size_t)*len, MP_BF16);
}
