/* Stop-request, ending and fatal-signal handlers; see signals.h. The stop handler only writes a
 * sig_atomic_t and the time; a SIGTERM after any stop request ends the process as an ending
 * signal does, so a user can always kill, unless it comes within half a second of the first
 * request (the same request sent twice). The handlers only call async-signal-safe functions
 * (clock_gettime is one). */
#include "src/signals.h"

#include "engine/stop.h"
#include "io/temp_guard.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Removes the temporaries being written, then dies of `sig` as without a handler. */
static void on_ending(int sig)
{
    mp_temp_guard_unlink_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* When the first stop request came, CLOCK_MONOTONIC nanoseconds (0: none yet); lock-free, so
 * that handlers on any thread, or one interrupting another, set and read it whole. */
static atomic_llong first_ns;
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the stop's time needs a lock-free atomic");

/* A SIGTERM this soon after the first request is that request reaching the process twice (GNU
 * timeout sends it to its child and then to the child's process group, microseconds apart), not
 * a user's second SIGTERM; shorter than the second mpirun waits before its own. */
#define MP_STOP_ECHO_NS 500000000LL

static long long now_ns(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
        return 0;
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void on_signal(int sig)
{
    long long now = now_ns();
    if (mp_stop_requested()) {
        long long first = atomic_load(&first_ns);
        if (sig == SIGTERM && !(first > 0 && now > 0 && now - first < MP_STOP_ECHO_NS))
            on_ending(sig);
        return;
    }
    long long none = 0;
    atomic_compare_exchange_strong(&first_ns, &none, now); /* before the flag others read */
    mp_stop_request(sig);
}

/* Installs fn for sig; an ending handler (fn == on_ending) leaves a signal the process was
 * started with ignored (nohup, a script's `cmd &`) ignored. */
static void handle(int sig, void (*fn)(int))
{
    struct sigaction sa;
    if (fn == on_ending && sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

void mp_signals_install(void)
{
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is a write error at the end, not a death */
    signal(SIGXFSZ, SIG_IGN); /* a file size limit (ulimit -f) fails a save (EFBIG, exit 4) */
    handle(SIGTERM, on_signal);
    handle(SIGUSR1, on_signal);
    handle(SIGINT, on_ending);
    handle(SIGHUP, on_ending);
}

void mp_signals_install_ending(void)
{
    handle(SIGTERM, on_ending);
    handle(SIGUSR1, on_ending); /* what launch/mpdist-run passes a first SIGTERM on as */
    handle(SIGINT, on_ending);
    handle(SIGHUP, on_ending);
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
