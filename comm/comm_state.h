/* The communicator's state (docs/ARCHITECTURE.md §5): what comm/comm.c sets up and the files
 * of the collectives (coll.c, comm_device.c, watchdog.c) share. A header of its own, so that
 * those files need not include comm/comm.h, the API above them. */
#ifndef MP_COMM_STATE_H
#define MP_COMM_STATE_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/mpi_check.h"
#include "comm/peers.h"
#include "comm/transport.h"

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
    const struct mp_ops *capture; /* the backend whose graph the device collectives started now
                                     go into (mp_comm_capture_begin), or NULL */
    mp_peers peers;             /* what the transports are given of the above (comm/peers.h) */
} mp_comm;

#endif
