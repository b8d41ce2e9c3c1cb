/* Stop-request and fatal-signal handlers; see signals.h. The stop handler only writes a
 * sig_atomic_t; a SIGTERM after any stop request restores the default action and re-raises, so
 * a user can always kill. The fatal handler only calls async-signal-safe functions. */
#include "src/signals.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

#if defined(__SANITIZE_ADDRESS__)
#define MP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MP_ASAN 1
#endif
#endif

#ifndef MP_ASAN
static char fatal_prefix[160]; /* "mpdist: error: rank R on HOST: fatal signal ", made before */

static void on_fatal(int sig)
{
    const char *name = sig == SIGSEGV  ? "SIGSEGV"
                       : sig == SIGBUS ? "SIGBUS"
                       : sig == SIGFPE ? "SIGFPE"
                       : sig == SIGILL ? "SIGILL"
                                       : "SIGABRT";
    ssize_t ignored = write(STDERR_FILENO, fatal_prefix, strlen(fatal_prefix));
    ignored = write(STDERR_FILENO, name, strlen(name));
    static const char tail[] = " (a bug in mpdist or a library it calls)\n";
    ignored = write(STDERR_FILENO, tail, sizeof tail - 1);
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

void mp_signals_install_fatal(int rank, const char *host)
{
#ifdef MP_ASAN
    (void)rank;
    (void)host;
#else
    if (rank >= 0)
        snprintf(fatal_prefix, sizeof fatal_prefix, "mpdist: error: rank %d on %.64s: fatal "
                 "signal ", rank, host);
    else
        snprintf(fatal_prefix, sizeof fatal_prefix, "mpdist: error: fatal signal ");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaction(fatal[i], &sa, NULL);
#endif
}
