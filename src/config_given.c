/* What a loaded configuration says of its own keys (config.h): whether the file or --set gave a
 * key, and where. The rules (config_rules.c) ask it; the loader (config_load.c) fills it. */
#include "src/config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "src/config_schema.h"

bool mp_config_given(const mp_config *c, const char *path)
{
    const mp_key *k = mp_config_key_find(path);
    if (!k)
        return false;
    size_t idx = (size_t)(k - mp_config_keys);
    return (c->given[idx / 64] >> (idx % 64)) & 1u;
}

const char *mp_config_where(const mp_config *c, const char *path)
{
    for (int i = 0; i < c->nplaces; i++)
        if (strcmp(c->places[i].key, path) == 0)
            return c->places[i].where;
    return NULL;
}

const char *mp_config_key_at(const mp_config *c, const char *path, char *buf, size_t cap)
{
    const char *w = mp_config_where(c, path);
    if (w)
        snprintf(buf, cap, "%s", w);
    else
        snprintf(buf, cap, "%s: %s", c->path, path);
    return buf;
}
