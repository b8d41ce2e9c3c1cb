/* The stand-in's CUDA streams and events (see nccl_standin_internal.h): each stream's queue is
 * run in order by a worker thread started with its first item; an event is complete once the
 * stream it was recorded on has finished what was queued before the record. A hung launch
 * leaves its stream stuck: nothing after it finishes. */
#include "tests/util/nccl_standin.h"
#include "tests/util/nccl_standin_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/nap.h"

cudaError_t __wrap_cudaSetDevice(int device);
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t __wrap_cudaStreamDestroy(cudaStream_t s);
cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t __wrap_cudaEventDestroy(cudaEvent_t e);
cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t __wrap_cudaEventQuery(cudaEvent_t e);
cudaError_t __wrap_cudaGetLastError(void);
cudaError_t __wrap_cudaPeekAtLastError(void);
const char *__wrap_cudaGetErrorString(cudaError_t rc);

#define POLL_S 20e-6

static _Thread_local cudaError_t last_error = cudaSuccess;

bool sk_stream_quitting(cudaStream_t s)
{
    pthread_mutex_lock(&s->mu);
    bool quit = s->quit;
    pthread_mutex_unlock(&s->mu);
    return quit;
}

static bool finished(cudaStream_t s, uint64_t seq)
{
    if (!s)
        return true;
    pthread_mutex_lock(&s->mu);
    bool done = s->done >= seq;
    pthread_mutex_unlock(&s->mu);
    return done;
}

/* Runs one item; false when it did not finish (abandoned, or it hung). */
static bool run_op(cudaStream_t s, sk_op *op)
{
    if (!op->colls) {
        while (!finished(op->wait_stream, op->wait_seq))
            if (sk_stream_quitting(s))
                return false;
            else
                mp_nap(POLL_S);
        return true;
    }
    for (const sk_coll *c = op->colls; c; c = c->next)
        if (!sk_run(c, op->comm, s))
            return false;
    if (op->fail) {
        snprintf(op->comm->last, sizeof op->comm->last, "stand-in: injected asynchronous "
                 "error in launch %ld", op->launch);
        atomic_store(&op->comm->async, ncclSystemError);
    }
    return !op->hang && !(op->fail && !op->fail_late);
}

static void free_op(sk_op *op)
{
    for (sk_coll *c = op->colls, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(op);
}

static void *worker(void *arg)
{
    cudaStream_t s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        sk_op *op = s->stuck ? NULL : s->head;
        bool quit = s->quit;
        pthread_mutex_unlock(&s->mu);
        if (quit)
            return NULL;
        if (!op) {
            mp_nap(POLL_S);
            continue;
        }
        bool ok = run_op(s, op);
        if (op->comm)
            atomic_fetch_sub(&op->comm->inflight, 1);
        pthread_mutex_lock(&s->mu);
        if (ok) {
            s->done++;
            s->head = op->next;
            if (!s->head)
                s->tail = NULL;
        } else {
            s->stuck = true; /* hung or abandoned: nothing after it finishes */
        }
        pthread_mutex_unlock(&s->mu);
        if (ok)
            free_op(op);
    }
}

void sk_stream_push(cudaStream_t s, sk_op *op)
{
    pthread_mutex_lock(&s->mu);
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    if (!s->worker_on && pthread_create(&s->worker, NULL, worker, s) == 0)
        s->worker_on = true;
    pthread_mutex_unlock(&s->mu);
}

cudaError_t __wrap_cudaSetDevice(int device)
{
    return device >= 0 ? cudaSuccess : (last_error = cudaErrorInvalidDevice);
}

cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    *s = calloc(1, sizeof **s);
    if (!*s)
        return last_error = cudaErrorMemoryAllocation;
    pthread_mutex_init(&(*s)->mu, NULL);
    return cudaSuccess;
}

/* Stops the worker (it drops what it runs) and frees the queue. */
cudaError_t __wrap_cudaStreamDestroy(cudaStream_t s)
{
    if (!s)
        return cudaSuccess;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_mutex_unlock(&s->mu);
    if (s->worker_on)
        pthread_join(s->worker, NULL);
    for (sk_op *op = s->head, *next; op; op = next) {
        next = op->next;
        free_op(op);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
    return cudaSuccess;
}

cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = calloc(1, sizeof **e);
    return *e ? cudaSuccess : (last_error = cudaErrorMemoryAllocation);
}

cudaError_t __wrap_cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    e->stream = s;
    if (s) {
        pthread_mutex_lock(&s->mu);
        e->seq = s->queued;
        pthread_mutex_unlock(&s->mu);
    }
    return cudaSuccess;
}

cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    if (!s || finished(e->stream, e->seq))
        return cudaSuccess;
    sk_op *op = calloc(1, sizeof *op);
    if (!op)
        return last_error = cudaErrorMemoryAllocation;
    op->wait_stream = e->stream;
    op->wait_seq = e->seq;
    sk_stream_push(s, op);
    return cudaSuccess;
}

/* Like the runtime, a query that finds the event not ready also leaves cudaErrorNotReady in the
 * thread's last-error slot (what mp_cuda_query clears). */
cudaError_t __wrap_cudaEventQuery(cudaEvent_t e)
{
    return finished(e->stream, e->seq) ? cudaSuccess : (last_error = cudaErrorNotReady);
}

cudaError_t __wrap_cudaGetLastError(void)
{
    cudaError_t rc = last_error;
    last_error = cudaSuccess;
    return rc;
}

cudaError_t __wrap_cudaPeekAtLastError(void)
{
    return last_error;
}

const char *__wrap_cudaGetErrorString(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess: return "no error";
    case cudaErrorNotReady: return "device not ready (stand-in)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (stand-in)";
    case cudaErrorMemoryAllocation: return "out of memory (stand-in)";
    default: return "a CUDA error (stand-in)";
    }
}

void *mp_standin_stream(void)
{
    cudaStream_t s = NULL;
    return __wrap_cudaStreamCreateWithFlags(&s, 0) == cudaSuccess ? s : NULL;
}
