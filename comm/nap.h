/* Sleeping for a while in the polling loops of comm/ (the watchdogs, the NCCL transport). */
#ifndef MP_NAP_H
#define MP_NAP_H

#include <time.h>

/* Sleeps `seconds` (>= 0; a signal may end the sleep early). */
static inline void mp_nap(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

#endif
