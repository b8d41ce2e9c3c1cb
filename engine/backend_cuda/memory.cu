/* Memory of the CUDA backend: cudaMalloc'd device blocks and pinned host blocks (cudaHostAlloc,
 * which the device copies from asynchronously), counted under their category (the engine's
 * counters, mp_mem_count), with a host-side table of block sizes so that freeing needs no size;
 * copies in stream order on the backend's stream. Device blocks count at MP_MEM_DEVICE, pinned
 * host blocks at MP_MEM_HOST. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "engine/backend_cuda/cuda.h"

typedef struct mp_block {
    void *p;
    size_t bytes;
    int cat;
    bool pinned; /* a pinned host block */
} mp_block;

/* Open addressing over pointers; a freed slot keeps p == MP_TOMB so probes go past it.
 * mp_nused counts live records and tombstones (it bounds the probe chains), mp_nlive the live
 * ones (a rehash drops the tombstones and sizes the table for them alone). */
static mp_block *mp_blocks;
static size_t mp_nslots, mp_nused, mp_nlive;
static pthread_mutex_t mp_blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static char mp_tomb_byte;
#define MP_TOMB ((void *)&mp_tomb_byte)

static size_t slot_of(const void *p, size_t nslots)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (nslots - 1);
}

/* Inserts without growing; the table has a free slot. */
static void put(mp_block *tab, size_t nslots, mp_block b)
{
    size_t i = slot_of(b.p, nslots);
    while (tab[i].p && tab[i].p != MP_TOMB)
        i = (i + 1) & (nslots - 1);
    tab[i] = b;
}

/* Records a block; false when the host is out of memory for the table. */
static bool record(void *p, size_t bytes, mp_mem_cat cat, bool pinned)
{
    pthread_mutex_lock(&mp_blocks_lock);
    if (2 * (mp_nused + 1) > mp_nslots) {
        size_t n = 256;
        while (n < 4 * (mp_nlive + 1))
            n *= 2;
        mp_block *tab = (mp_block *)calloc(n, sizeof *tab);
        if (!tab) {
            pthread_mutex_unlock(&mp_blocks_lock);
            return false;
        }
        for (size_t i = 0; i < mp_nslots; i++)
            if (mp_blocks[i].p && mp_blocks[i].p != MP_TOMB)
                put(tab, n, mp_blocks[i]);
        free(mp_blocks);
        mp_blocks = tab;
        mp_nslots = n;
        mp_nused = mp_nlive;
    }
    put(mp_blocks, mp_nslots, mp_block{p, bytes, (int)cat, pinned});
    mp_nused++;
    mp_nlive++;
    pthread_mutex_unlock(&mp_blocks_lock);
    return true;
}

/* Removes p's record into *out; false for a pointer this allocator did not hand out. */
static bool forget(void *p, mp_block *out)
{
    bool found = false;
    pthread_mutex_lock(&mp_blocks_lock);
    if (mp_nslots) {
        size_t i = slot_of(p, mp_nslots);
        while (mp_blocks[i].p) {
            if (mp_blocks[i].p == p) {
                *out = mp_blocks[i];
                mp_blocks[i].p = MP_TOMB;
                mp_nlive--;
                found = true;
                break;
            }
            i = (i + 1) & (mp_nslots - 1);
        }
    }
    pthread_mutex_unlock(&mp_blocks_lock);
    return found;
}

extern "C" void *mp_cuda_mem_alloc(size_t bytes, mp_mem_cat cat)
{
    mp_cuda_ctx *c = mp_cuda_ctx_get();
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        mp_fail(MP_EINTERNAL, "cuda: out of device memory allocating %zu bytes of %s", bytes,
                mp_mem_cat_name(cat));
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, bytes, c->stream) != cudaSuccess || !record(p, bytes, cat, false)) {
        cudaFree(p);
        mp_fail(MP_EINTERNAL, "cuda: could not set up %zu bytes of %s", bytes,
                mp_mem_cat_name(cat));
        return NULL;
    }
    mp_mem_count(MP_MEM_DEVICE, cat, (int64_t)bytes);
    return p;
}

extern "C" void mp_cuda_mem_free(void *p)
{
    mp_block b;
    if (!p || !forget(p, &b))
        return;
    /* Work queued on the backend's stream may still use the block: it finishes first (cudaFree
     * itself synchronises the device, but the stream is a non-blocking one). Errors of that work
     * are left for the next sync to report. */
    cudaStreamSynchronize(mp_cuda_ctx_get()->stream);
    if (b.pinned)
        cudaFreeHost(p);
    else
        cudaFree(p);
    mp_mem_count(b.pinned ? MP_MEM_HOST : MP_MEM_DEVICE, (mp_mem_cat)b.cat, -(int64_t)b.bytes);
}

/* host_free: host_alloc's pinned blocks are in the same table as device blocks. */
extern "C" void mp_cuda_host_free(void *p) { mp_cuda_mem_free(p); }

extern "C" void *mp_cuda_host_alloc(size_t bytes, mp_mem_cat cat)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        mp_fail(MP_EINTERNAL, "cuda: cannot pin %zu bytes of host memory for %s", bytes,
                mp_mem_cat_name(cat));
        return NULL;
    }
    memset(p, 0, bytes);
    if (!record(p, bytes, cat, true)) {
        cudaFreeHost(p);
        mp_fail(MP_EINTERNAL, "cuda: out of host memory recording a pinned block");
        return NULL;
    }
    mp_mem_count(MP_MEM_HOST, cat, (int64_t)bytes);
    return p;
}

/* The host waits and the uploads, counted for ops->counters. */
static std::atomic<long long> n_reads, n_syncs, n_fence_waits, n_copies_in, n_pageable_in;

/* A source the runtime does not know as page-locked (cudaMemoryTypeUnregistered: pageable
 * memory) is counted: cudaMemcpyAsync from it stages through a driver buffer and may return
 * only after the device has caught up. */
extern "C" mp_status mp_cuda_copy_in(void *dst, const void *host, size_t bytes)
{
    n_copies_in++;
    if (!bytes)
        return MP_OK;
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, host) != cudaSuccess) {
        cudaGetLastError(); /* its error must not fail the next launch's check */
        n_pageable_in++;
    } else if (a.type == cudaMemoryTypeUnregistered) {
        n_pageable_in++;
    }
    CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice,
                               mp_cuda_ctx_get()->stream));
    return MP_OK;
}

extern "C" mp_status mp_cuda_copy_out(void *host, const void *src, size_t bytes)
{
    cudaStream_t s = mp_cuda_ctx_get()->stream;
    n_reads++;
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return MP_OK;
}

extern "C" mp_status mp_cuda_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                   mp_cuda_ctx_get()->stream));
    return MP_OK;
}

extern "C" int64_t mp_cuda_mem_free_bytes(void)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return (int64_t)free_b;
}

extern "C" int64_t mp_cuda_mem_used_bytes(void)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return (int64_t)(total - free_b);
}

extern "C" mp_status mp_cuda_sync(void)
{
    n_syncs++;
    CUDA_CHECK(cudaStreamSynchronize(mp_cuda_ctx_get()->stream));
    CUDA_CHECK(cudaGetLastError());
    return MP_OK;
}

/* Fences are waited for by the loader's threads and, when the ring of slots paces the step, by
 * the step's own thread (the loader's device_wait); none of them should spin on a core the step
 * or a fill needs (a host of two vCPUs, or ranks sharing cores): blocking-sync events put a
 * waiting thread to sleep until the device signals, at the cost of a wake-up (tens of
 * microseconds, unmeasured here) once a step when the ring paces it. */
extern "C" mp_status mp_cuda_fence_record(void **fence)
{
    MP_TRY(mp_cuda_not_capturing("fence_record")); /* a fence is for the host to wait on */
    if (!*fence)
        CUDA_CHECK(cudaEventCreateWithFlags((cudaEvent_t *)fence,
                                            cudaEventDisableTiming | cudaEventBlockingSync));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)*fence, mp_cuda_ctx_get()->stream));
    return MP_OK;
}

/* Called from loader threads: the device is set first (a new thread's current device is 0). */
extern "C" mp_status mp_cuda_fence_wait(void *fence)
{
    n_fence_waits++;
    if (!fence)
        return MP_OK;
    CUDA_CHECK(cudaSetDevice(mp_cuda_ctx_get()->device));
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)fence));
    return MP_OK;
}

extern "C" void mp_cuda_fence_free(void *fence)
{
    if (fence)
        cudaEventDestroy((cudaEvent_t)fence);
}

/* Clock marks: timing events (fences are created without timing, which makes them cheaper to
 * wait for and to wait on from another stream). */
extern "C" mp_status mp_cuda_mark_record(void **mark)
{
    MP_TRY(mp_cuda_not_capturing("mark_record")); /* a mark is for the host to read */
    if (!*mark)
        CUDA_CHECK(cudaEventCreate((cudaEvent_t *)mark));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)*mark, mp_cuda_ctx_get()->stream));
    return MP_OK;
}

extern "C" mp_status mp_cuda_mark_elapsed(void *from, void *to, double *ms)
{
    if (!from || !to)
        return mp_fail(MP_EINTERNAL, "cuda: mark_elapsed on a mark never recorded");
    n_fence_waits++;
    float f = 0.0f;
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)to));
    CUDA_CHECK(cudaEventElapsedTime(&f, (cudaEvent_t)from, (cudaEvent_t)to));
    *ms = (double)f;
    return MP_OK;
}

extern "C" void mp_cuda_mark_free(void *mark) { mp_cuda_fence_free(mark); }

extern "C" void *mp_cuda_queue(void) { return (void *)mp_cuda_ctx_get()->stream; }

extern "C" void mp_cuda_counters(mp_ops_counters *out)
{
    out->reads = n_reads.load();
    out->syncs = n_syncs.load();
    out->fence_waits = n_fence_waits.load();
    out->copies_in = n_copies_in.load();
    out->pageable_in = n_pageable_in.load();
}
