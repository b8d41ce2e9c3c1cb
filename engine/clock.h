/* The clock every timing in mpdist uses. */
#ifndef MP_CLOCK_H
#define MP_CLOCK_H

/* Monotonic seconds (CLOCK_MONOTONIC), from an arbitrary origin. */
double mp_now(void);

#endif
