/* Waiting for host collectives under the watchdog (comm/watchdog.c). */
#ifndef MP_WATCHDOG_H
#define MP_WATCHDOG_H

#include "comm/comm_state.h"

/* Waits for every host-route collective started up to `ticket` (not collective itself).
 * MP_ECOMM when one failed, or when timeout_s passes (the watchdog's message; c->report says
 * whether this rank should print it). */
mp_status mp_comm_wait(mp_comm *c, uint64_t ticket);

#endif
