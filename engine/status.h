/* Status codes and the last-error message shared by every library layer.
 * Library code (engine/, comm/, io/) never exits: it records a one-line message with
 * mp_fail() and returns the status; src/ prints mp_error_message() and exits with the code.
 * The numeric values are the process exit codes of docs/ARCHITECTURE.md §6. */
#ifndef MP_STATUS_H
#define MP_STATUS_H

typedef enum mp_status {
    MP_OK = 0,
    MP_EINTERNAL = 1, /* a bug or a library failure that fits no other class */
    MP_EUSAGE = 2,    /* command line or configuration */
    MP_EDATA = 3,     /* dataset files */
    MP_ECKPT = 4,     /* checkpoint files */
    MP_EDIVERGED = 5, /* loss scale floor, persistent inf/nan */
    MP_ECOMM = 6,     /* communication failure or timeout */
    MP_ESTOPPED = 7   /* a stop signal came during set-up (engine/stop.h): never an exit code;
                         the run ends as a stop does (exit 0, or 128 + the signal's number) */
} mp_status;

/* Records a printf-style one-line message for the calling thread and returns `code`: control
 * characters in it (a newline in a path or value) become '?'. The message replaces any earlier
 * one, and may be built from it (mp_error_message() as an argument adds context to the last
 * error). One longer than 1023 bytes (a long path in it)
 * keeps its first 400 bytes and its end, where the reason is, joined by " [...] ". */
mp_status mp_fail(mp_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's last message recorded by mp_fail ("" if none). Owned by the library;
 * valid until the next mp_fail on this thread. */
const char *mp_error_message(void);

/* Clears the calling thread's last message. */
void mp_error_clear(void);

/* Evaluates a call that returns mp_status and returns its status from the enclosing
 * function when it is not MP_OK. */
#define MP_TRY(call)                      \
    do {                                  \
        mp_status mp_try_st_ = (call);    \
        if (mp_try_st_ != MP_OK)          \
            return mp_try_st_;            \
    } while (0)

#endif
