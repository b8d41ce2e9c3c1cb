/* The background checkpoint writer (checkpoint_async.h). The snapshot is a copy of every distinct
 * block of the state's tensors in one host block, and copies of the structures the writer reads
 * (the parameter table, the optimizer, the buffers' names, the scaler) whose tensors point into
 * it; the writer thread runs mp_checkpoint_save and mp_checkpoint_prune on that copy, never on
 * the trainer. Invariant: while busy, only the writer touches the snapshot. */
#include "src/checkpoint_async.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/alloc.h"
#include "engine/clock.h"
#include "engine/trace.h"
#include "src/checkpoint.h"

enum { MAX_BLOCKS = 4 * MP_NGROUPS + MP_MAX_PARAMS };

struct mp_ckpt_async {
    const mp_ops *ops; /* whose host_alloc holds the snapshot */
    char *block;       /* the snapshot's bytes, cap of them */
    size_t cap;
    const void *src[MAX_BLOCKS]; /* the distinct blocks copied, and where each went */
    size_t off[MAX_BLOCKS];
    int nblocks;
    mp_params params;
    mp_optimizer opt;
    mp_named_tensor bufs[MP_MAX_PARAMS];
    mp_scaler_state scaler;
    mp_resume_point at;
    mp_train_state state;
    pthread_t thread;
    bool busy;               /* started and not yet reported (the main thread's view) */
    atomic_bool finished;    /* set by the writer as its last act */
    atomic_llong steps;      /* steps completed while busy */
    atomic_bool joining;     /* the main thread waits for the writer (poll with wait) */
    mp_status status;        /* the writer's result, with its message */
    char error[1024];
    double write_s;
    char path[1100];
};

mp_status mp_ckpt_async_create(mp_ckpt_async **a)
{
    *a = calloc(1, sizeof **a);
    if (!*a)
        return mp_fail(MP_EINTERNAL, "checkpoint.async: out of host memory");
    return MP_OK;
}

/* Where block `src` went in the snapshot, or NULL for a NULL src. MP_EINTERNAL (through *st) for
 * a block that was not copied: a state the snapshot does not know. */
static void *moved(mp_ckpt_async *a, const void *src, mp_status *st)
{
    if (!src)
        return NULL;
    for (int i = 0; i < a->nblocks; i++)
        if (a->src[i] == src)
            return a->block + a->off[i];
    *st = mp_fail(MP_EINTERNAL, "checkpoint.async: a tensor outside the snapshot");
    return NULL;
}

/* Lists the distinct blocks of s's tensors with their offsets; *total gets the bytes. */
static mp_status plan_blocks(mp_ckpt_async *a, const mp_train_state *s, size_t *total)
{
    size_t bytes[MAX_BLOCKS];
    a->nblocks = 0;
    for (int i = 0; i < s->ntensors; i++) {
        const mp_tensor *t = s->tensors[i];
        if (!t || !t->data)
            continue;
        size_t b = (size_t)mp_tensor_bytes(t);
        int j = 0;
        while (j < a->nblocks && a->src[j] != t->data)
            j++;
        if (j == a->nblocks) {
            if (a->nblocks == MAX_BLOCKS)
                return mp_fail(MP_EINTERNAL, "checkpoint.async: more than %d tensors",
                               MAX_BLOCKS);
            a->src[a->nblocks] = t->data;
            bytes[a->nblocks++] = 0;
        }
        if (b > bytes[j])
            bytes[j] = b;
    }
    size_t off = 0;
    for (int j = 0; j < a->nblocks; j++) {
        a->off[j] = off;
        off += (bytes[j] + 63) / 64 * 64;
    }
    *total = off;
    return MP_OK;
}

/* Copies s's blocks into the snapshot (grown when too small) and the structures around them. */
static mp_status snapshot(mp_ckpt_async *a, const mp_train_state *s, const mp_resume_point *at)
{
    size_t total = 0;
    MP_TRY(plan_blocks(a, s, &total));
    if (total + 1 > a->cap || a->ops != s->ops) {
        if (a->block)
            a->ops->host_free(a->block);
        a->ops = s->ops;
        a->cap = 0;
        a->block = s->ops->host_alloc(total + 1, MP_MEM_WORKSPACE);
        if (!a->block)
            return mp_fail(MP_EINTERNAL, "checkpoint.async: cannot allocate a %.1f MB host "
                           "snapshot", (double)total / 1e6);
        a->cap = total + 1;
    }
    for (int i = 0; i < s->ntensors; i++) {
        const mp_tensor *t = s->tensors[i];
        if (!t || !t->data)
            continue;
        mp_status st = MP_OK;
        void *dst = moved(a, t->data, &st);
        MP_TRY(st);
        MP_TRY(s->ops->copy_out(dst, t->data, (size_t)mp_tensor_bytes(t)));
    }
    mp_status st = MP_OK;
    a->params = *s->params;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &a->params.groups[k];
        g->model.data = moved(a, g->model.data, &st);
        g->master.data = moved(a, g->master.data, &st);
        g->grad.data = NULL; /* not saved */
    }
    a->opt = *s->opt;
    for (int k = 0; k < MP_NGROUPS; k++) {
        a->opt.slot1[k].data = moved(a, a->opt.slot1[k].data, &st);
        a->opt.slot2[k].data = moved(a, a->opt.slot2[k].data, &st);
    }
    for (int j = 0; j < s->nbufs; j++) {
        a->bufs[j] = s->bufs[j];
        a->bufs[j].t.data = moved(a, s->bufs[j].t.data, &st);
    }
    MP_TRY(st);
    a->scaler = *s->scaler;
    a->at = *at;
    a->state = *s;
    a->state.model = NULL; /* the writer reads params, never the model */
    a->state.params = &a->params;
    a->state.opt = &a->opt;
    a->state.bufs = a->bufs;
    a->state.scaler = &a->scaler;
    a->state.start = NULL;
    a->state.ntensors = a->state.noptim = 0; /* already on the host: nothing to swap in */
    return MP_OK;
}

/* Test hook: with MPDIST_TEST_CKPT_WAIT_STEPS=N the writer starts writing only once the main
 * thread has counted N steps or waits for it, so that a test sees steps run during a save however
 * slow a step is; a main thread that blocked on the writer would count none. */
static void wait_for_steps(mp_ckpt_async *a)
{
    const char *n = getenv("MPDIST_TEST_CKPT_WAIT_STEPS");
    if (!n)
        return;
    while (atomic_load(&a->steps) < atoll(n) && !atomic_load(&a->joining))
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
}

static void *writer(void *arg)
{
    mp_ckpt_async *a = arg;
    wait_for_steps(a);
    double t0 = mp_now();
    mp_status st = mp_checkpoint_save(&a->state, &a->at, a->path, sizeof a->path);
    a->write_s = mp_now() - t0;
    mp_trace_span("checkpoint write", "checkpoint", MP_TRACE_IO, t0, t0 + a->write_s,
                  a->at.step);
    if (st == MP_OK)
        mp_checkpoint_prune(&a->state, a->at.step);
    else {
        snprintf(a->error, sizeof a->error, "%s", mp_error_message());
        a->path[0] = '\0';
    }
    a->status = st;
    atomic_store(&a->finished, true);
    return NULL;
}

mp_status mp_ckpt_async_start(mp_ckpt_async *a, const mp_train_state *s,
                              const mp_resume_point *at)
{
    if (a->busy)
        return mp_fail(MP_EINTERNAL, "checkpoint.async: a save is already in flight");
    MP_TRY(snapshot(a, s, at));
    atomic_store(&a->finished, false);
    atomic_store(&a->steps, 0);
    atomic_store(&a->joining, false);
    /* The writer starts with every signal blocked, so that SIGTERM and SIGUSR1 reach the
     * training thread that agrees on them (src/signals.c). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&a->thread, NULL, writer, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return mp_fail(MP_EINTERNAL, "checkpoint.async: cannot start the writer thread (%s)",
                       strerror(rc));
    a->busy = true;
    return MP_OK;
}

bool mp_ckpt_async_busy(const mp_ckpt_async *a) { return a && a->busy; }

void mp_ckpt_async_step(mp_ckpt_async *a)
{
    if (a && a->busy && !atomic_load(&a->finished))
        atomic_fetch_add(&a->steps, 1);
}

mp_status mp_ckpt_async_poll(mp_ckpt_async *a, bool wait, bool *done, mp_ckpt_done *d)
{
    *done = false;
    if (!a || !a->busy || (!wait && !atomic_load(&a->finished)))
        return MP_OK;
    atomic_store(&a->joining, true);
    pthread_join(a->thread, NULL);
    a->busy = false;
    *done = true;
    *d = (mp_ckpt_done){.step = a->at.step, .write_s = a->write_s,
                        .steps_during = atomic_load(&a->steps)};
    snprintf(d->path, sizeof d->path, "%s", a->path);
    if (a->status != MP_OK)
        return mp_fail(a->status, "%s", a->error);
    return MP_OK;
}

void mp_ckpt_async_free(mp_ckpt_async *a)
{
    if (!a)
        return;
    bool done;
    mp_ckpt_done d;
    if (mp_ckpt_async_poll(a, true, &done, &d) != MP_OK)
        fprintf(stderr, "mpdist: %s\n", mp_error_message());
    if (a->block)
        a->ops->host_free(a->block);
    free(a);
}
