/* The CPU backend's memory: host blocks from mp_alloc (mem_alloc's and the workspaces counted at
 * MP_MEM_DEVICE, as a GPU's would be), plain copies, nothing queued; the host
 * waits are counted all the same, so tests of the step's host waits run on the CPU. host_alloc's
 * blocks are listed, so that a copy_in from any other host memory is counted as pageable: on a
 * GPU such a copy cannot run asynchronously and may wait for the device. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"

void *mp_cpu_mem_alloc(size_t bytes, mp_mem_cat cat) { return mp_alloc_at(bytes, cat, MP_MEM_DEVICE); }

void mp_cpu_mem_free(void *p) { mp_free(p); }

static _Thread_local void *mp_cpu_ws_block[MP_CPU_WS_N];
static _Thread_local size_t mp_cpu_ws_bytes[MP_CPU_WS_N];

static atomic_ullong mp_cpu_ws_moves;
static atomic_size_t mp_cpu_ws_most[MP_CPU_WS_N]; /* the largest block of each slot so far */

uint64_t mp_cpu_workspace_moves(void) { return atomic_load(&mp_cpu_ws_moves); }

void *mp_cpu_workspace(mp_cpu_ws slot, size_t bytes)
{
    if (bytes > mp_cpu_ws_bytes[slot]) {
        size_t most = atomic_load(&mp_cpu_ws_most[slot]);
        while (bytes > most && !atomic_compare_exchange_weak(&mp_cpu_ws_most[slot], &most, bytes))
            ;
        if (bytes > most)
            atomic_fetch_add(&mp_cpu_ws_moves, 1);
        mp_free(mp_cpu_ws_block[slot]);
        mp_cpu_ws_block[slot] = mp_alloc_at(bytes, MP_MEM_WORKSPACE, MP_MEM_DEVICE);
        mp_cpu_ws_bytes[slot] = bytes;
    }
    return mp_cpu_ws_block[slot];
}

mp_status mp_cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove(dst, src, bytes);
    return MP_OK;
}

static atomic_llong reads, syncs, fence_waits, copies_in, pageable_in;

/* The blocks host_alloc handed out and not yet freed (few: the loader's slots, the trainer's
 * staging), as [start, end) address ranges. */
typedef struct host_block {
    uintptr_t start, end;
} host_block;
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static host_block *host_blocks;
static size_t host_count, host_cap;

void *mp_cpu_host_alloc(size_t bytes, mp_mem_cat cat)
{
    char *p = mp_alloc(bytes, cat);
    pthread_mutex_lock(&host_mu);
    if (host_count == host_cap) {
        size_t cap = host_cap ? 2 * host_cap : 16;
        host_block *grown = realloc(host_blocks, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&host_mu);
            mp_free(p);
            mp_fail(MP_EINTERNAL, "cpu: out of host memory listing a host block");
            return NULL;
        }
        host_blocks = grown;
        host_cap = cap;
    }
    host_blocks[host_count++] = (host_block){(uintptr_t)p, (uintptr_t)p + bytes};
    pthread_mutex_unlock(&host_mu);
    return p;
}

void mp_cpu_host_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&host_mu);
    for (size_t i = 0; i < host_count; i++)
        if (host_blocks[i].start == (uintptr_t)p) {
            host_blocks[i] = host_blocks[--host_count];
            break;
        }
    if (host_count == 0) {
        free(host_blocks);
        host_blocks = NULL;
        host_cap = 0;
    }
    pthread_mutex_unlock(&host_mu);
    mp_free(p);
}

/* Whether [p, p + bytes) lies inside one block of host_alloc. */
static bool from_host_alloc(const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    bool found = false;
    pthread_mutex_lock(&host_mu);
    for (size_t i = 0; i < host_count && !found; i++)
        found = a >= host_blocks[i].start && a + bytes <= host_blocks[i].end;
    pthread_mutex_unlock(&host_mu);
    return found;
}

bool mp_cpu_host_block(const void *p, size_t bytes) { return from_host_alloc(p, bytes); }

mp_status mp_cpu_copy_in(void *dst, const void *host, size_t bytes)
{
    atomic_fetch_add(&copies_in, 1);
    if (bytes && !from_host_alloc(host, bytes))
        atomic_fetch_add(&pageable_in, 1);
    return mp_cpu_copy(dst, host, bytes);
}

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

void mp_cpu_count_fence_wait(void) { atomic_fetch_add(&fence_waits, 1); }

mp_status mp_cpu_fence_wait(void *fence)
{
    (void)fence;
    mp_cpu_count_fence_wait();
    return MP_OK;
}

void mp_cpu_fence_free(void *fence) { (void)fence; }

void *mp_cpu_queue(void) { return NULL; }

void mp_cpu_counters(mp_ops_counters *out)
{
    out->reads = atomic_load(&reads);
    out->syncs = atomic_load(&syncs);
    out->fence_waits = atomic_load(&fence_waits);
    out->copies_in = atomic_load(&copies_in);
    out->pageable_in = atomic_load(&pageable_in);
}

int64_t mp_cpu_mem_free_bytes(void) { return -1; }

int64_t mp_cpu_mem_used_bytes(void) { return -1; }
