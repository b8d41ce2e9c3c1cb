/* The stand-in's CUDA streams and events (see nccl_standin_internal.h): each stream's queue is
 * run in order by a worker thread started with its first item; an event is complete once the
 * stream it was recorded on has finished what was queued before the record. A hung launch
 * leaves its stream stuck: nothing after it finishes. Captures follow CUDA's rules where the
 * transport could break them: a wait inside a capture on an event recorded outside it, a query
 * of an event recorded in a capture, and a capture that ends with a stream not joined back all
 * fail. */
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
    if (op->graph) {
        for (sk_op *item = op->graph->head; item; item = item->next)
            if (!run_op(s, item))
                return false;
        return true;
    }
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
    if (op->graph) { /* the graph's items stay for its next launch */
        free(op);
        return;
    }
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

/* The index of stream s in graph g, or -1. */
static int graph_stream(const sk_graph *g, cudaStream_t s)
{
    for (int i = 0; i < g->nstreams; i++)
        if (g->streams[i] == s)
            return i;
    return -1;
}

bool sk_stream_push(cudaStream_t s, sk_op *op)
{
    pthread_mutex_lock(&s->mu);
    op->next = NULL;
    sk_graph *g = s->capture;
    if (g) {
        if (g->tail)
            g->tail->next = op;
        else
            g->head = op;
        g->tail = op;
        g->items[graph_stream(g, s)]++;
        if (op->comm)
            g->comm = op->comm;
        pthread_mutex_unlock(&s->mu);
        return true;
    }
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    if (!s->worker_on && pthread_create(&s->worker, NULL, worker, s) == 0)
        s->worker_on = true;
    pthread_mutex_unlock(&s->mu);
    return false;
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
    e->graph = s ? s->capture : NULL;
    if (e->graph) {
        e->seq = e->graph->items[graph_stream(e->graph, s)];
        return cudaSuccess;
    }
    if (s) {
        pthread_mutex_lock(&s->mu);
        e->seq = s->queued;
        pthread_mutex_unlock(&s->mu);
    }
    return cudaSuccess;
}

/* A wait that involves a capture: s joins the capture of the event, or the origin notes how far
 * it joined e's stream back; a wait across captures or on an ended one fails. */
static cudaError_t capture_wait(cudaStream_t s, cudaEvent_t e)
{
    sk_graph *g = e->graph ? e->graph : s->capture;
    if (!e->graph) {
        g->invalid = "a wait inside the capture on an event recorded outside it";
        return last_error = cudaErrorStreamCaptureIsolation;
    }
    if (g->ended || (s->capture && s->capture != g))
        return last_error = cudaErrorStreamCaptureIsolation;
    if (!s->capture) {
        if (g->nstreams == SK_GRAPH_STREAMS)
            return last_error = cudaErrorNotSupported;
        g->streams[g->nstreams++] = s;
        s->capture = g;
        return cudaSuccess;
    }
    int from = graph_stream(g, e->stream);
    if (s == g->streams[0] && e->seq > g->joined[from])
        g->joined[from] = e->seq;
    return cudaSuccess;
}

cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    if (s && (e->graph || s->capture))
        return capture_wait(s, e);
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
    if (e->graph) /* recorded in a capture: nothing to query */
        return last_error = cudaErrorStreamCaptureUnsupported;
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
    case cudaErrorStreamCaptureIsolation:
        return "dependency created on uncaptured work in another stream (stand-in)";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing (stand-in)";
    default: return "a CUDA error (stand-in)";
    }
}

void *mp_standin_stream(void)
{
    cudaStream_t s = NULL;
    return __wrap_cudaStreamCreateWithFlags(&s, 0) == cudaSuccess ? s : NULL;
}

void mp_standin_capture_begin(void *stream)
{
    cudaStream_t s = stream;
    sk_graph *g = calloc(1, sizeof *g);
    if (!g)
        abort();
    g->streams[0] = s;
    g->nstreams = 1;
    s->capture = g;
}

void *mp_standin_capture_end(void *stream)
{
    cudaStream_t s = stream;
    sk_graph *g = s->capture;
    if (!g || g->streams[0] != s) {
        fprintf(stderr, "nccl stand-in: capture_end on a stream that did not begin one\n");
        return NULL;
    }
    for (int i = 0; i < g->nstreams; i++)
        g->streams[i]->capture = NULL;
    g->ended = true;
    for (int i = 1; i < g->nstreams && !g->invalid; i++)
        if (g->joined[i] < g->items[i])
            g->invalid = "a stream that joined the capture was not joined back";
    if (g->invalid) {
        fprintf(stderr, "nccl stand-in: the capture failed: %s\n", g->invalid);
        mp_standin_graph_free(g);
        return NULL;
    }
    return g;
}

bool mp_standin_graph_launch(void *graph, void *stream)
{
    sk_graph *g = graph;
    sk_op *op = calloc(1, sizeof *op);
    if (!op)
        return false;
    op->graph = g;
    op->comm = g->comm;
    if (op->comm)
        atomic_fetch_add(&op->comm->inflight, 1);
    sk_stream_push(stream, op);
    return true;
}

void mp_standin_graph_free(void *graph)
{
    sk_graph *g = graph;
    if (!g)
        return;
    for (sk_op *op = g->head, *next; op; op = next) {
        next = op->next;
        free_op(op);
    }
    free(g);
}
