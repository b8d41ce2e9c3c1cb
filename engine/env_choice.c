/* The engine's path-choosing environment variables and their values; see env_choice.h. */
#include "engine/env_choice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MP_ENV_MAX_VALUES = 3 };

static const struct {
    const char *name;
    const char *values[MP_ENV_MAX_VALUES]; /* NULL-padded */
} vars[MP_ENV_NVARS] = {
    [MP_ENV_CPU_ISA] = {"MPDIST_CPU_ISA", {"base", "avx2", "avx512"}},
    [MP_ENV_CPU_GEMM] = {"MPDIST_CPU_GEMM", {"openblas"}},
    [MP_ENV_CPU_CONV] = {"MPDIST_CPU_CONV", {"im2col"}},
    [MP_ENV_CPU_STAGED] = {"MPDIST_CPU_STAGED", {"0", "1"}},
};

/* The index of var's value, -1 when unset or empty, -2 when outside its list. */
static int lookup(mp_env_var var, const char **value)
{
    *value = getenv(vars[var].name);
    if (!*value || !**value)
        return -1;
    for (int i = 0; i < MP_ENV_MAX_VALUES && vars[var].values[i]; i++)
        if (strcmp(*value, vars[var].values[i]) == 0)
            return i;
    return -2;
}

int mp_env_choice(mp_env_var var)
{
    const char *v;
    int i = lookup(var, &v);
    return i >= 0 ? i : -1;
}

mp_status mp_env_check(void)
{
    for (int var = 0; var < MP_ENV_NVARS; var++) {
        const char *v;
        if (lookup((mp_env_var)var, &v) != -2)
            continue;
        char list[64] = "";
        for (int i = 0; i < MP_ENV_MAX_VALUES && vars[var].values[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     vars[var].values[i]);
        return mp_fail(MP_EUSAGE, "%s: \"%.100s\" is not one of its values (%s)",
                       vars[var].name, v, list);
    }
    return MP_OK;
}
