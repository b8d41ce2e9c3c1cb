/* Formats check failures with the rank and host set at start-up. */
#include "engine/check.h"

#include <stdio.h>
#include <string.h>

static int mp_id_rank = -1;
static char mp_id_host[64] = "?";

void mp_identity_set(int rank, const char *host)
{
    mp_id_rank = rank;
    snprintf(mp_id_host, sizeof mp_id_host, "%s", host ? host : "?");
}

mp_status mp_check_fail(mp_status code, const char *lib, const char *stmt, const char *file,
                        int line, const char *lib_message)
{
    return mp_fail(code, "[rank %d @ %s] %s:%d: %s failed (%s): %s", mp_id_rank, mp_id_host,
                   file, line, stmt, lib, lib_message ? lib_message : "unknown error");
}
