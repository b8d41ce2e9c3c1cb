/* Ranks and collectives (docs/ARCHITECTURE.md §1, comm/): MPI start-up with thread support, world
 * and local ranks, every rank's host name, and the collectives the step needs. Collectives are
 * started on a transport (comm/transport.h), which runs them in the order they were started on its
 * own stream of execution (a worker thread over MPI on CPUs; a CUDA stream with NCCL on GPUs), and
 * waited for under the watchdog: a collective that does not finish within timeout_s fails with
 * MP_ECOMM and a message naming the operation, the step and the ranks that did not arrive.
 * One API, the data plane (mp_comm_coll_start, _order, _wait): all-reduce, reduce-scatter,
 * all-gather and broadcast on the memory of any backend, which picks its route itself: `tx`
 * (MPI) for host memory; `dtx` (NCCL, or a second MPI transport) once mp_comm_use_device opened
 * it; else `tx` through host copies. mp_comm_allreduce, mp_comm_bcast and their kin are its
 * blocking forms on host memory. Every function is collective
 * over all ranks, in the same order on every rank, unless it says otherwise. */
#ifndef MP_COMM_H
#define MP_COMM_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/coll.h"
#include "comm/comm_device.h"
#include "comm/comm_state.h"
#include "comm/watchdog.h"
#include "engine/check.h"
#include "engine/ops.h"
#include "engine/dtype.h"
#include "engine/status.h"

/* Initialises MPI with thread support (if not yet), duplicates MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, fills ranks and host names, sets the identity check messages print and
 * starts the transport. Ranks are cross-checked with the launcher (comm/launch_check.h): a
 * mismatch is MP_EUSAGE (MPI finalised again), a differing local rank a warning on stderr. On
 * MP_EUSAGE, c->report says whether this process prints it (mp_launch_env_reports), so that a
 * launch every process of which fails alike says so once. */
mp_status mp_comm_init(mp_comm *c, int *argc, char ***argv);

/* A communicator over `base` (a sub-communicator of an initialised MPI, e.g. MPI_COMM_SELF for a
 * one-rank reference run in a test), with its own transport; collective over base. Free with
 * mp_comm_free. */
mp_status mp_comm_init_on(mp_comm *c, MPI_Comm base);

/* Host name of `rank` (not collective). */
const char *mp_comm_host(const mp_comm *c, int rank);

/* Host-memory forms of mp_comm_coll_start: an in-place reduction over all ranks of n elements
 * of dt at buf; `what` names it in messages ("sum of the test loss"). Half types sum in FP32 and
 * round once per combination. *ticket identifies it for mp_comm_wait. Not blocking. */
mp_status mp_comm_allreduce_start(mp_comm *c, void *buf, size_t n, mp_dtype dt, mp_redop op,
                                  const char *what, uint64_t *ticket);

/* Blocking forms on host memory: start, then wait. */
mp_status mp_comm_allreduce(mp_comm *c, void *buf, size_t n, mp_dtype dt, mp_redop op,
                            const char *what);
mp_status mp_comm_bcast(mp_comm *c, void *buf, size_t bytes, int root, const char *what);

/* Every rank passes its local status; all return the same agreed status (the largest code of
 * any failed rank, MP_ESTOPPED only when no rank failed otherwise, MP_OK when all succeeded)
 * and *reporter is the lowest rank that failed with that code (-1 if none), the one that should
 * print its message. If the agreement itself
 * fails, returns MP_ECOMM with *reporter set to this rank when it had failed, else -1. */
mp_status mp_comm_agree(mp_comm *c, mp_status local, int *reporter);

/* Not collective: ends every rank at once with `code` (MPI_Abort), so none hangs; the device
 * transport's communicator is aborted first. Callable from any thread. */
void mp_comm_abort(const mp_comm *c, int code);

/* Stops the transports (device, then host) and frees what init_on created (not MPI itself). */
void mp_comm_free(mp_comm *c);

/* mp_comm_free, then finalises MPI when mp_comm_init started it. */
void mp_comm_finalize(mp_comm *c);

#endif
