/* The MPI transport (see transport_mpi.h). Invariants: tickets are handed out in start order
 * and the worker finishes them in that order, so `completed` is the highest finished ticket;
 * after the first failure every later collective is finished unexecuted with the same status
 * (the communicator is unusable), and waiters see the first failure's message. */
#include "comm/transport_mpi.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/clock.h"
#include "engine/trace.h"

#define QUEUE_CAP MP_TRANSPORT_DEPTH

typedef struct mpi_transport {
    const mp_peers *comm; /* its half types and ops */
    MPI_Comm world;      /* where the collectives run */
    bool threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    mp_coll queue[QUEUE_CAP];
    double queued[QUEUE_CAP]; /* when each was started (host clock), with a trace on */
    uint64_t issued, completed; /* tickets: queue holds issued - completed entries */
    bool stop;
    mp_status failed;
    char message[1024];
    int *counts; /* 2 x the ranks: a block collective's counts, then its displacements; reused,
                    as one collective runs at a time (the worker's, or the caller's inline) */
} mpi_transport;

/* MPI's datatype and reduction for op->dtype and op->op: half types travel as two-byte words
 * summed by comm/halfsum.c's ops (in FP32, rounded once). */
static mp_status mpi_type_op(const mp_peers *c, const mp_coll *op, MPI_Datatype *type,
                             MPI_Op *mop)
{
    switch (op->dtype) {
    case MP_F32: *type = MPI_FLOAT; break;
    case MP_F64: *type = MPI_DOUBLE; break;
    default: *type = c->half_word; break;
    }
    if (op->dtype == MP_F16 || op->dtype == MP_BF16) {
        if (op->op != MP_REDOP_SUM)
            return mp_fail(MP_EINTERNAL, "%s: only sums of half types are supported", op->what);
        *mop = op->dtype == MP_F16 ? c->sum_f16 : c->sum_bf16;
    } else {
        *mop = op->op == MP_REDOP_SUM ? MPI_SUM : MPI_MAX;
    }
    return MP_OK;
}

static mp_status run_allreduce(const mp_peers *c, MPI_Comm world, const mp_coll *op)
{
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    MP_TRY(mpi_type_op(c, op, &type, &mop));
    char *p = op->buf;
    size_t n = op->count, elem = mp_dtype_size(op->dtype);
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, chunk, type, mop, world));
        p += (size_t)chunk * elem;
        n -= (size_t)chunk;
    }
    return MP_OK;
}

/* The block collectives with counts[r] elements at displs[r] for rank r (its piece): the pieces
 * tile buf in rank order, so they are where MPI's in-place MPI_Allgatherv reads them, and MPI's
 * in-place MPI_Reduce_scatter leaves a rank's sum at the start of buf, from where it moves to
 * the rank's piece (where NCCL leaves it); the rest of buf, which MPI may have used as scratch,
 * is zeroed (transport.h). */
static mp_status run_pieces(const mp_peers *c, MPI_Comm world, const mp_coll *op,
                            const int *counts, const int *displs)
{
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    MP_TRY(mpi_type_op(c, op, &type, &mop));
    if (op->kind == MP_COLL_ALLGATHER) {
        MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->buf, counts, displs,
                                 type, world));
        return MP_OK;
    }
    MPI_CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, op->buf, counts, type, mop, world));
    size_t elem = mp_dtype_size(op->dtype), all = op->count * elem;
    size_t lo = (size_t)displs[c->rank] * elem, n = (size_t)counts[c->rank] * elem;
    char *buf = op->buf;
    if (lo > 0 && n > 0)
        memmove(buf + lo, buf, n);
    memset(buf, 0, lo);
    memset(buf + lo + n, 0, all - lo - n);
    return MP_OK;
}

/* A block collective in parts of at most INT_MAX elements (MPI's counts are ints), each itself
 * a block collective over its slice of buf; counts: scratch of 2 x the ranks ints. */
static mp_status run_blocks(const mp_peers *c, MPI_Comm world, const mp_coll *op, int *counts)
{
    int *displs = counts + c->size;
    size_t elem = mp_dtype_size(op->dtype);
    mp_status st = MP_OK;
    for (size_t off = 0; off < op->count && st == MP_OK; off += (size_t)INT_MAX) {
        mp_coll part = *op;
        part.buf = (char *)op->buf + off * elem;
        part.count = op->count - off < (size_t)INT_MAX ? op->count - off : (size_t)INT_MAX;
        part.base = op->base + off;
        for (int r = 0; r < c->size; r++) {
            size_t lo, n;
            mp_coll_piece(&part, r, &lo, &n);
            counts[r] = (int)n;
            displs[r] = (int)lo;
        }
        st = run_pieces(c, world, &part, counts, displs);
    }
    return st;
}

static mp_status run_bcast(MPI_Comm world, const mp_coll *op)
{
    char *p = op->buf;
    size_t n = op->count;
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        MPI_CHECK(MPI_Bcast(p, chunk, MPI_BYTE, op->root, world));
        p += chunk;
        n -= (size_t)chunk;
    }
    return MP_OK;
}

static mp_status run(const mpi_transport *t, const mp_coll *op)
{
    mp_status st = op->kind == MP_COLL_BCAST       ? run_bcast(t->world, op)
                   : op->kind == MP_COLL_ALLREDUCE ? run_allreduce(t->comm, t->world, op)
                                                   : run_blocks(t->comm, t->world, op, t->counts);
    if (st != MP_OK)
        return mp_fail(st, "%s failed: %s", op->what, mp_error_message());
    return MP_OK;
}

/* Marks the oldest queued collective finished with status st (locked); the caller wakes the
 * waiters on `done` once it has unlocked. */
static void finish_locked(mpi_transport *t, mp_status st)
{
    if (st != MP_OK && t->failed == MP_OK) {
        t->failed = st;
        snprintf(t->message, sizeof t->message, "%s", mp_error_message());
    }
    t->completed++;
}

static void *worker(void *arg)
{
    mpi_transport *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stop && t->completed == t->issued)
            pthread_cond_wait(&t->work, &t->mu);
        if (t->completed == t->issued)
            break; /* stopping, queue drained */
        mp_coll op = t->queue[t->completed % QUEUE_CAP];
        double queued = t->queued[t->completed % QUEUE_CAP];
        bool skip = t->failed != MP_OK;
        pthread_mutex_unlock(&t->mu);
        mp_status st = skip ? MP_OK : run(t, &op);
        if (mp_trace_on()) /* from its start by the caller to its end */
            mp_trace_span(op.what, "collective", MP_TRACE_COMM, queued, mp_now(), -1);
        pthread_mutex_lock(&t->mu);
        finish_locked(t, st);
        pthread_mutex_unlock(&t->mu);
        pthread_cond_broadcast(&t->done); /* unlocked: see start */
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static mp_status start(void *self, const mp_coll *c, uint64_t *ticket)
{
    mpi_transport *t = self;
    if (!t->threaded) {
        double t0 = mp_trace_on() ? mp_now() : 0.0;
        mp_status st = t->failed == MP_OK ? run(t, c) : MP_OK;
        if (mp_trace_on())
            mp_trace_span(c->what, "collective", MP_TRACE_COMM, t0, mp_now(), -1);
        t->issued++;
        *ticket = t->issued;
        finish_locked(t, st);
        return MP_OK;
    }
    pthread_mutex_lock(&t->mu);
    while (t->issued - t->completed >= QUEUE_CAP)
        pthread_cond_wait(&t->done, &t->mu); /* full: the worker is making room */
    t->queue[t->issued % QUEUE_CAP] = *c;
    t->queued[t->issued % QUEUE_CAP] = mp_trace_on() ? mp_now() : 0.0;
    *ticket = ++t->issued;
    pthread_mutex_unlock(&t->mu);
    /* Signalled after the unlock (the worker rechecks under the lock, so nothing is lost): woken
     * with the lock still held, the worker would block on it at once, and on a core it shares
     * with this thread and the loader's the scheduler may run a batch fill before this thread
     * gets back to unlock, delaying the collective's start by that fill
     * (bench/results/box-scaling/loader-nice-2026-11-29/). */
    pthread_cond_signal(&t->work);
    return MP_OK;
}

static struct timespec deadline_after(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(seconds * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

static mp_status wait_for(void *self, uint64_t ticket, double seconds, bool *done)
{
    mpi_transport *t = self;
    struct timespec until = deadline_after(seconds);
    pthread_mutex_lock(&t->mu);
    int rc = 0;
    while (t->completed < ticket && t->failed == MP_OK && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&t->done, &t->mu, &until);
    mp_status st = t->failed;
    *done = t->completed >= ticket;
    if (st != MP_OK)
        mp_fail(st, "%s", t->message);
    pthread_mutex_unlock(&t->mu);
    return st;
}

static bool pending(void *self, mp_coll *c, uint64_t *ticket)
{
    mpi_transport *t = self;
    pthread_mutex_lock(&t->mu);
    bool any = t->completed < t->issued;
    if (any) {
        *c = t->queue[t->completed % QUEUE_CAP];
        *ticket = t->completed + 1;
    }
    pthread_mutex_unlock(&t->mu);
    return any;
}

static void close_transport(void *self)
{
    mpi_transport *t = self;
    if (t->threaded) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_signal(&t->work);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
    }
    pthread_cond_destroy(&t->work);
    pthread_cond_destroy(&t->done);
    pthread_mutex_destroy(&t->mu);
    free(t->counts);
    free(t);
}

static const mp_transport_ops mpi_ops = {.name = "mpi",
                                         .start = start,
                                         .wait = wait_for,
                                         .pending = pending,
                                         .close = close_transport};

mp_status mp_transport_mpi_open(mp_transport *tx, const mp_peers *c, MPI_Comm world)
{
    mpi_transport *t = calloc(1, sizeof *t);
    int *counts = calloc(2 * (size_t)c->size, sizeof *counts);
    if (!t || !counts) {
        free(t);
        free(counts);
        return mp_fail(MP_EINTERNAL, "comm: out of host memory for the transport");
    }
    t->counts = counts;
    t->comm = c;
    t->world = world;
    t->threaded = c->thread_level >= MPI_THREAD_SERIALIZED;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->work, NULL);
    pthread_cond_init(&t->done, NULL);
    if (t->threaded && pthread_create(&t->thread, NULL, worker, t) != 0) {
        t->threaded = false;
        close_transport(t);
        return mp_fail(MP_EINTERNAL, "comm: cannot start the communication thread");
    }
    tx->ops = &mpi_ops;
    tx->self = t;
    return MP_OK;
}
