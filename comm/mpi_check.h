/* MPI_CHECK, the check macro of docs/ARCHITECTURE.md §7 for MPI calls, and MPI's error text:
 * a leaf of comm/ that every file calling MPI includes. */
#ifndef MP_MPI_CHECK_H
#define MP_MPI_CHECK_H

#include <mpi.h>

#include "engine/check.h"

/* The MPI library's text for error code rc (thread-local storage, valid until the next call). */
const char *mp_mpi_error_string(int rc);

/* Evaluates an MPI call; on failure returns MP_ECOMM from the enclosing function with a message
 * naming rank, host, file:line, the call and MPI's error string. */
#define MP_MPI_OK(rc) ((rc) == MPI_SUCCESS)
#define MPI_CHECK(stmt) MP_LIB_CHECK("MPI", MP_ECOMM, int, stmt, MP_MPI_OK, mp_mpi_error_string)

#endif
