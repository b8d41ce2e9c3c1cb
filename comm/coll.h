/* The data plane (comm/coll.c): collectives on the memory of any backend, each on its route. */
#ifndef MP_COLL_H
#define MP_COLL_H

#include "comm/comm_state.h"
#include "engine/ops.h"

/* The data plane: collectives on the memory of a compute backend, one call whatever the memory
 * and the transport. `mem` is the backend that owns coll->buf (NULL: host memory): host memory
 * (mem->host_memory) goes to the host transport; other memory to the device transport when it
 * is open (NCCL, or the staged CPU backend's second MPI transport), else through a host copy
 * that MPI works on (copied out when the collective starts, which waits for the ops queued
 * before it, and back in when mp_comm_coll_order or mp_comm_coll_wait reaches it). The result
 * is the same bytes on every route. *ticket identifies the collective for the two calls below
 * (waiting for one waits for those started before it on its route). MP_ECOMM once a collective
 * failed; MP_EINTERNAL for a block collective with elements no rank owns. */
mp_status mp_comm_coll_start(mp_comm *c, const mp_ops *mem, const mp_coll *coll,
                             uint64_t *ticket);

/* An all-reduce (op) or a broadcast (bytes, root 0) over buf, named `what` in messages (cut to
 * fit). */
mp_coll mp_coll_of(mp_coll_kind kind, void *buf, size_t count, mp_dtype dt, mp_redop op,
                   const char *what);

/* A reduce-scatter (sum) or all-gather over count elements of buf, which starts at element
 * `base` of a buffer cut into rank blocks of `block` elements (see mp_coll). */
mp_coll mp_coll_blocks(mp_coll_kind kind, void *buf, size_t count, mp_dtype dt, size_t block,
                       size_t base, const char *what);

/* Makes work queued on the compute stream after this call see the results of every data
 * collective up to `ticket`: on a device transport with a stream of its own the stream waits and
 * the host does not (*waited false); otherwise the host waits, under the watchdog, and copies
 * host results back (*waited true). Not collective. */
mp_status mp_comm_coll_order(mp_comm *c, uint64_t ticket, bool *waited);

/* The host waits for every data collective up to `ticket` (results copied back to the backend
 * where they went through the host), at most timeout_s per collective. Not collective. */
mp_status mp_comm_coll_wait(mp_comm *c, uint64_t ticket);

/* Starts *coll (its `what` set) on the host transport once it has room (waiting for the oldest
 * collective under the watchdog when MP_TRANSPORT_DEPTH are in flight). MP_EINTERNAL inside a
 * graph's capture (mp_comm_capture_begin), which cannot hold it. */
mp_status mp_comm_host_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket);

/* Frees the staged route's host blocks (comm/coll.c); nothing may be in flight on it. */
void mp_comm_stage_free(mp_comm *c);

#endif
