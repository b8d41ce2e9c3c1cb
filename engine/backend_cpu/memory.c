/* The CPU backend's memory: host blocks from mp_alloc, plain copies, nothing queued. */
#include <string.h>

#include "engine/backend_cpu/cpu.h"

void *mp_cpu_mem_alloc(size_t bytes, mp_mem_cat cat) { return mp_alloc(bytes, cat); }

void mp_cpu_mem_free(void *p) { mp_free(p); }

mp_status mp_cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove(dst, src, bytes);
    return MP_OK;
}

mp_status mp_cpu_sync(void) { return MP_OK; }

int64_t mp_cpu_mem_free_bytes(void) { return -1; }
