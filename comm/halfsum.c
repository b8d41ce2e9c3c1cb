/* Half sums for MPI (see halfsum.h): the engine's fused half add, for both half types. */
#include "comm/halfsum.h"

#include <stddef.h>
#include <stdint.h>

#include "engine/dtype.h"

void mp_halfsum_f16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    mp_half_add(inout, in, (size_t)*len, MP_F16);
}

void mp_halfsum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    mp_half_add(inout, in, (size_t)*len, MP_BF16);
}
