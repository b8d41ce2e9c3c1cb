/* Stop-request signal handlers; see signals.h. The handler only writes a sig_atomic_t; a
 * SIGTERM after any stop request restores the default action and re-raises, so a user can
 * always kill. */
#include "src/signals.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t mp_stop_signal;

static void on_signal(int sig)
{
    if (mp_stop_signal && sig == SIGTERM) {
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
        return;
    }
    if (!mp_stop_signal)
        mp_stop_signal = sig;
}

void mp_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int mp_signal_pending(void) { return (int)mp_stop_signal; }

const char *mp_signal_name(int sig)
{
    static char buf[32];
    if (sig == SIGTERM)
        return "SIGTERM";
    if (sig == SIGUSR1)
        return "SIGUSR1";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}
