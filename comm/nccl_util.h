/* What comm/'s two NCCL users share (the transport, comm/transport_nccl.c, and bench-comm's bare
 * communicator, comm/nccl_raw.c): NCCL's name of our dtypes, waiting for a non-blocking
 * communicator's call to settle under a time limit, forming a communicator over an mp_comm, and
 * one status for every rank. Include only in builds with NCCL (MP_HAVE_NCCL). */
#ifndef MP_NCCL_UTIL_H
#define MP_NCCL_UTIL_H

#include <nccl.h>

#include "comm/mpi_check.h"
#include "comm/peers.h"
#include "comm/transport.h"
#include "engine/dtype.h"
#include "engine/status.h"

/* NCCL's datatype for dt. Pure. */
ncclDataType_t mp_nccl_dtype(mp_dtype dt);

/* Enqueues collective c in place on stream s of communicator nc, as rank `rank` of `size`
 * (not yet settled: the caller passes the result to mp_nccl_settle): an all-reduce or a byte
 * broadcast as NCCL's call; a reduce-scatter or all-gather of a whole blocked buffer as NCCL's
 * in-place ncclReduceScatter and ncclAllGather, and of a slice of one (a bucket) as one group
 * of a reduce (reduce-scatter) or a broadcast (all-gather) of each rank's piece with that rank
 * as the root. */
ncclResult_t mp_nccl_enqueue(ncclComm_t nc, cudaStream_t s, int rank, int size,
                             const mp_coll *c);

/* NCCL's asynchronous state of nc: ncclSuccess, ncclInProgress while it still works on the last
 * call, or the error it met (ncclCommGetAsyncError's own failure included). */
ncclResult_t mp_nccl_state(ncclComm_t nc);

/* Waits, polling ncclCommGetAsyncError, up to limit_s for the non-blocking communicator `nc` to
 * finish the call that returned rc. MP_OK when it settled; MP_ECOMM "[rank R @ host] NCCL did
 * not finish DOING within N s (comm.timeout_s)" or "... NCCL failed DOING: error (last error)"
 * otherwise. The caller serialises calls on nc. */
mp_status mp_nccl_settle(ncclComm_t nc, ncclResult_t rc, double limit_s, int rank,
                         const char *host, const char *doing);

/* Collective over c->world: every rank's status st of one stage of setting up. MP_OK when all
 * succeeded, else MP_ECOMM on every rank with the message of the lowest rank that failed. */
mp_status mp_nccl_agree(const mp_peers *c, mp_status st);

/* Collective over c->world, no other thread using it: rank 0's unique id broadcast, then a
 * non-blocking communicator over every rank of c created into *nc (NULL when it could not be)
 * and waited for up to c->timeout_s. `st` is this rank's status of what it did before (rank 0's
 * ncclGetUniqueId included): a rank that failed takes part in the broadcast and creates nothing.
 * Every rank returns the same status (mp_nccl_agree). */
mp_status mp_nccl_form(const mp_peers *c, mp_status st, const ncclUniqueId *id, ncclComm_t *nc);

#endif
