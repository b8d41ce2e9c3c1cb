/* The per-thread last-error message behind mp_fail(). */
#include "engine/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char mp_last_message[1024];

mp_status mp_fail(mp_status code, const char *fmt, ...)
{
    /* Formatted aside first: the arguments may include mp_error_message() itself. */
    char line[sizeof mp_last_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    memcpy(mp_last_message, line, sizeof line);
    return code;
}

const char *mp_error_message(void) { return mp_last_message; }

void mp_error_clear(void) { mp_last_message[0] = '\0'; }
