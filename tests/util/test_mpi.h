/* The main of a multi-rank CMocka test program. Include after tests/util/test_util.h. */
#ifndef MP_TEST_MPI_H
#define MP_TEST_MPI_H

#include <stddef.h>

#include "comm/comm.h"
#include "src/train.h"

/* Starts *comm (the communicator the tests use), runs the tests, checks that every byte the
 * engine counted (workspace aside) was given back, and returns 1 on every rank when any rank
 * failed, else 0, after finalising MPI. */
int mp_test_mpi_main(mp_comm *comm, int *argc, char ***argv, const struct CMUnitTest *tests,
                     size_t ntests);

/* Collective: fails the test on every rank unless the n bytes at buf are the same on every
 * rank as on rank 0 (the ranks that differ are named on stderr, as `what`). */
void mp_test_same_everywhere(const mp_comm *comm, const void *buf, size_t n, const char *what);

/* Writes the config `text` to `path`, loads it into *cfg and sets up *t over c (collective),
 * failing the test on an error; free with mp_train_free and mp_config_free. */
void mp_test_trainer(mp_comm *c, const char *path, const char *text, mp_config *cfg,
                     mp_trainer *t);

/* After mp_test_trainer: shares rank 0's initial parameters and opens the outputs. */
void mp_test_trainer_start(mp_trainer *t);

#define mp_test_mpi_run(comm, argc, argv, tests) \
    mp_test_mpi_main((comm), (argc), (argv), (tests), sizeof(tests) / sizeof((tests)[0]))

#endif
