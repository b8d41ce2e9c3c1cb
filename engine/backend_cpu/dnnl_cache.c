/* The CPU backend's oneDNN engine, streams and table of primitives (engine/backend_cpu/
 * dnnl_cache.h). */
#include "engine/backend_cpu/dnnl_cache.h"

#ifdef MPDIST_HAVE_DNNL
#include <assert.h>
#include <pthread.h>
#include <string.h>

enum { MP_DNNL_CACHE = 256 };

static dnnl_engine_t mp_engine;
static _Thread_local dnnl_stream_t mp_stream;
static _Thread_local mp_dnnl_entry mp_cache[MP_DNNL_CACHE];
static _Thread_local int mp_cache_used;
static _Thread_local int64_t mp_cache_calls;

static void engine_open(void)
{
    if (dnnl_engine_create(&mp_engine, dnnl_cpu, 0) != dnnl_success)
        mp_engine = NULL;
}

dnnl_engine_t mp_dnnl_engine(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, engine_open);
    return mp_engine;
}

dnnl_stream_t mp_dnnl_stream(void)
{
    if (!mp_stream && mp_dnnl_engine() &&
        dnnl_stream_create(&mp_stream, mp_engine, dnnl_stream_default_flags) != dnnl_success)
        mp_stream = NULL;
    return mp_stream;
}

void mp_dnnl_entry_free(mp_dnnl_entry *e)
{
    unsigned char key[MP_DNNL_KEY_BYTES];
    memcpy(key, e->key, sizeof key);
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    if (e->reorder)
        dnnl_primitive_destroy(e->reorder);
    for (int i = 0; i < 3; i++)
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
    if (e->wmem)
        dnnl_memory_destroy(e->wmem);
    if (e->scratch)
        dnnl_memory_destroy(e->scratch);
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, sizeof key);
}

mp_dnnl_entry *mp_dnnl_entry_for(const void *key, size_t bytes,
                                 void (*make)(const void *key, mp_dnnl_entry *e))
{
    unsigned char k[MP_DNNL_KEY_BYTES] = {0};
    assert(bytes <= sizeof k);
    memcpy(k, key, bytes < sizeof k ? bytes : sizeof k);
    mp_cache_calls++;
    for (int i = 0; i < mp_cache_used; i++)
        if (memcmp(mp_cache[i].key, k, sizeof k) == 0) {
            mp_cache[i].used = mp_cache_calls;
            return &mp_cache[i];
        }
    int slot = 0;
    if (mp_cache_used < MP_DNNL_CACHE)
        slot = mp_cache_used++;
    else
        for (int i = 1; i < MP_DNNL_CACHE; i++)
            if (mp_cache[i].used < mp_cache[slot].used)
                slot = i;
    mp_dnnl_entry *e = &mp_cache[slot];
    mp_dnnl_entry_free(e);
    memcpy(e->key, k, sizeof k);
    make(key, e);
    e->used = mp_cache_calls;
    return e;
}

bool mp_dnnl_entry_finish(mp_dnnl_entry *e, dnnl_primitive_desc_t pd,
                          const dnnl_memory_desc_t md[3])
{
    const char *impl = NULL;
    bool ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) ==
                  dnnl_success &&
              impl && strncmp(impl, "ref", 3) != 0;
    for (int i = 0; i < 3; i++)
        ok = ok && dnnl_memory_create(&e->mem[i], &md[i], mp_engine, DNNL_MEMORY_NONE) ==
                       dnnl_success;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (ok && e->scratch_bytes > 0)
        ok = dnnl_memory_create(&e->scratch, smd, mp_engine, DNNL_MEMORY_NONE) == dnnl_success;
    if (ok)
        ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    if (!ok)
        mp_dnnl_entry_free(e);
    return ok;
}

bool mp_dnnl_bind(mp_dnnl_entry *e, void *const data[3], const int roles[3],
                  dnnl_exec_arg_t args[3])
{
    for (int i = 0; i < 3; i++) {
        if (dnnl_memory_set_data_handle_v2(e->mem[i], data[i], mp_dnnl_stream()) != dnnl_success)
            return false;
        args[i] = (dnnl_exec_arg_t){roles[i], e->mem[i]};
    }
    return true;
}

bool mp_dnnl_execute(mp_dnnl_entry *e, const dnnl_exec_arg_t *args, int nargs, void *scratch)
{
    dnnl_exec_arg_t all[4];
    memcpy(all, args, (size_t)nargs * sizeof *args);
    if (e->scratch) {
        if (dnnl_memory_set_data_handle_v2(e->scratch, scratch, mp_dnnl_stream()) != dnnl_success)
            return false;
        all[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    }
    return dnnl_primitive_execute(e->prim, mp_dnnl_stream(), nargs, all) == dnnl_success;
}

#endif
