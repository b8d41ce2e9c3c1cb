/* The NCCL transport: collectives on device memory, enqueued on a communication stream of its
 * own behind the table of comm/transport.h. Each collective is ordered after the work queued
 * on the caller's compute stream when it was started (an event the communication stream waits
 * for), so backward may go on while earlier buckets are summed; `order` makes the compute stream
 * wait for the sums without the host waiting. A watchdog thread ends the job (every rank, exit
 * code 6) when a collective is outstanding longer than comm.timeout_s or NCCL reports an
 * asynchronous error, so no rank hangs inside a kernel. Built when NCCL is (MP_HAVE_NCCL). */
#ifndef MP_TRANSPORT_NCCL_H
#define MP_TRANSPORT_NCCL_H

#include "comm/mpi_check.h"
#include "comm/peers.h"
#include "comm/transport.h"

/* Collective over c->world, which no other thread may be using meanwhile (no host collective in
 * flight): makes the CUDA device `device` current on the calling thread, creates a non-blocking
 * NCCL communicator over every rank of c (rank 0's unique id broadcast with MPI) and waits up to
 * c->timeout_s for it to form, and creates the communication stream and the events.
 * `compute_stream` is the cudaStream_t (as void *) on which the buffers of later collectives are
 * written. Every rank returns the same status: MP_ECOMM when setting up failed on some rank or
 * timed out (the message names the first rank that failed), MP_EUSAGE "this build has no NCCL"
 * without NCCL. `c` must outlive the transport; start, wait, order and close are called from
 * the thread that opened it, abort from any. */
mp_status mp_transport_nccl_open(mp_transport *t, const mp_peers *c, int device,
                                 void *compute_stream);

#endif
