/* Ranks and collectives over MPI (DESIGN §1, comm/). This is the minimal communicator of the
 * foundation: start-up, rank/size/local rank, broadcast, gradient allreduce and the small
 * agreement collectives. Every function is collective over all ranks unless it says otherwise. */
#ifndef MP_COMM_H
#define MP_COMM_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/dtype.h"

#include "engine/check.h"
#include "engine/status.h"

/* The MPI library's text for error code rc (thread-local storage, valid until the next call). */
const char *mp_mpi_error_string(int rc);

/* Evaluates an MPI call; on failure returns MP_ECOMM from the enclosing function with a message
 * naming rank, host, file:line, the call and MPI's error string. */
#define MP_MPI_OK(rc) ((rc) == MPI_SUCCESS)
#define MPI_CHECK(stmt) MP_LIB_CHECK("MPI", MP_ECOMM, int, stmt, MP_MPI_OK, mp_mpi_error_string)

typedef struct mp_comm {
    MPI_Comm world; /* a duplicate of MPI_COMM_WORLD with errors returned, not fatal */
    int rank, size;
    int local_rank, local_size; /* among the ranks on this host */
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Datatype half_word;        /* two bytes, for fp16/bf16 reductions */
    MPI_Op sum_f16, sum_bf16;      /* their sums, created once at start-up */
} mp_comm;

/* Initialises MPI (if not yet), duplicates the world communicator with MPI_ERRORS_RETURN, and
 * fills rank, size, local rank and host. Sets the identity that check messages print. */
mp_status mp_comm_init(mp_comm *c, int *argc, char ***argv);

/* Broadcasts `bytes` bytes of buf from rank `root`. */
mp_status mp_comm_bcast(const mp_comm *c, void *buf, size_t bytes, int root);

/* In-place sum over all ranks of n floats. */
mp_status mp_comm_allreduce_sum_f32(const mp_comm *c, float *buf, size_t n);

/* In-place sum over all ranks of n elements of dtype dt. Half types are summed in FP32 and
 * rounded to the dtype at each combination (a user-defined MPI op), FP32 with MPI_SUM. */
mp_status mp_comm_allreduce_sum(const mp_comm *c, void *buf, size_t n, mp_dtype dt);

/* In-place logical OR over all ranks (found_inf: every rank takes the same decision). */
mp_status mp_comm_any(const mp_comm *c, bool *flag);

/* In-place sum over all ranks of n doubles. */
mp_status mp_comm_allreduce_sum_f64(const mp_comm *c, double *buf, int n);

/* Every rank passes its local status; all return the same agreed status (the largest code of
 * any failed rank, MP_OK when all succeeded) and *reporter is the lowest rank that failed with
 * that code (-1 if none), the one that should print its message. If the agreement itself
 * fails, returns MP_ECOMM with *reporter set to this rank when it had failed, else -1. */
mp_status mp_comm_agree(const mp_comm *c, mp_status local, int *reporter);

/* Not collective: ends every rank at once with `code` (MPI_Abort), so none hangs. */
void mp_comm_abort(const mp_comm *c, int code);

/* Frees the duplicate communicator and finalises MPI. */
void mp_comm_finalize(mp_comm *c);

#endif
