/* The prefetching loader: worker threads fill batches ahead of the consumer into a ring of
 * depth + 1 slots. Batch j of an epoch always goes to slot j % nslots, and a worker may claim it
 * only once the consumer has given back batch j - nslots (j < released + nslots), so a slot is
 * never written while the consumer holds it. One mutex guards all shared state; `work` wakes
 * workers when a batch becomes claimable (or on stop), `done` wakes the consumer when a fill
 * finishes. A fill runs without the lock, on the (idx, count, epoch) it read when it claimed the
 * batch; start_epoch stops new claims and waits for `inflight` to reach zero before it touches
 * the epoch state, so a discarded fill can neither read a stale idx nor land in the new epoch.
 * A batch's bytes come only from mp_dataset_batch_augmented on (seed, epoch, its indices). */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* nice */
#endif
#include "io/loader.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/clock.h"
#include "io/augment.h"
#include "io/memcheck.h"

typedef struct mp_loader_slot {
    void *x;       /* (batch, H, W, C) of cfg.dtype */
    int32_t *y;    /* (batch * label_len) */
    int64_t n;     /* samples of the batch held, under mu */
    int64_t ready; /* batch number whose fill finished here this epoch, -1 if none; under mu */
    void *fence;   /* recorded by the consumer after its copies out of the slot, or NULL */
    double fill_s, fence_s; /* the last fill's build and fence-wait seconds, for stats */
    mp_status st;  /* the fill's status (a token shard that cannot be read) */
    char why[512]; /* its message when st is not MP_OK */
} mp_loader_slot;

struct mp_loader {
    mp_loader_config cfg; /* cfg.mean and cfg.std point to the owned copies below */
    double *mean, *std;   /* (data->c) */
    int nslots;
    mp_loader_slot *slots;
    pthread_t *threads;
    int nthreads; /* threads started */
    bool sync_ready;
    pthread_mutex_t mu;
    pthread_cond_t work; /* a batch became claimable, or stop */
    pthread_cond_t done; /* a fill finished */
    /* The epoch, all under mu. */
    const int64_t *idx;
    int64_t count, epoch, nbatches;
    int64_t issued;   /* batches claimed by workers this epoch */
    int64_t released; /* batches the consumer has given back: 0 .. released-1 */
    int64_t returned; /* batches mp_loader_next has returned this epoch */
    int inflight;     /* fills running without the lock */
    bool stop;
    atomic_bool fence_failed; /* a fence wait failed: the batch may be wrong */
    double device_wait_s;     /* the consumer's waits on a slot's fence (its thread only) */
    mp_loader_stats stats;    /* under mu */
};

/* Samples in batch j of an epoch over `count` indices. */
static int64_t mp_loader_batch_n(const mp_loader *l, int64_t j, int64_t count)
{
    int64_t left = count - j * l->cfg.batch;
    return left < l->cfg.batch ? left : l->cfg.batch;
}

/* Builds batch j of (idx, count, epoch) into slot s's buffers, once the copies out of the slot
 * the consumer queued have finished, and keeps its status (and message) in the slot. Touches no
 * shared state but fence_failed. */
static void mp_loader_fill(mp_loader *l, mp_loader_slot *s, int64_t j, const int64_t *idx,
                           int64_t count, int64_t epoch)
{
    const mp_loader_config *c = &l->cfg;
    double t0 = mp_now();
    if (s->fence && c->fence_wait && c->fence_wait(s->fence) != MP_OK)
        atomic_store(&l->fence_failed, true);
    double t1 = mp_now();
    s->st = mp_dataset_batch_augmented(c->data, idx + j * c->batch,
                                       mp_loader_batch_n(l, j, count), c->mean, c->std, c->seed,
                                       epoch, c->pad, c->flip, c->dtype, s->x, s->y);
    if (s->st != MP_OK)
        snprintf(s->why, sizeof s->why, "%s", mp_error_message());
    s->fence_s = t1 - t0;
    s->fill_s = mp_now() - t1;
}

static bool mp_loader_claimable(const mp_loader *l)
{
    return l->issued < l->nbatches && l->issued < l->released + l->nslots;
}

/* Under mu, after slot s's fill: adds its costs to the stats. */
static void mp_loader_count(mp_loader *l, const mp_loader_slot *s)
{
    l->stats.fills++;
    l->stats.fill_s += s->fill_s;
    l->stats.fence_s += s->fence_s;
}

static void *mp_loader_worker(void *arg)
{
    mp_loader *l = arg;
    /* Background work below the step: on a core it shares with the step, the comm thread woken
     * for a bucket runs before a fill (docs/ARCHITECTURE.md §2). Linux keeps a nice value per
     * thread. A raise is allowed to anyone; were it refused, the batches would be the same. */
    if (l->cfg.nice > 0) {
        int now = nice(l->cfg.nice); /* -1 (also a valid value) if refused: nothing to do */
        (void)now;
    }
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !mp_loader_claimable(l))
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stop)
            break;
        int64_t j = l->issued++;
        const int64_t *idx = l->idx;
        int64_t count = l->count, epoch = l->epoch;
        mp_loader_slot *s = &l->slots[j % l->nslots];
        l->inflight++;
        pthread_mutex_unlock(&l->mu);
        mp_loader_fill(l, s, j, idx, count, epoch);
        pthread_mutex_lock(&l->mu);
        l->inflight--;
        mp_loader_count(l, s);
        s->n = mp_loader_batch_n(l, j, count);
        s->ready = j;
        pthread_cond_broadcast(&l->done);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Stops and joins the threads started so far and frees whatever open allocated. */
static void mp_loader_destroy(mp_loader *l)
{
    if (l->sync_ready) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->mu);
        for (int t = 0; t < l->nthreads; t++)
            pthread_join(l->threads[t], NULL);
        pthread_cond_destroy(&l->done);
        pthread_cond_destroy(&l->work);
        pthread_mutex_destroy(&l->mu);
    }
    if (l->slots) {
        for (int s = 0; s < l->nslots; s++) {
            if (l->cfg.host_free) {
                l->cfg.host_free(l->slots[s].x);
                l->cfg.host_free(l->slots[s].y);
            } else {
                mp_free(l->slots[s].x);
                mp_free(l->slots[s].y);
            }
            if (l->cfg.fence_free)
                l->cfg.fence_free(l->slots[s].fence);
        }
    }
    mp_free(l->slots);
    mp_free(l->threads);
    mp_free(l->mean);
    mp_free(l->std);
    mp_free(l);
}

static mp_status mp_loader_check(const mp_loader_config *c)
{
    if (!c || !c->data)
        return mp_fail(MP_EINTERNAL, "loader: no dataset");
    if (c->threads < 0)
        return mp_fail(MP_EINTERNAL, "loader: threads must be >= 0, got %d", c->threads);
    if (c->depth < 1 || c->depth == INT_MAX)
        return mp_fail(MP_EINTERNAL, "loader: depth must be in [1, %d), got %d", INT_MAX,
                       c->depth);
    if (c->batch < 1)
        return mp_fail(MP_EINTERNAL, "loader: batch must be >= 1, got %lld",
                       (long long)c->batch);
    if (c->pad < 0)
        return mp_fail(MP_EINTERNAL, "loader: pad must be >= 0, got %d", c->pad);
    if (c->nice < 0 || c->nice > 19)
        return mp_fail(MP_EINTERNAL, "loader: nice must be in [0, 19], got %d", c->nice);
    if (!c->mean || !c->std)
        return mp_fail(MP_EINTERNAL, "loader: no per-channel mean/std");
    if ((c->host_alloc == NULL) != (c->host_free == NULL))
        return mp_fail(MP_EINTERNAL, "loader: host_alloc and host_free go together");
    return MP_OK;
}

/* MP_EDATA unless the nslots batch buffers (x and y) of configuration *c fit memory. */
static mp_status mp_loader_check_memory(const mp_loader_config *c, int nslots)
{
    const mp_dataset *d = c->data;
    char what[200];
    int label_len = mp_dataset_label_len(d);
    snprintf(what, sizeof what, "%d prefetch buffers of a batch of %lld samples of %dx%dx%d %s "
                                "with %d label%s each",
             nslots, (long long)c->batch, d->h, d->w, d->c, mp_dtype_name(c->dtype), label_len,
             label_len == 1 ? "" : "s");
    int64_t sample[4] = {d->h, d->w, d->c, (int64_t)mp_dtype_size(c->dtype)}, sample_bytes;
    MP_TRY(mp_data_mem_check("data loader", what, 4, sample, &sample_bytes));
    int64_t sizes[3] = {nslots, c->batch,
                        sample_bytes + label_len * (int64_t)sizeof(int32_t)};
    return mp_data_mem_check("data loader", what, 3, sizes, NULL);
}

/* Initialises the mutex and condition variables; MP_EINTERNAL if one cannot be created. */
static mp_status mp_loader_sync_init(mp_loader *l)
{
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return mp_fail(MP_EINTERNAL, "loader: cannot create a mutex");
    if (pthread_cond_init(&l->work, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        return mp_fail(MP_EINTERNAL, "loader: cannot create a condition variable");
    }
    if (pthread_cond_init(&l->done, NULL) != 0) {
        pthread_cond_destroy(&l->work);
        pthread_mutex_destroy(&l->mu);
        return mp_fail(MP_EINTERNAL, "loader: cannot create a condition variable");
    }
    l->sync_ready = true;
    return MP_OK;
}

mp_status mp_loader_open(mp_loader **out, const mp_loader_config *c)
{
    *out = NULL;
    MP_TRY(mp_loader_check(c));
    const mp_dataset *d = c->data;
    int nslots = c->threads > 0 ? c->depth + 1 : 1;
    MP_TRY(mp_loader_check_memory(c, nslots));
    mp_loader *l = mp_alloc(sizeof *l, MP_MEM_DATA);
    l->cfg = *c;
    l->mean = mp_alloc((size_t)d->c * sizeof(double), MP_MEM_DATA);
    l->std = mp_alloc((size_t)d->c * sizeof(double), MP_MEM_DATA);
    memcpy(l->mean, c->mean, (size_t)d->c * sizeof(double));
    memcpy(l->std, c->std, (size_t)d->c * sizeof(double));
    l->cfg.mean = l->mean;
    l->cfg.std = l->std;

    l->nslots = nslots;
    size_t x_bytes = (size_t)c->batch * (size_t)d->h * (size_t)d->w * (size_t)d->c *
                     mp_dtype_size(c->dtype);
    l->slots = mp_alloc((size_t)l->nslots * sizeof *l->slots, MP_MEM_DATA);
    bool pinned_ok = true;
    for (int s = 0; s < l->nslots; s++) {
        l->slots[s].x = c->host_alloc ? c->host_alloc(x_bytes, MP_MEM_DATA)
                                      : mp_alloc(x_bytes, MP_MEM_DATA);
        pinned_ok = pinned_ok && l->slots[s].x;
        size_t y_bytes = (size_t)c->batch * (size_t)mp_dataset_label_len(d) * sizeof(int32_t);
        l->slots[s].y = c->host_alloc ? c->host_alloc(y_bytes, MP_MEM_DATA)
                                      : mp_alloc(y_bytes, MP_MEM_DATA);
        pinned_ok = pinned_ok && l->slots[s].y;
        l->slots[s].ready = -1;
    }

    mp_status st = pinned_ok ? mp_loader_sync_init(l) : MP_EINTERNAL; /* host_alloc said why */
    if (st != MP_OK) {
        mp_loader_destroy(l);
        return st;
    }
    if (c->threads > 0)
        l->threads = mp_alloc((size_t)c->threads * sizeof *l->threads, MP_MEM_DATA);
    for (int t = 0; t < c->threads; t++) {
        int rc = pthread_create(&l->threads[t], NULL, mp_loader_worker, l);
        if (rc != 0) {
            mp_loader_destroy(l);
            return mp_fail(MP_EINTERNAL, "loader: cannot start worker thread %d of %d: %s", t + 1,
                           c->threads, strerror(rc));
        }
        l->nthreads = t + 1;
    }
    *out = l;
    return MP_OK;
}

void mp_loader_start_epoch(mp_loader *l, const int64_t *idx, int64_t count, int64_t epoch)
{
    pthread_mutex_lock(&l->mu);
    l->nbatches = 0; /* no new claims; wait out the fills already running */
    while (l->inflight > 0)
        pthread_cond_wait(&l->done, &l->mu);
    l->idx = idx;
    l->count = count > 0 ? count : 0;
    l->epoch = epoch;
    l->nbatches = (l->count + l->cfg.batch - 1) / l->cfg.batch;
    l->issued = 0;
    l->released = 0;
    l->returned = 0;
    for (int s = 0; s < l->nslots; s++)
        l->slots[s].ready = -1;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
}

/* Under mu, before batch k is awaited in slot s: while the device may still read the slot's
 * last batch, waits (without the lock) on the slot's fence and counts the time as the
 * device's, not the input's; the worker waits on the same fence, then fills. The fence is
 * re-recorded only by the consumer, after its next call returns. */
static void device_wait(mp_loader *l, mp_loader_slot *s, int64_t k)
{
    if (s->ready == k || !s->fence || !l->cfg.fence_wait)
        return;
    void *fence = s->fence;
    pthread_mutex_unlock(&l->mu);
    double t0 = mp_now();
    if (l->cfg.fence_wait(fence) != MP_OK)
        atomic_store(&l->fence_failed, true);
    l->device_wait_s += mp_now() - t0;
    pthread_mutex_lock(&l->mu);
}

mp_status mp_loader_next(mp_loader *l, const void **x, const int32_t **y, int64_t *n)
{
    pthread_mutex_lock(&l->mu);
    int64_t k = l->returned;
    if (k >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return mp_fail(MP_EINTERNAL, "loader: no batch left in this epoch");
    }
    mp_loader_slot *s = &l->slots[k % l->nslots];
    if (l->nthreads == 0) {
        device_wait(l, s, k);
        mp_loader_fill(l, s, k, l->idx, l->count, l->epoch);
        mp_loader_count(l, s);
        s->n = mp_loader_batch_n(l, k, l->count);
        s->ready = k;
    } else {
        l->released = k; /* batch k - 1 comes back: exactly one more batch becomes claimable */
        pthread_cond_signal(&l->work);
        device_wait(l, s, k);
        while (s->ready != k)
            pthread_cond_wait(&l->done, &l->mu);
    }
    l->returned = k + 1;
    if (atomic_load(&l->fence_failed)) {
        pthread_mutex_unlock(&l->mu);
        return mp_fail(MP_EINTERNAL, "loader: waiting for the device to finish reading a batch "
                                     "buffer failed");
    }
    if (s->st != MP_OK) {
        pthread_mutex_unlock(&l->mu);
        return mp_fail(s->st, "%s", s->why);
    }
    *x = s->x;
    *y = s->y;
    *n = s->n;
    pthread_mutex_unlock(&l->mu);
    return MP_OK;
}

double mp_loader_device_wait_s(const mp_loader *l)
{
    return l->device_wait_s;
}

void mp_loader_stats_get(mp_loader *l, mp_loader_stats *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->stats;
    pthread_mutex_unlock(&l->mu);
}

void **mp_loader_fence(mp_loader *l)
{
    return &l->slots[(l->returned > 0 ? l->returned - 1 : 0) % l->nslots].fence;
}

void mp_loader_close(mp_loader *l)
{
    if (l)
        mp_loader_destroy(l);
}
