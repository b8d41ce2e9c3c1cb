/* The MPI transport: collectives on host memory, run by a worker thread with blocking MPI calls
 * (Open MPI's tuned algorithms) while the caller's thread computes. With less than
 * MPI_THREAD_SERIALIZED the collectives run inline in start instead. */
#ifndef MP_TRANSPORT_MPI_H
#define MP_TRANSPORT_MPI_H

#include "comm/mpi_check.h"
#include "comm/peers.h"
#include "comm/transport.h"

/* Opens the transport over `world` (c->world, or a duplicate of it for a second transport beside
 * the first, which needs MPI_THREAD_MULTIPLE); c's half types and ops must exist. `c` and
 * `world` must outlive it. */
mp_status mp_transport_mpi_open(mp_transport *t, const mp_peers *c, MPI_Comm world);

#endif
