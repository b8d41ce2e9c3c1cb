/* A bare NCCL communicator, for the reference rows of `mpdist bench-comm --device cuda`
 * (src/bench_comm.h) as nccl-tests runs NCCL: the library's in-place collectives enqueued
 * straight on a stream of its own, back to back, and one wait at the end; none of the
 * transport's machinery (no ring of events, no watchdog thread, no ordering after a compute
 * stream). Waiting polls an event under a time limit, so a peer that died cannot hang it. The
 * same calls without NCCL (MP_HAVE_NCCL unset) return MP_EUSAGE. */
#ifndef MP_NCCL_RAW_H
#define MP_NCCL_RAW_H

#include "comm/mpi_check.h"
#include "comm/peers.h"
#include "comm/transport.h"

typedef struct mp_nccl_raw mp_nccl_raw;

/* Collective over c->world, which no other thread may be using meanwhile: makes CUDA device
 * `device` current, creates a stream, an event and a non-blocking NCCL communicator over every
 * rank of c (mp_nccl_form: rank 0's unique id broadcast, formed within c->timeout_s) into *out.
 * Every rank returns the same status: MP_ECOMM naming the first rank that failed; MP_EUSAGE
 * "this build has no NCCL" without NCCL. */
mp_status mp_nccl_raw_open(mp_nccl_raw **out, const mp_peers *c, int device);

/* Enqueues one in-place collective on the stream: an all-reduce (coll->op) of coll->count
 * elements, or a reduce-scatter (sum) or all-gather of a whole blocked buffer (base 0, count =
 * size x block: ncclReduceScatter and ncclAllGather with recvbuff, sendbuff inside it, as
 * nccl-tests' in-place mode). MP_ECOMM when NCCL refuses it; MP_EINTERNAL for another kind or
 * a slice of a blocked buffer. Not collective, but every rank must enqueue the same sequence. */
mp_status mp_nccl_raw_start(mp_nccl_raw *r, const mp_coll *coll);

/* Waits up to limit_s for everything enqueued, polling an event recorded after it. MP_ECOMM
 * with the rank and host when a collective failed or did not finish in time (the communicator
 * is then aborted, so that later calls fail at once). */
mp_status mp_nccl_raw_wait(mp_nccl_raw *r, double limit_s);

/* Destroys the communicator (aborting one that failed), the event and the stream; NULL is
 * ignored. Not collective. */
void mp_nccl_raw_close(mp_nccl_raw *r);

#endif
