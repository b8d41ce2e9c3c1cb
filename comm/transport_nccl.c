/* The NCCL transport (see transport_nccl.h). Invariants: tickets are handed out in start order
 * and the collectives run in that order on one stream, so when a collective's `done` event has
 * completed every earlier one has too; `completed` is the highest ticket seen done, and
 * issued - completed <= MP_TRANSPORT_DEPTH (the communicator waits for the oldest before it
 * starts more), so ring slot ticket % MP_TRANSPORT_DEPTH belongs to `ticket` while it is
 * outstanding. Every NCCL call on the communicator and every access to the ring and counters is
 * made under `mu`; ncclCommAbort frees the communicator, so `aborted` implies `failed` and no
 * NCCL call follows. After the first failure every later call returns it. The watchdog starts
 * with the first collective (after the communicator has stored the transport, which the
 * watchdog's abort path reads) and is joined by close before anything is freed; between checks
 * it answers the census of other ranks' watchdogs (nccl_census.h), and on a timeout it takes one
 * to name the ranks that did not arrive. While the compute stream captures a graph (`capturing`),
 * collectives are captured, not issued: they take no ring slot, their tickets count the capture's
 * own fork and join events (cap_fork, cap_done), and a CUDA failure there fails the capture alone
 * (CUDA then refuses the graph), an NCCL one the transport; a launch of such a graph takes one
 * ring slot whose events are recorded on the compute stream around it, after every collective
 * issued before it, so the slots still finish in ticket order. */
#include "comm/transport_nccl.h"

#ifdef MP_HAVE_NCCL

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/gpu_check.h"
#include "comm/nap.h"
#include "comm/nccl_census.h"
#include "comm/nccl_util.h"
#include "engine/clock.h"
#include "engine/trace.h"

#define RING MP_TRANSPORT_DEPTH
#define POLL_S 100e-6 /* the host's polling of events and of NCCL's state */
#define WATCH_S 10e-3 /* the watchdog's period */
#define GRACE_S 2.0   /* how long a census waits for answers */
#define MISSED_S 1.0  /* a gap this long between two periods: this process was not running */

typedef struct nccl_slot {
    mp_coll coll;
    cudaEvent_t start; /* on the compute stream: the buffer is written */
    cudaEvent_t done;  /* on the communication stream: the collective finished */
    double t_start;    /* mp_now() when it was started */
    double limit_s;    /* comm.timeout_s then */
    int64_t step;      /* the training step then */
} nccl_slot;

typedef struct nccl_transport {
    const mp_peers *comm;
    int rank, device;
    char host[MP_HOST_MAX];
    ncclComm_t nccl;
    cudaStream_t stream, compute; /* the communication stream (owned), the caller's */
    nccl_slot ring[RING];
    int nevents; /* events created, slot by slot (start, then done) */
    pthread_mutex_t mu;
    pthread_t thread;
    bool watching, stop; /* the watchdog runs; close asked it to stop */
    uint64_t issued, completed;
    bool aborted; /* ncclCommAbort was called */
    bool ending;  /* the watchdog saw a failure and is ending the job */
    mp_status failed;
    char message[1024];
    mp_census census;
    bool capturing;            /* collectives are captured (mp_transport_ops.capture) */
    int captured;              /* how many this capture holds */
    int forked;                /* forks recorded (captured, or one more when the last failed) */
    cudaEvent_t cap_fork[RING], cap_done[RING]; /* theirs (made at the first capture) */
    int ncap;                  /* events made, fork then done, index by index */
} nccl_transport;

/* Records the first failure (st with the calling thread's last message) and returns it with
 * that failure's message (locked). */
static mp_status fail_locked(nccl_transport *t, mp_status st)
{
    if (t->failed == MP_OK) {
        t->failed = st;
        snprintf(t->message, sizeof t->message, "%s", mp_error_message());
    }
    return mp_fail(t->failed, "%s", t->message);
}

/* Waits, polling, up to limit_s for the non-blocking communicator to finish the call that
 * returned rc (locked). MP_ECOMM naming `doing` when it failed or did not finish in time. */
static mp_status settle_locked(nccl_transport *t, ncclResult_t rc, double limit_s,
                               const char *doing)
{
    return mp_nccl_settle(t->nccl, rc, limit_s, t->rank, t->host, doing);
}

/* The oldest collective not seen done (locked); NULL when none is outstanding. */
static const nccl_slot *oldest_locked(const nccl_transport *t)
{
    return t->completed < t->issued ? &t->ring[(t->completed + 1) % RING] : NULL;
}

/* Brings `completed` up to date with the done events, then checks NCCL's asynchronous state
 * (locked, not failed). With log.trace, each collective seen done becomes a span from its start
 * to now: its end as the host first saw it (polled every POLL_S while waited for, every WATCH_S
 * by the watchdog), with nothing synchronised for it. */
static mp_status check_locked(nccl_transport *t)
{
    for (const nccl_slot *s; (s = oldest_locked(t)) != NULL; t->completed++) {
        cudaError_t rc = mp_cuda_query(cudaEventQuery(s->done));
        if (rc == cudaErrorNotReady)
            break;
        if (rc != cudaSuccess)
            return mp_check_fail(MP_ECOMM, "cuda", "cudaEventQuery(done)", __FILE__, __LINE__,
                                 cudaGetErrorString(rc));
        if (mp_trace_on())
            mp_trace_span(s->coll.what, "collective", MP_TRACE_COMM, s->t_start, mp_now(),
                          s->step);
    }
    ncclResult_t err = mp_nccl_state(t->nccl);
    if (err == ncclSuccess || err == ncclInProgress)
        return MP_OK;
    const nccl_slot *s = oldest_locked(t); /* else the last one, finished before the error */
    const nccl_slot *last = t->issued ? &t->ring[t->issued % RING] : NULL;
    if (!s && !last)
        return mp_fail(MP_ECOMM, "comm: [rank %d @ %s] NCCL failed before any collective: "
                       "%s (%s)", t->rank, t->host, ncclGetErrorString(err),
                       ncclGetLastError(t->nccl));
    return mp_fail(MP_ECOMM, "comm: [rank %d @ %s] NCCL failed %s %s at step %lld: %s (%s)",
                   t->rank, t->host, s ? "in" : "after", s ? s->coll.what : last->coll.what,
                   (long long)(s ? s->step : last->step), ncclGetErrorString(err),
                   ncclGetLastError(t->nccl));
}

/* MP_ECOMM when the oldest outstanding collective has run longer than its limit (locked); the
 * census's finding is appended to the message later. */
static mp_status overdue_locked(const nccl_transport *t)
{
    const nccl_slot *s = oldest_locked(t);
    double waited = s ? mp_now() - s->t_start : 0.0;
    if (!s || waited <= s->limit_s)
        return MP_OK;
    return mp_fail(MP_ECOMM, "comm: [rank %d @ %s] timed out after %g s (comm.timeout_s) in %s "
                   "at step %lld (NCCL)", t->rank, t->host, s->limit_s, s->coll.what,
                   (long long)s->step);
}

/* Time this process did not run (stopped, then continued) is not the collectives' (locked). */
static void forgive_locked(nccl_transport *t, double gap)
{
    for (uint64_t k = t->completed + 1; k <= t->issued; k++)
        t->ring[k % RING].t_start += gap;
}

/* Where this rank is, for the census (locked); `late`: its oldest is past its limit. */
static mp_census_where where_locked(const nccl_transport *t, bool late)
{
    mp_census_where w = {.oldest = t->completed < t->issued ? t->completed + 1 : 0,
                         .issued = t->issued,
                         .step = *t->comm->step,
                         .overdue = late};
    return w;
}

/* The table's abort: ncclCommAbort once, from any thread; later calls fail with a message. */
static void abort_transport(void *self)
{
    nccl_transport *t = self;
    pthread_mutex_lock(&t->mu);
    if (!t->aborted && t->nccl)
        ncclCommAbort(t->nccl);
    t->aborted = true;
    if (t->failed == MP_OK) {
        t->failed = MP_ECOMM;
        snprintf(t->message, sizeof t->message, "comm: [rank %d @ %s] the NCCL communicator "
                 "was aborted", t->rank, t->host);
    }
    pthread_mutex_unlock(&t->mu);
}

/* Ends the job from the watchdog after the failure in t->message: after a timeout, the census
 * first names the ranks that did not arrive, and a rank that is not the census's reporter waits
 * for the reporter to end the job (saying it itself only if that does not happen). */
static void end_job(nccl_transport *t, bool late, const mp_census_where *me)
{
    if (late) {
        char found[600];
        bool report = mp_census_take(&t->census, me, GRACE_S, found, sizeof found);
        pthread_mutex_lock(&t->mu);
        size_t n = strlen(t->message);
        snprintf(t->message + n, sizeof t->message - n, "; %s", found);
        pthread_mutex_unlock(&t->mu);
        if (!report)
            mp_nap(2 * GRACE_S);
    }
    fprintf(stderr, "mpdist: error: %s\n", t->message);
    fflush(stderr);
    abort_transport(t);
    t->comm->abort(t->comm->owner, MP_ECOMM);
}

/* The watchdog thread: every WATCH_S it checks NCCL's asynchronous state and how long the
 * oldest outstanding collective has run, and answers census queries; on a failure it ends
 * every rank with exit code 6 and one line (end_job). Once a caller has seen a failure the
 * caller reports it, and the watchdog only waits for close. */
static void *watchdog(void *arg)
{
    nccl_transport *t = arg;
    cudaSetDevice(t->device); /* the events belong to it */
    for (double last = mp_now();;) {
        mp_nap(WATCH_S);
        double now = mp_now();
        pthread_mutex_lock(&t->mu);
        if (now - last > MISSED_S)
            forgive_locked(t, now - last - WATCH_S);
        last = now;
        bool stop = t->stop, late = false;
        mp_status st = MP_OK;
        if (!stop && t->failed == MP_OK) {
            st = check_locked(t);
            if (st == MP_OK)
                late = (st = overdue_locked(t)) != MP_OK;
            if (st != MP_OK) {
                fail_locked(t, st);
                t->ending = true;
            }
        }
        mp_census_where me = where_locked(t, late);
        pthread_mutex_unlock(&t->mu);
        if (stop)
            return NULL;
        if (st != MP_OK)
            end_job(t, late, &me);
        mp_census_serve(&t->census, &me);
    }
}

/* Enqueues c on the communication stream after the work queued on the compute stream so far
 * (recording `fork` there) and records `done` after it (locked): an eager collective's slot
 * events, or a captured one's. MP_ECOMM when NCCL failed or did not settle, MP_EINTERNAL for a
 * CUDA call. */
static mp_status enqueue_locked(nccl_transport *t, const mp_coll *c, cudaEvent_t fork,
                                cudaEvent_t done, const char *verb)
{
    CUDA_CHECK(cudaEventRecord(fork, t->compute));
    CUDA_CHECK(cudaStreamWaitEvent(t->stream, fork, 0));
    char doing[128];
    snprintf(doing, sizeof doing, "%s %s", verb, c->what);
    ncclResult_t rc = mp_nccl_enqueue(t->nccl, t->stream, t->comm->rank, t->comm->size, c);
    MP_TRY(settle_locked(t, rc, *t->comm->timeout_s, doing));
    CUDA_CHECK(cudaEventRecord(done, t->stream));
    return MP_OK;
}

/* The ring slot the next ticket takes, in *s (locked); MP_EINTERNAL when RING are outstanding
 * (the communicator waits for the oldest first, so this is a broken invariant). */
static mp_status next_slot_locked(nccl_transport *t, const char *what, nccl_slot **s)
{
    MP_TRY(check_locked(t));
    if (t->issued - t->completed >= RING)
        return mp_fail(MP_EINTERNAL, "comm: %s: %d NCCL collectives are in flight already",
                       what, RING);
    *s = &t->ring[(t->issued + 1) % RING];
    return MP_OK;
}

/* Slot s, its events recorded, becomes ticket *ticket for collective c (locked). */
static void issue_locked(nccl_transport *t, nccl_slot *s, const mp_coll *c, uint64_t *ticket)
{
    s->coll = *c;
    s->t_start = mp_now();
    s->limit_s = *t->comm->timeout_s;
    s->step = *t->comm->step;
    *ticket = ++t->issued;
}

static mp_status start_locked(nccl_transport *t, const mp_coll *c, uint64_t *ticket)
{
    nccl_slot *s = NULL;
    MP_TRY(next_slot_locked(t, c->what, &s));
    MP_TRY(enqueue_locked(t, c, s->start, s->done, "enqueueing"));
    issue_locked(t, s, c, ticket);
    return MP_OK;
}

/* A collective captured into the compute stream's graph (locked, capturing): forked from the
 * compute stream, enqueued on the communication stream, its end an event the compute stream can
 * wait on inside the graph. Nothing is queried here: the capturing thread may not. A CUDA call
 * that fails fails the capture alone; NCCL's failure (or an enqueue that does not settle within
 * comm.timeout_s: NCCL's background launch may still be under way) fails the transport, since
 * the communicator cannot be trusted after it. */
static mp_status capture_locked(nccl_transport *t, const mp_coll *c, uint64_t *ticket)
{
    if (t->captured >= RING)
        return mp_fail(MP_EINTERNAL, "comm: %s: a graph holds at most %d NCCL collectives",
                       c->what, RING);
    int k = t->captured;
    t->forked = k + 1; /* its join point, should the collective fail (capture_switch_locked) */
    mp_status st = enqueue_locked(t, c, t->cap_fork[k], t->cap_done[k], "capturing");
    if (st == MP_ECOMM)
        return fail_locked(t, st);
    MP_TRY(st);
    *ticket = MP_TICKET_CAPTURED | (uint64_t)++t->captured;
    return MP_OK;
}

/* Starts the watchdog with the first collective or launch (st MP_OK); returns st. */
static mp_status watch(nccl_transport *t, mp_status st)
{
    if (st == MP_OK && !t->watching) {
        if (pthread_create(&t->thread, NULL, watchdog, t) != 0)
            return mp_fail(MP_EINTERNAL, "comm: cannot start the NCCL watchdog thread");
        t->watching = true;
    }
    return st;
}

static mp_status start(void *self, const mp_coll *c, uint64_t *ticket)
{
    nccl_transport *t = self;
    pthread_mutex_lock(&t->mu);
    mp_status st = t->failed;
    if (st == MP_OK && t->capturing) { /* capture_locked says what a failure fails */
        st = capture_locked(t, c, ticket);
        pthread_mutex_unlock(&t->mu);
        return st;
    }
    if (st == MP_OK)
        st = start_locked(t, c, ticket);
    if (st != MP_OK)
        st = fail_locked(t, st);
    pthread_mutex_unlock(&t->mu);
    return watch(t, st);
}

static mp_status wait_for(void *self, uint64_t ticket, double seconds, bool *done)
{
    nccl_transport *t = self;
    for (double t0 = mp_now(), last = t0;; mp_nap(POLL_S)) {
        double now = mp_now();
        if (now - last > MISSED_S) /* this process was stopped (SIGSTOP): not the wait's time, as */
            t0 += now - last - POLL_S; /* the watchdog forgives it (forgive_locked) */
        last = now;
        pthread_mutex_lock(&t->mu);
        mp_status st = t->failed;
        if (st == MP_OK && ticket > t->issued)
            st = mp_fail(MP_EINTERNAL, "comm: waiting for NCCL collective %llu of %llu",
                         (unsigned long long)ticket, (unsigned long long)t->issued);
        else if (st == MP_OK)
            st = check_locked(t);
        if (st != MP_OK)
            st = fail_locked(t, st);
        *done = st == MP_OK && t->completed >= ticket;
        bool ending = t->ending, watched = t->watching && !t->stop;
        pthread_mutex_unlock(&t->mu);
        if (ending) { /* the watchdog says it (after its census) and ends every rank */
            *done = false;
            mp_nap(seconds + 4 * GRACE_S);
            return MP_OK;
        }
        /* The watchdog, which times each collective from its start, decides a timeout (with its
         * census): while it runs, the caller gives it time to do so before giving up itself. */
        if (st != MP_OK || *done || now - t0 >= seconds + (watched ? MISSED_S : 0.0))
            return st;
    }
}

static mp_status order_locked(nccl_transport *t, uint64_t ticket)
{
    if (ticket & MP_TICKET_CAPTURED) {
        uint64_t k = ticket & ~MP_TICKET_CAPTURED;
        if (!t->capturing || k == 0 || k > (uint64_t)t->captured)
            return mp_fail(MP_EINTERNAL, "comm: ordering after captured NCCL collective %llu "
                           "of %d%s", (unsigned long long)k, t->captured,
                           t->capturing ? "" : " outside its capture");
        CUDA_CHECK(cudaStreamWaitEvent(t->compute, t->cap_done[k - 1], 0));
        return MP_OK;
    }
    if (t->capturing) /* capture_begin ordered the compute stream after every issued one */
        return ticket <= t->issued ? MP_OK
                                   : mp_fail(MP_EINTERNAL, "comm: ordering after NCCL "
                                             "collective %llu of %llu", (unsigned long long)ticket,
                                             (unsigned long long)t->issued);
    if (ticket > t->issued)
        return mp_fail(MP_EINTERNAL, "comm: ordering after NCCL collective %llu of %llu",
                       (unsigned long long)ticket, (unsigned long long)t->issued);
    if (ticket > t->completed)
        CUDA_CHECK(cudaStreamWaitEvent(t->compute, t->ring[ticket % RING].done, 0));
    return MP_OK;
}

static mp_status order(void *self, uint64_t ticket)
{
    nccl_transport *t = self;
    pthread_mutex_lock(&t->mu);
    mp_status st = t->failed != MP_OK ? t->failed : order_locked(t, ticket);
    if (st != MP_OK && !t->capturing)
        st = fail_locked(t, st);
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* Makes the capture's events once (locked, not capturing). */
static mp_status capture_events_locked(nccl_transport *t)
{
    for (; t->ncap < 2 * RING; t->ncap++)
        CUDA_CHECK(cudaEventCreateWithFlags(t->ncap < RING ? &t->cap_fork[t->ncap]
                                                           : &t->cap_done[t->ncap - RING],
                                            cudaEventDisableTiming));
    return MP_OK;
}

static mp_status capture_switch_locked(nccl_transport *t, bool begin)
{
    if (begin == t->capturing)
        return mp_fail(MP_EINTERNAL, "comm: the NCCL transport is %s capturing",
                       begin ? "already" : "not");
    if (begin) { /* the graph's first collective then forks after every one issued before */
        const char *mixing = getenv("NCCL_GRAPH_MIXING_SUPPORT");
        if (mixing && strcmp(mixing, "0") == 0) /* steps outside the graph run collectives */
            return mp_fail(MP_EUSAGE, "comm: NCCL_GRAPH_MIXING_SUPPORT=0: NCCL then cannot run "
                           "the collectives of the steps that are not launched as a graph "
                           "beside those of a graph (unset it, or amp.cuda_graphs = \"off\")");
        MP_TRY(capture_events_locked(t));
        MP_TRY(order_locked(t, t->issued));
        t->captured = t->forked = 0;
        t->capturing = true;
        return MP_OK;
    }
    t->capturing = false;
    if (t->forked > t->captured) /* a fork whose collective failed: its join point */
        CUDA_CHECK(cudaEventRecord(t->cap_done[t->forked - 1], t->stream));
    if (t->forked > 0) /* joined back: CUDA refuses a capture that leaves a stream outside */
        CUDA_CHECK(cudaStreamWaitEvent(t->compute, t->cap_done[t->forked - 1], 0));
    return MP_OK;
}

static mp_status capture(void *self, bool begin)
{
    nccl_transport *t = self;
    pthread_mutex_lock(&t->mu);
    mp_status st = t->failed != MP_OK && begin ? t->failed : capture_switch_locked(t, begin);
    pthread_mutex_unlock(&t->mu);
    return st;
}

static mp_status launch_locked(nccl_transport *t, mp_status (*run)(void *graph), void *graph,
                               const char *what, uint64_t *ticket)
{
    if (t->capturing)
        return mp_fail(MP_EINTERNAL, "comm: a graph launched inside a capture");
    nccl_slot *s = NULL;
    MP_TRY(next_slot_locked(t, what, &s));
    MP_TRY(order_locked(t, t->issued)); /* its collectives after every one issued before */
    CUDA_CHECK(cudaEventRecord(s->start, t->compute));
    MP_TRY(run(graph));
    CUDA_CHECK(cudaEventRecord(s->done, t->compute));
    mp_coll named = {0};
    snprintf(named.what, sizeof named.what, "%s", what);
    issue_locked(t, s, &named, ticket);
    return MP_OK;
}

static mp_status launch(void *self, mp_status (*run)(void *graph), void *graph, const char *what,
                        uint64_t *ticket)
{
    nccl_transport *t = self;
    pthread_mutex_lock(&t->mu);
    mp_status st = t->failed != MP_OK ? t->failed : launch_locked(t, run, graph, what, ticket);
    if (st != MP_OK)
        st = fail_locked(t, st);
    pthread_mutex_unlock(&t->mu);
    return watch(t, st);
}

static bool pending(void *self, mp_coll *c, uint64_t *ticket)
{
    nccl_transport *t = self;
    pthread_mutex_lock(&t->mu);
    if (t->failed == MP_OK) {
        mp_status st = check_locked(t);
        if (st != MP_OK)
            fail_locked(t, st);
    }
    const nccl_slot *s = oldest_locked(t);
    if (s) {
        *c = s->coll;
        *ticket = t->completed + 1;
    }
    pthread_mutex_unlock(&t->mu);
    return s != NULL;
}

/* Frees what exists of t; aborts the communicator when it was not destroyed. */
static void free_transport(nccl_transport *t)
{
    if (t->nccl && !t->aborted)
        ncclCommAbort(t->nccl);
    for (int i = 0; i < t->nevents; i++)
        cudaEventDestroy(i % 2 ? t->ring[i / 2].done : t->ring[i / 2].start);
    for (int i = 0; i < t->ncap; i++)
        cudaEventDestroy(i < RING ? t->cap_fork[i] : t->cap_done[i - RING]);
    if (t->stream)
        cudaStreamDestroy(t->stream);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Flushes and destroys the communicator the orderly way, within limit_s. */
static mp_status finalize(nccl_transport *t, double limit_s)
{
    pthread_mutex_lock(&t->mu);
    mp_status st = settle_locked(t, ncclCommFinalize(t->nccl), limit_s,
                                 "finalizing the communicator");
    if (st == MP_OK) {
        ncclCommDestroy(t->nccl);
        t->nccl = NULL;
        mp_census_close(&t->census); /* every rank got this far */
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

static void close_transport(void *self)
{
    nccl_transport *t = self;
    if (t->watching) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
    }
    bool done = false;
    double limit_s = *t->comm->timeout_s;
    if (wait_for(t, t->issued, limit_s, &done) != MP_OK || !done ||
        finalize(t, limit_s) != MP_OK)
        abort_transport(t);
    free_transport(t);
}

static const mp_transport_ops nccl_ops = {.name = "nccl",
                                          .start = start,
                                          .wait = wait_for,
                                          .pending = pending,
                                          .close = close_transport,
                                          .order = order,
                                          .abort = abort_transport,
                                          .capture = capture,
                                          .launch = launch};

/* This rank's part of setting up: the device, the stream, the events, and on rank 0 the
 * communicator's unique id. */
static mp_status setup(nccl_transport *t, ncclUniqueId *id)
{
    CUDA_CHECK(cudaSetDevice(t->device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking));
    for (int i = 0; i < RING; i++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&t->ring[i].start, cudaEventDisableTiming));
        t->nevents++;
        CUDA_CHECK(cudaEventCreateWithFlags(&t->ring[i].done, cudaEventDisableTiming));
        t->nevents++;
    }
    if (t->comm->rank == 0)
        NCCL_CHECK(ncclGetUniqueId(id));
    return MP_OK;
}

mp_status mp_transport_nccl_open(mp_transport *tx, const mp_peers *c, int device,
                                 void *compute_stream)
{
    nccl_transport *t = calloc(1, sizeof *t);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    mp_status st;
    if (t) {
        t->comm = c;
        t->rank = c->rank;
        t->device = device;
        snprintf(t->host, sizeof t->host, "%s", mp_peers_host(c, c->rank));
        t->compute = (cudaStream_t)compute_stream;
        t->census.census = MPI_COMM_NULL;
        pthread_mutex_init(&t->mu, NULL);
        st = setup(t, &id);
    } else {
        st = mp_fail(MP_EINTERNAL, "comm: out of host memory for the NCCL transport");
    }
    ncclComm_t nc = NULL;
    st = mp_nccl_form(c, st, &id, &nc);
    if (t)
        t->nccl = nc; /* free_transport aborts one that did not form */
    if (st == MP_OK)
        st = mp_nccl_agree(c, mp_census_open(&t->census, c));
    if (st != MP_OK) {
        if (t)
            free_transport(t);
        return st;
    }
    tx->ops = &nccl_ops;
    tx->self = t;
    return MP_OK;
}

#else

mp_status mp_transport_nccl_open(mp_transport *t, const mp_peers *c, int device,
                                 void *compute_stream)
{
    (void)t;
    (void)c;
    (void)device;
    (void)compute_stream;
    return mp_fail(MP_EUSAGE, "comm: this build has no NCCL");
}

#endif
