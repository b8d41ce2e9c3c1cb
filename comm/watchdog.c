/* Waiting for collectives under the watchdog. The caller's thread waits in slices; between
 * slices it answers census queries from other ranks. When a collective has not finished after
 * timeout_s the rank takes a census on the watch communicator: it tells every other rank which
 * collective it is stuck in, and for a grace period collects what they say they are stuck in
 * (ranks that are waiting answer between their slices). Ranks in the same collective arrived;
 * ranks in an earlier one, and ranks that say nothing (computing, stopped or dead), did not;
 * ranks in a later one finished their part of it and went on. The lowest rank heard from
 * (itself included) reports; the others stay quiet and wait for it to end the job.
 * The census needs MPI_THREAD_MULTIPLE (the worker thread is inside MPI meanwhile); without it
 * the message says the missing ranks are not known. Time this process itself did not run (a
 * gap of more than MISSED_S between slices: stopped, then continued) does not count towards
 * the timeout, so a rank that was the one stopped does not blame the others when it runs again
 * (the job is usually being ended by then: the launcher continues a stopped process to kill it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/watchdog.h"
#include "comm/nap.h"
#include "engine/clock.h"

#define SLICE_S 0.05
#define GRACE_S 2.0
#define MISSED_S 1.0 /* a gap this long between two slices: this process was not running */
#define TAG_QUERY 11
#define TAG_ANSWER 12

typedef struct census_msg {
    int64_t ticket; /* the lowest unfinished collective: where the sender is stuck */
    int64_t step;
    char what[96];
} census_msg;

static bool census_possible(const mp_comm *c)
{
    return c->size > 1 && c->thread_level >= MPI_THREAD_MULTIPLE;
}

/* What this rank is stuck in, into *me. */
static void where_am_i(mp_comm *c, census_msg *me)
{
    mp_coll coll;
    uint64_t ticket = 0;
    memset(me, 0, sizeof *me);
    if (c->tx.ops->pending(c->tx.self, &coll, &ticket)) {
        me->ticket = (int64_t)ticket;
        snprintf(me->what, sizeof me->what, "%s", coll.what);
    }
    me->step = c->step;
}

/* Receives one census message if one is there; answers a query with where this rank is.
 * Returns the sender, or -1 when nothing was there. */
static int serve_one(mp_comm *c, census_msg *got)
{
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->watch, &flag, &status) != MPI_SUCCESS || !flag)
        return -1;
    if (MPI_Recv(got, (int)sizeof *got, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, c->watch,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
    if (status.MPI_TAG == TAG_QUERY) { /* a small message: sent eagerly, so this returns */
        census_msg me;
        where_am_i(c, &me);
        MPI_Send(&me, (int)sizeof me, MPI_BYTE, status.MPI_SOURCE, TAG_ANSWER, c->watch);
    }
    return status.MPI_SOURCE;
}

/* The census after a timeout (see the file comment); returns MP_ECOMM with the message. */
static mp_status timed_out(mp_comm *c)
{
    /* The query outlives its sends, which are not waited for (a census runs at most once: the
     * job ends after it). */
    static _Thread_local census_msg query;
    census_msg *me = &query;
    where_am_i(c, me);
    char head[256];
    snprintf(head, sizeof head, "comm: timed out after %g s (comm.timeout_s) in %s at step %lld",
             c->timeout_s, me->ticket ? me->what : "a collective", (long long)c->step);
    c->report = true;
    if (!census_possible(c))
        return mp_fail(MP_ECOMM, "%s; which ranks did not arrive is not known (%s)", head,
                       c->size > 1 ? "MPI gave no MPI_THREAD_MULTIPLE" : "one rank");
    int64_t *at = malloc((size_t)c->size * sizeof *at);
    char (*what)[96] = malloc((size_t)c->size * sizeof *what);
    if (!at || !what) {
        free(at);
        free(what);
        return mp_fail(MP_ECOMM, "%s", head);
    }
    for (int r = 0; r < c->size; r++)
        at[r] = -1;
    at[c->rank] = me->ticket;
    for (int r = 0; r < c->size; r++) {
        MPI_Request req;
        if (r != c->rank && MPI_Isend(me, (int)sizeof *me, MPI_BYTE, r, TAG_QUERY, c->watch,
                                      &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    int heard = 1;
    for (double t0 = mp_now(); heard < c->size && mp_now() - t0 < GRACE_S;) {
        census_msg got;
        int from = serve_one(c, &got);
        if (from < 0) {
            mp_nap(0.01);
            continue;
        }
        if (at[from] < 0)
            heard++;
        at[from] = got.ticket;
        memcpy(what[from], got.what, sizeof what[from]);
        what[from][sizeof what[from] - 1] = '\0';
    }
    int reporter = c->rank; /* the lowest rank heard from: every waiting rank picks the same */
    for (int r = 0; r < c->size; r++)
        if (at[r] >= 0 && r < reporter)
            reporter = r;
    char msg[900] = "", past[600] = "";
    size_t len = 0, plen = 0;
    for (int r = 0; r < c->size; r++) {
        if (at[r] == me->ticket)
            continue;
        if (at[r] > me->ticket) { /* finished this one (its part was done) and went on */
            int n = snprintf(past + plen, sizeof past - plen, "; %d (%s) is past it, in %s", r,
                             mp_peers_host(&c->peers, r), what[r]);
            plen += n > 0 && (size_t)n < sizeof past - plen ? (size_t)n : 0;
            continue;
        }
        int n = snprintf(msg + len, sizeof msg - len, "%s%d (%s%s%s)", len ? ", " : "", r,
                         mp_peers_host(&c->peers, r), at[r] < 0 ? "" : ", still in ",
                         at[r] < 0 ? "" : what[r]);
        len += n > 0 && (size_t)n < sizeof msg - len ? (size_t)n : 0;
    }
    free(at);
    free(what);
    c->report = reporter == c->rank;
    if (!c->report)
        mp_nap(2 * GRACE_S); /* the reporter ends the job meanwhile */
    if (!msg[0])
        return mp_fail(MP_ECOMM, "%s; every rank arrived, the collective itself did not finish%s",
                       head, past);
    return mp_fail(MP_ECOMM, "%s; ranks that did not arrive: %s%s", head, msg, past);
}

mp_status mp_comm_wait(mp_comm *c, uint64_t ticket)
{
    double start = mp_now(), last = start;
    for (;;) {
        bool done = false;
        mp_status st = c->tx.ops->wait(c->tx.self, ticket, SLICE_S, &done);
        if (st != MP_OK) {
            c->report = true;
            c->broken = true;
            return st;
        }
        if (done)
            return MP_OK;
        if (census_possible(c)) {
            census_msg got;
            while (serve_one(c, &got) >= 0)
                continue;
        }
        double now = mp_now();
        if (now - last > MISSED_S) /* this process did not run meanwhile (stopped by SIGSTOP, then
                                      continued, or starved): that time is not the others' */
            start += now - last - SLICE_S;
        last = now;
        double waited = now - start;
        if (waited >= c->timeout_s) {
            c->broken = true;
            return timed_out(c);
        }
    }
}
