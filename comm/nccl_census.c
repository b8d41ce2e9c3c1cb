/* The NCCL watchdog's census (see nccl_census.h). Messages are one mp_census_where each: small,
 * so MPI sends them eagerly and a send to a stopped rank returns; a query is sent with
 * MPI_Isend and its request freed (a census runs once: the job ends after it, so the query's
 * buffer, which must outlive the sends, is static to the thread). */
#include "comm/nccl_census.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/nap.h"
#include "engine/clock.h"

#define TAG_QUERY 21
#define TAG_ANSWER 22

mp_status mp_census_open(mp_census *cs, const mp_peers *c)
{
    cs->comm = c;
    cs->census = MPI_COMM_NULL;
    cs->lowest_overdue = c->size;
    if (c->size > 1 && c->thread_level >= MPI_THREAD_MULTIPLE)
        MPI_CHECK(MPI_Comm_dup(c->world, &cs->census));
    return MP_OK;
}

/* Receives one census message if one is waiting: answers a query with *me, and notes a sender
 * past its limit. Returns the sender (its message in *got, the tag in *query), or -1. */
static int serve_one(mp_census *cs, const mp_census_where *me, mp_census_where *got, bool *query)
{
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, cs->census, &flag, &status) != MPI_SUCCESS ||
        !flag)
        return -1;
    if (MPI_Recv(got, (int)sizeof *got, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, cs->census,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
    *query = status.MPI_TAG == TAG_QUERY;
    if (*query)
        MPI_Send(me, (int)sizeof *me, MPI_BYTE, status.MPI_SOURCE, TAG_ANSWER, cs->census);
    if (got->overdue && status.MPI_SOURCE < cs->lowest_overdue)
        cs->lowest_overdue = status.MPI_SOURCE;
    return status.MPI_SOURCE;
}

void mp_census_serve(mp_census *cs, const mp_census_where *me)
{
    if (cs->census == MPI_COMM_NULL)
        return;
    mp_census_where got;
    bool query;
    while (serve_one(cs, me, &got, &query) >= 0)
        continue;
}

/* Appends "R (host[, note])" to the list in text. */
static void name_rank(const mp_census *cs, int r, const char *note, char *text, size_t len)
{
    size_t at = strlen(text);
    if (at + 1 < len)
        snprintf(text + at, len - at, "%s%d (%s%s)", strchr(text, '(') ? ", " : "", r,
                 mp_peers_host(cs->comm, r), note);
}

bool mp_census_take(mp_census *cs, const mp_census_where *me, double grace_s, char *text,
                    size_t len)
{
    const mp_peers *c = cs->comm;
    if (cs->census == MPI_COMM_NULL) {
        snprintf(text, len, "which ranks did not arrive is not known (%s)",
                 c->size > 1 ? "MPI gave no MPI_THREAD_MULTIPLE" : "one rank");
        return true;
    }
    static _Thread_local mp_census_where query;
    query = *me;
    mp_census_where *said = calloc((size_t)c->size, sizeof *said);
    bool *heard = calloc((size_t)c->size, sizeof *heard);
    if (!said || !heard) {
        free(said);
        free(heard);
        snprintf(text, len, "which ranks did not arrive is not known (out of memory)");
        return true;
    }
    for (int r = 0; r < c->size; r++) {
        MPI_Request req;
        if (r != c->rank && MPI_Isend(&query, (int)sizeof query, MPI_BYTE, r, TAG_QUERY,
                                      cs->census, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    heard[c->rank] = true;
    int nheard = 1;
    for (double t0 = mp_now(); nheard < c->size && mp_now() - t0 < grace_s;) {
        mp_census_where got;
        bool asked;
        int from = serve_one(cs, &query, &got, &asked);
        if (from < 0) {
            mp_nap(0.01);
            continue;
        }
        nheard += !heard[from];
        heard[from] = true;
        said[from] = got;
    }
    int reporter = c->rank < cs->lowest_overdue ? c->rank : cs->lowest_overdue;
    /* The silent ranks first: a stopped rank holds the others back too, in the collective it
     * left unfinished (a ring finishes on some ranks before others), so it is the likely cause. */
    snprintf(text, len, "ranks that did not arrive: ");
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && !heard[r])
            name_rank(cs, r, "", text, len);
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && heard[r] && said[r].issued < me->oldest)
            name_rank(cs, r, ", not there yet: computing, or in an earlier collective", text, len);
    if (!strchr(text, '('))
        snprintf(text, len, "every rank started it, and it did not finish");
    free(said);
    free(heard);
    return reporter == c->rank;
}

void mp_census_close(mp_census *cs)
{
    if (cs->census != MPI_COMM_NULL)
        MPI_Comm_free(&cs->census);
}
