/* Rank 0's clock on every rank, for a timeline whose events line up across hosts (log.trace). */
#ifndef MP_CLOCK_SYNC_H
#define MP_CLOCK_SYNC_H

#include "comm/comm_state.h"
#include "engine/status.h"

/* Collective. Estimates, as Cristian's algorithm does, what to add to this rank's host clock
 * (mp_now) to read rank 0's: rank 0 answers each other rank's pings with its clock, and the
 * ping with the shortest round trip of 16 gives *offset_s, within *error_s (half that round
 * trip). Rank 0 gets 0 and 0. MP_ECOMM naming the peer when a ping or its answer does not come
 * within comm.timeout_s. */
mp_status mp_comm_clock_offset(mp_comm *c, double *offset_s, double *error_s);

#endif
