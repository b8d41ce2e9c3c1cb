/* The stop request's flag (engine/stop.h). */
#include "engine/stop.h"

#include <signal.h>
#include <stdio.h>

static volatile sig_atomic_t mp_stop_sig;

void mp_stop_request(int sig)
{
    if (!mp_stop_sig)
        mp_stop_sig = sig;
}

int mp_stop_requested(void) { return (int)mp_stop_sig; }

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
    int sig = (int)mp_stop_sig;
    if (!sig)
        return MP_OK;
    return mp_fail(MP_ESTOPPED, "stopped by %s while %s", mp_stop_name(sig), doing);
}
