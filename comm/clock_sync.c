/* Clock offsets to rank 0 (see clock_sync.h). Rank 0 serves the ranks one after another; each
 * exchange is a one-byte ping and rank 0's clock reading in reply, on a tag of its own. */
#include "comm/clock_sync.h"

#include <math.h>

#include "comm/mpi_check.h"
#include "comm/nap.h"
#include "engine/clock.h"

enum { ROUNDS = 16, TAG = 7311 };

/* Waits for request *rq until comm.timeout_s, polling; `what` and `peer` name it on timeout. */
static mp_status wait_req(mp_comm *c, MPI_Request *rq, const char *what, int peer)
{
    double until = mp_now() + c->timeout_s;
    for (long spins = 0;; spins++) {
        int done = 0;
        MPI_CHECK(MPI_Test(rq, &done, MPI_STATUS_IGNORE));
        if (done)
            return MP_OK;
        if (mp_now() > until) {
            MPI_Cancel(rq);
            MPI_Request_free(rq);
            return mp_fail(MP_ECOMM, "comm: timed out after %g s (comm.timeout_s) in %s with "
                           "rank %d (%s) while aligning the trace's clocks", c->timeout_s, what,
                           peer, c->hosts[peer]);
        }
        if (spins > 1000)
            mp_nap(1e-5);
    }
}

mp_status mp_comm_clock_offset(mp_comm *c, double *offset_s, double *error_s)
{
    *offset_s = 0.0;
    *error_s = 0.0;
    char ping = 0;
    MPI_Request rq;
    if (c->rank == 0) {
        for (int r = 1; r < c->size; r++)
            for (int k = 0; k < ROUNDS; k++) {
                MPI_CHECK(MPI_Irecv(&ping, 1, MPI_CHAR, r, TAG, c->world, &rq));
                MP_TRY(wait_req(c, &rq, "a clock ping", r));
                double now = mp_now();
                MPI_CHECK(MPI_Isend(&now, 1, MPI_DOUBLE, r, TAG, c->world, &rq));
                MP_TRY(wait_req(c, &rq, "a clock reply", r));
            }
        return MP_OK;
    }
    double best = INFINITY;
    for (int k = 0; k < ROUNDS; k++) {
        double t0 = mp_now(), theirs = 0.0;
        MPI_CHECK(MPI_Isend(&ping, 1, MPI_CHAR, 0, TAG, c->world, &rq));
        MP_TRY(wait_req(c, &rq, "a clock ping", 0));
        MPI_CHECK(MPI_Irecv(&theirs, 1, MPI_DOUBLE, 0, TAG, c->world, &rq));
        MP_TRY(wait_req(c, &rq, "a clock reply", 0));
        double t1 = mp_now();
        if (t1 - t0 < best) {
            best = t1 - t0;
            *offset_s = theirs - 0.5 * (t0 + t1);
        }
    }
    *error_s = 0.5 * best;
    return MP_OK;
}
