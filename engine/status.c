/* The per-thread last-error message behind mp_fail(). */
#include "engine/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char mp_last_message[1024];

mp_status mp_fail(mp_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mp_last_message, sizeof mp_last_message, fmt, ap);
    va_end(ap);
    return code;
}

const char *mp_error_message(void) { return mp_last_message; }

void mp_error_clear(void) { mp_last_message[0] = '\0'; }
