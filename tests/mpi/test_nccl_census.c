// np: 4
/* The NCCL watchdog's census (comm/nccl_census.h) over real MPI: rank 0's oldest collective
 * (ticket 10) is past its limit and it takes the census with a grace of 1 s; rank 1 answers
 * that it is behind (it started 9 collectives), rank 3 that it started the 10th (it arrived),
 * and rank 2 stays silent through the grace, as a stopped rank does, and answers late. Rank 0's
 * text must name rank 2 first, with no note, then rank 1 as not there yet, and not rank 3; rank
 * 0, the only rank past its limit, reports. Every rank answers its queries afterwards, so the
 * census closes with nothing left in flight. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm_state.h"
#include "comm/nap.h"
#include "comm/nccl_census.h"
#include "engine/clock.h"

static mp_comm comm;

/* Answers queries with *me for `seconds`. */
static void serve_for(mp_census *cs, const mp_census_where *me, double seconds)
{
    for (double t0 = mp_now(); mp_now() - t0 < seconds;) {
        mp_census_serve(cs, me);
        mp_nap(0.01);
    }
}

static void test_silent_rank_first(void **state)
{
    (void)state;
    mp_census cs;
    assert_int_equal(mp_census_open(&cs, &comm.peers), MP_OK);
    if (cs.census == MPI_COMM_NULL) {
        mp_census_close(&cs);
        skip(); /* MPI gave no MPI_THREAD_MULTIPLE: the census cannot run */
    }
    const mp_census_where at[4] = {{.oldest = 10, .issued = 10, .step = 9, .overdue = 1},
                                   {.oldest = 9, .issued = 9, .step = 8},
                                   {.oldest = 10, .issued = 10, .step = 9},
                                   {.oldest = 10, .issued = 10, .step = 9}};
    const mp_census_where *me = &at[comm.rank];
    MPI_Barrier(comm.world);
    char text[512] = "";
    bool reports = false;
    if (comm.rank == 0) {
        reports = mp_census_take(&cs, me, 1.0, text, sizeof text);
        MPI_Status st; /* rank 2's late answer, then nothing is left in flight */
        MPI_Probe(2, MPI_ANY_TAG, cs.census, &st);
        mp_census_serve(&cs, me);
    } else if (comm.rank == 2) {
        mp_nap(2.0); /* silent through rank 0's grace */
        serve_for(&cs, me, 1.0);
    } else {
        serve_for(&cs, me, 3.0);
    }
    MPI_Barrier(comm.world);
    mp_census_close(&cs);
    if (comm.rank != 0)
        return;
    char want[512];
    snprintf(want, sizeof want,
             "ranks that did not arrive: 2 (%s), 1 (%s, not there yet: computing, or in an "
             "earlier collective)",
             mp_peers_host(&comm.peers, 2), mp_peers_host(&comm.peers, 1));
    printf("census: %s\n", text);
    assert_string_equal(text, want);
    assert_true(reports);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_silent_rank_first)};
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
