/* The one-line error helper and libconfig's type names that the configuration code shares
 * (config_internal.h). */
#include "src/config_internal.h"

#include <stdarg.h>
#include <stdio.h>

mp_status mp_config_fail(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return mp_fail(MP_EUSAGE, "%s", line);
}

const char *mp_config_type_name(int libconfig_type)
{
    switch (libconfig_type) {
    case CONFIG_TYPE_GROUP: return "group";
    case CONFIG_TYPE_INT: return "int";
    case CONFIG_TYPE_INT64: return "int";
    case CONFIG_TYPE_FLOAT: return "float";
    case CONFIG_TYPE_STRING: return "string";
    case CONFIG_TYPE_BOOL: return "bool";
    case CONFIG_TYPE_ARRAY: return "array";
    case CONFIG_TYPE_LIST: return "list";
    default: return "nothing";
    }
}

/* A copy of s[0, n) without leading and trailing white space; NULL if out of memory. */
