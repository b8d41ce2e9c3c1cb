/* The per-thread last-error message behind mp_fail(). */
#include "engine/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char mp_last_message[1024];

mp_status mp_fail(mp_status code, const char *fmt, ...)
{
    /* Formatted aside first: the arguments may include mp_error_message() itself. */
    char line[sizeof mp_last_message];
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char *all = n >= (int)sizeof line ? malloc((size_t)n + 1) : NULL;
    if (all) { /* a long path, say: its head and the message's tail, which says why */
        static const char cut[] = " [...] ";
        const int head = 400, tail = (int)sizeof line - 1 - head - (int)(sizeof cut - 1);
        vsnprintf(all, (size_t)n + 1, fmt, again);
        snprintf(line, sizeof line, "%.*s%s%s", head, all, cut, all + n - tail);
        free(all);
    }
    va_end(again);
    for (char *p = line; *p; p++) /* one line, whatever a path or value in it holds */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    memcpy(mp_last_message, line, sizeof line);
    return code;
}

const char *mp_error_message(void) { return mp_last_message; }

void mp_error_clear(void) { mp_last_message[0] = '\0'; }
