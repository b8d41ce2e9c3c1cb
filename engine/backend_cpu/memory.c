/* The CPU backend's memory: host blocks from mp_alloc, plain copies, nothing queued; the host
 * waits are counted all the same, so tests of the step's host waits run on the CPU. */
#include <stdatomic.h>
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

static atomic_llong reads, syncs, fence_waits;

void mp_cpu_count_read(void) { atomic_fetch_add(&reads, 1); }

mp_status mp_cpu_copy_out(void *host, const void *src, size_t bytes)
{
    mp_cpu_count_read();
    return mp_cpu_copy(host, src, bytes);
}

mp_status mp_cpu_sync(void)
{
    atomic_fetch_add(&syncs, 1);
    return MP_OK;
}

mp_status mp_cpu_fence_record(void **fence)
{
    (void)fence;
    return MP_OK;
}

mp_status mp_cpu_fence_wait(void *fence)
{
    (void)fence;
    atomic_fetch_add(&fence_waits, 1);
    return MP_OK;
}

void mp_cpu_fence_free(void *fence) { (void)fence; }

void *mp_cpu_queue(void) { return NULL; }

void mp_cpu_counters(mp_ops_counters *out)
{
    out->reads = atomic_load(&reads);
    out->syncs = atomic_load(&syncs);
    out->fence_waits = atomic_load(&fence_waits);
}

int64_t mp_cpu_mem_free_bytes(void) { return -1; }
