/* The stop request's flag (engine/stop.h). */
#include "engine/stop.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

/* Lock-free (checked below), so a handler on any thread may set it and every thread read it. */
static atomic_int mp_stop_sig;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a stop request needs a lock-free atomic int");

void mp_stop_request(int sig)
{
    int none = 0;
    atomic_compare_exchange_strong(&mp_stop_sig, &none, sig);
}

int mp_stop_requested(void) { return atomic_load(&mp_stop_sig); }

const char *mp_stop_name(int sig)
{
    static char buf[32];
    if (sig == SIGTERM)
        return "SIGTERM";
    if (sig == SIGUSR1)
        return "SIGUSR1";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

mp_status mp_stop_check(const char *doing)
{
    int sig = atomic_load(&mp_stop_sig);
    if (!sig)
        return MP_OK;
    return mp_fail(MP_ESTOPPED, "stopped by %s while %s", mp_stop_name(sig), doing);
}
