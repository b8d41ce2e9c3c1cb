/* Naming the ranks a timed-out NCCL collective waits for (issue 46), as the MPI watchdog's
 * census does for host collectives (comm/watchdog.c). The NCCL transport's watchdog thread
 * answers census queries on a communicator of its own at every period, saying where its rank
 * is: the oldest device collective it has not seen finish (tickets number the device
 * collectives alike on every rank), how many it has started, and whether that oldest one is
 * past comm.timeout_s. When its own oldest is past it, the watchdog asks every other rank and
 * collects what they say for a grace period, answering the others meanwhile (a query carries
 * the asker's own state). A rank that started the collective arrived (NCCL waits inside it for
 * the others); one that started fewer is behind (computing, or stuck in an earlier collective);
 * one that said nothing is stopped or dead. Of the ranks known to be past their limit, the
 * lowest reports; the others stay quiet while it ends the job. Needs MPI_THREAD_MULTIPLE: the
 * caller's thread may be inside MPI meanwhile. */
#ifndef MP_NCCL_CENSUS_H
#define MP_NCCL_CENSUS_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/mpi_check.h"
#include "comm/peers.h"

/* Where a rank is, as it says in a query or an answer. */
typedef struct mp_census_where {
    uint64_t oldest;  /* the oldest collective not seen finished; 0 when none is outstanding */
    uint64_t issued;  /* collectives started */
    int64_t step;     /* the training step */
    int32_t overdue;  /* 1: the oldest is past comm.timeout_s */
    int32_t pad;
} mp_census_where;

typedef struct mp_census {
    const mp_peers *comm;
    MPI_Comm census;   /* a duplicate of comm->world; MPI_COMM_NULL when no census can run */
    int lowest_overdue; /* the lowest rank that said it is past its limit; comm->size if none */
} mp_census;

/* Collective over c->world (which no other thread may be using): duplicates it for the census,
 * when there are two ranks or more and MPI gave MPI_THREAD_MULTIPLE; otherwise cs->census is
 * MPI_COMM_NULL and the census only says that it cannot run. MP_ECOMM when the duplicate
 * fails. */
mp_status mp_census_open(mp_census *cs, const mp_peers *c);

/* Not collective: answers every query waiting for this rank with *me. */
void mp_census_serve(mp_census *cs, const mp_census_where *me);

/* Not collective: the census of an overdue rank (*me: its oldest collective is past its limit).
 * Asks the others, collects answers for grace_s seconds (or until all answered), and writes into
 * text (len bytes) what the timeout message appends: "ranks that did not arrive: 1 (host), ..."
 * (the ranks that did not answer first, then those behind), "every rank started it, and it did
 * not finish", or why that is not known. Returns whether this rank reports: it is the lowest
 * rank known to be past its limit. */
bool mp_census_take(mp_census *cs, const mp_census_where *me, double grace_s, char *text,
                    size_t len);

/* Frees the duplicate (after the watchdog stopped; collective in effect: call on every rank or
 * on none, i.e. not when the job is being ended). */
void mp_census_close(mp_census *cs);

#endif
