/* A transport runs the communicator's collectives on its own stream of execution, one after the
 * other in the order they were started, while the caller goes on (the "comm stream" of
 * DESIGN §2). Tickets number the collectives from 1; waiting for a ticket waits for every
 * collective up to it. The MPI transport (comm/transport_mpi.c) runs them on a worker thread
 * with blocking MPI collectives on host memory; the NCCL transport (comm/transport_nccl.c)
 * enqueues them on a CUDA stream on device memory and tests an event, behind the same table. */
#ifndef MP_TRANSPORT_H
#define MP_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/dtype.h"
#include "engine/status.h"

typedef enum mp_redop { MP_REDOP_SUM, MP_REDOP_MAX } mp_redop;

/* Collectives a transport holds started but unfinished; the communicator never starts more
 * (it first waits, under the watchdog, for the oldest), so start never blocks. */
#define MP_TRANSPORT_DEPTH 256

typedef enum mp_coll_kind { MP_COLL_ALLREDUCE, MP_COLL_BCAST } mp_coll_kind;

/* One collective as it is queued. */
typedef struct mp_coll {
    mp_coll_kind kind;
    void *buf;       /* in place; the transport's memory */
    size_t count;    /* elements of dtype (allreduce), bytes (bcast) */
    mp_dtype dtype;  /* allreduce */
    mp_redop op;     /* allreduce */
    int root;        /* bcast */
    char what[96];   /* for messages */
} mp_coll;

typedef struct mp_transport_ops {
    const char *name; /* "mpi", "nccl" */
    /* Queues *c behind the collectives started before; *ticket is its number. */
    mp_status (*start)(void *self, const mp_coll *c, uint64_t *ticket);
    /* Waits up to `seconds` for every collective up to `ticket`; *done says whether they all
     * finished. A failed collective returns its status with its message (on this thread). */
    mp_status (*wait)(void *self, uint64_t ticket, double seconds, bool *done);
    /* The collective with the lowest unfinished ticket, copied into *c; false when none. */
    bool (*pending)(void *self, mp_coll *c, uint64_t *ticket);
    /* Waits for what was started, stops and frees the transport. */
    void (*close)(void *self);
    /* Optional (NULL when the caller's stream of execution is the host's): makes the caller's
     * compute stream wait for every collective up to `ticket` without the host waiting. */
    mp_status (*order)(void *self, uint64_t ticket);
    /* Optional: abandons every collective at once, from any thread, so that nothing hangs
     * while the job ends; afterwards only close may be called. */
    void (*abort)(void *self);
} mp_transport_ops;

typedef struct mp_transport {
    const mp_transport_ops *ops;
    void *self;
} mp_transport;

#endif
