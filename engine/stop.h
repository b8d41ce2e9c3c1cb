/* A stop asked for by a signal (src/signals.c's handlers set it; docs/ARCHITECTURE.md §6): the
 * step loop agrees on it at a step boundary, and the long loops of a run's set-up below src/
 * (a data set's load, a scan over its files) poll it and return MP_ESTOPPED, so that a stop
 * during set-up ends the run within a second rather than after the load. */
#ifndef MP_STOP_H
#define MP_STOP_H

#include "engine/status.h"

/* Records signal `sig` as the stop request unless one is recorded already (the first stays).
 * Async-signal-safe, from any thread: one lock-free atomic compare-and-swap. */
void mp_stop_request(int sig);

/* The signal of the first stop request since start, or 0. */
int mp_stop_requested(void);

/* "SIGTERM", "SIGUSR1", or "signal N" (a static buffer for the last). */
const char *mp_stop_name(int sig);

/* MP_OK while no stop is requested; else MP_ESTOPPED with the message "stopped by SIGNAME
 * while `doing`" (doing: "reading data/train.bin", say). */
mp_status mp_stop_check(const char *doing);

#endif
