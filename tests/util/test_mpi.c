/* The shared main of the tests under tests/mpi (see test_mpi.h). */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/alloc.h"
#include "tests/util/test_mpi.h"

int mp_test_mpi_main(mp_comm *comm, int *argc, char ***argv, const struct CMUnitTest *tests,
                     size_t ntests)
{
    if (mp_comm_init(comm, argc, argv) != MP_OK) {
        fprintf(stderr, "%s\n", mp_error_message());
        return 1;
    }
    int failed = _cmocka_run_group_tests((*argv)[0], tests, ntests, NULL, NULL);
    for (int cat = 0; cat < MP_MEM_NCAT; cat++) /* the runs gave back what they allocated */
        if (cat != MP_MEM_WORKSPACE && mp_mem_current((mp_mem_cat)cat) != 0) {
            fprintf(stderr, "rank %d: %lld bytes of %s still allocated\n", comm->rank,
                    (long long)mp_mem_current((mp_mem_cat)cat), mp_mem_cat_name((mp_mem_cat)cat));
            failed++;
        }
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm->world);
    mp_comm_finalize(comm);
    return any ? 1 : 0;
}

void mp_test_same_everywhere(const mp_comm *comm, const void *buf, size_t n, const char *what)
{
    char *all = comm->rank == 0 ? malloc(n * (size_t)comm->size) : NULL;
    assert_int_equal(MPI_Gather(buf, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, 0, comm->world),
                     MPI_SUCCESS);
    int bad = 0;
    if (comm->rank == 0)
        for (int r = 1; r < comm->size; r++)
            if (memcmp(all, all + (size_t)r * n, n) != 0) {
                fprintf(stderr, "%s on rank %d differs from rank 0's\n", what, r);
                bad = 1;
            }
    free(all);
    assert_int_equal(MPI_Bcast(&bad, 1, MPI_INT, 0, comm->world), MPI_SUCCESS);
    assert_int_equal(bad, 0);
}

void mp_test_trainer(mp_comm *c, const char *path, const char *text, mp_config *cfg,
                     mp_trainer *t)
{
    mp_test_write_file(path, text, strlen(text), 0);
    if (mp_config_load(cfg, path, NULL, 0) != MP_OK || mp_train_setup(t, cfg, c) != MP_OK)
        fail_msg("%s", mp_error_message());
}

void mp_test_trainer_start(mp_trainer *t)
{
    assert_int_equal(mp_train_sync(t), MP_OK);
    assert_int_equal(mp_train_open_outputs(t), MP_OK);
}
