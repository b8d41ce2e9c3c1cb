/* Facts about the communication libraries in the binary, for `mpdist info`. */
#ifndef MP_COMM_INFO_H
#define MP_COMM_INFO_H

#include <stdio.h>

/* Prints "mpi: <library version>" and "nccl: <version>" (or "not built"). Needs no MPI_Init. */
void mp_comm_info(FILE *out);

#endif
