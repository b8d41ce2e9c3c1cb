/* The monotonic clock; see clock.h. */
#include "engine/clock.h"

#include <time.h>

double mp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
