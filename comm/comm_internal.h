/* The routes of the data plane (comm/coll.c): in-place collectives on the host transport c->tx
 * (comm/comm.c) and on the device transport c->dtx (comm/comm_device.c), each with its own
 * tickets. */
#ifndef MP_COMM_INTERNAL_H
#define MP_COMM_INTERNAL_H

#include "comm/comm.h"

/* Starts *coll (its `what` set) on the host transport once it has room (waiting for the oldest
 * collective under the watchdog when MP_TRANSPORT_DEPTH are in flight). */
mp_status mp_comm_host_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket);

/* Starts *coll on the device transport, ordered after the work queued on the compute stream so
 * far; never more than MP_TRANSPORT_DEPTH are outstanding (the oldest is waited for first, on
 * the host, under timeout_s). MP_ECOMM once a device collective failed. */
mp_status mp_comm_device_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket);

/* Makes the compute stream wait for every device collective up to `ticket` (0: none); where
 * the transport has no stream of its own the host waits. *waited says which. */
mp_status mp_comm_device_order(mp_comm *c, uint64_t ticket, bool *waited);

/* The host waits for every device collective up to `ticket`, at most timeout_s. MP_ECOMM when
 * one failed or the time passed (the NCCL watchdog usually ends the job first). */
mp_status mp_comm_device_wait(mp_comm *c, uint64_t ticket);

/* Frees the staged route's host blocks (comm/coll.c); nothing may be in flight on it. */
void mp_comm_stage_free(mp_comm *c);

#endif
