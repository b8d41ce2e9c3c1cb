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

#include "comm/transport.h"
#include "engine/check.h"
#include "engine/ops.h"
#include "engine/dtype.h"
#include "engine/status.h"

/* The MPI library's text for error code rc (thread-local storage, valid until the next call). */
const char *mp_mpi_error_string(int rc);

/* Evaluates an MPI call; on failure returns MP_ECOMM from the enclosing function with a message
 * naming rank, host, file:line, the call and MPI's error string. */
#define MP_MPI_OK(rc) ((rc) == MPI_SUCCESS)
#define MPI_CHECK(stmt) MP_LIB_CHECK("MPI", MP_ECOMM, int, stmt, MP_MPI_OK, mp_mpi_error_string)

#define MP_HOST_MAX 64 /* bytes of a host name as messages print it */
#define MP_COMM_DEFAULT_TIMEOUT_S 600.0

typedef struct mp_comm {
    MPI_Comm world; /* a duplicate of the parent communicator, errors returned, not fatal */
    MPI_Comm watch; /* another duplicate: the watchdog's census messages */
    int rank, size;
    int local_rank, local_size; /* among the ranks on this host (MPI_COMM_TYPE_SHARED) */
    int thread_level;           /* what MPI_Init_thread provided */
    char host[MPI_MAX_PROCESSOR_NAME];
    char (*hosts)[MP_HOST_MAX]; /* (size) every rank's host name, owned */
    double timeout_s;           /* the watchdog's limit per collective (comm.timeout_s) */
    int64_t step;               /* the training step messages name; -1 outside training */
    bool report;                /* after MP_ECOMM from a wait: whether this rank should print
                                   the message (the watchdog picks one rank of many) */
    bool owns_mpi;              /* mp_comm_init started MPI: finalize ends it */
    MPI_Datatype half_word;     /* two bytes, for fp16/bf16 reductions */
    MPI_Op sum_f16, sum_bf16;   /* their sums in FP32, rounded once (comm/halfsum.c) */
    mp_transport tx;            /* where host collectives run */
    uint64_t issued;            /* the last ticket started on tx */
    mp_transport dtx;           /* where device collectives run (ops NULL when none) */
    MPI_Comm dworld;            /* dtx's duplicate of world when dtx is MPI, else MPI_COMM_NULL */
    uint64_t dissued;           /* the last ticket started on dtx */
    bool broken;                /* a collective failed or timed out: nothing more is started,
                                   and the job must end with mp_comm_abort */
    struct mp_comm_stage *stage; /* host copies of data collectives in flight (comm/coll.c) */
} mp_comm;

/* Initialises MPI with thread support (if not yet), duplicates MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, fills ranks and host names, sets the identity check messages print and
 * starts the transport. Ranks are cross-checked with the launcher (comm/launch_check.h): a
 * mismatch is MP_EUSAGE (MPI finalised again), a differing local rank a warning on stderr. */
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

/* Waits for every host-route collective started up to `ticket` (not collective itself).
 * MP_ECOMM when one failed, or when timeout_s passes (the watchdog's message; c->report says
 * whether this rank should print it). */
mp_status mp_comm_wait(mp_comm *c, uint64_t ticket);

/* Blocking forms on host memory: start, then wait. */
mp_status mp_comm_allreduce(mp_comm *c, void *buf, size_t n, mp_dtype dt, mp_redop op,
                            const char *what);
mp_status mp_comm_bcast(mp_comm *c, void *buf, size_t bytes, int root, const char *what);

/* Every rank passes its local status; all return the same agreed status (the largest code of
 * any failed rank, MP_OK when all succeeded) and *reporter is the lowest rank that failed with
 * that code (-1 if none), the one that should print its message. If the agreement itself
 * fails, returns MP_ECOMM with *reporter set to this rank when it had failed, else -1. */
mp_status mp_comm_agree(mp_comm *c, mp_status local, int *reporter);

/* Opens the device transport as c->dtx, after the host collectives started so far finished:
 * NCCL on CUDA device `device` when `compute_stream` (a cudaStream_t as void *: the stream on
 * which device buffers are written before a collective reads them, and which
 * mp_comm_device_order makes wait) is not NULL; with compute_stream NULL (the backend's queue is
 * the host's, its memory host memory: the staged CPU backend) a second MPI transport over a
 * duplicate of world, `device` ignored, whose order waits on the host. MP_EUSAGE when the build
 * has no NCCL, dtx is open already, or MPI is below MPI_THREAD_MULTIPLE for the second MPI
 * transport; MP_ECOMM, the same on every rank, when the communicator could not be formed within
 * timeout_s (comm/transport_nccl.h). */
mp_status mp_comm_use_device(mp_comm *c, int device, void *compute_stream);

/* Closes the device transport that mp_comm_use_device opened, if any: waits for what was started
 * and destroys the communicator, aborting it when that does not finish within timeout_s, so that
 * a later mp_comm_use_device (another trainer in the same process) can open a new one. Collective
 * over the ranks that opened it. */
void mp_comm_drop_device(mp_comm *c);

/* Whether device collectives are available (mp_comm_use_device succeeded). Not collective. */
bool mp_comm_has_device(const mp_comm *c);

/* The data plane: collectives on the memory of a compute backend, one call whatever the memory
 * and the transport. `mem` is the backend that owns coll->buf (NULL: host memory): host memory
 * (mem->host_memory) goes to the host transport; other memory to the device transport when it
 * is open (NCCL, or the staged CPU backend's second MPI transport), else through a host copy
 * that MPI works on (copied out when the collective starts, which waits for the ops queued
 * before it, and back in when mp_comm_coll_order or mp_comm_coll_wait reaches it). The result
 * is the same bytes on every route. *ticket identifies the collective for the two calls below
 * (waiting for one waits for those started before it on its route). MP_ECOMM once a collective
 * failed; MP_EINTERNAL for a block collective with elements no rank owns. */
mp_status mp_comm_coll_start(mp_comm *c, const mp_ops *mem, const mp_coll *coll,
                             uint64_t *ticket);

/* An all-reduce (op) or a broadcast (bytes, root 0) over buf, named `what` in messages (cut to
 * fit). */
mp_coll mp_coll_of(mp_coll_kind kind, void *buf, size_t count, mp_dtype dt, mp_redop op,
                   const char *what);

/* A reduce-scatter (sum) or all-gather over count elements of buf, which starts at element
 * `base` of a buffer cut into rank blocks of `block` elements (see mp_coll). */
mp_coll mp_coll_blocks(mp_coll_kind kind, void *buf, size_t count, mp_dtype dt, size_t block,
                       size_t base, const char *what);

/* Makes work queued on the compute stream after this call see the results of every data
 * collective up to `ticket`: on a device transport with a stream of its own the stream waits and
 * the host does not (*waited false); otherwise the host waits, under the watchdog, and copies
 * host results back (*waited true). Not collective. */
mp_status mp_comm_coll_order(mp_comm *c, uint64_t ticket, bool *waited);

/* The host waits for every data collective up to `ticket` (results copied back to the backend
 * where they went through the host), at most timeout_s per collective. Not collective. */
mp_status mp_comm_coll_wait(mp_comm *c, uint64_t ticket);

/* Not collective: ends every rank at once with `code` (MPI_Abort), so none hangs; the device
 * transport's communicator is aborted first. Callable from any thread. */
void mp_comm_abort(const mp_comm *c, int code);

/* Stops the transports (device, then host) and frees what init_on created (not MPI itself). */
void mp_comm_free(mp_comm *c);

/* mp_comm_free, then finalises MPI when mp_comm_init started it. */
void mp_comm_finalize(mp_comm *c);

#endif
