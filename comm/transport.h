/* A transport runs the communicator's collectives on its own stream of execution, one after the
 * other in the order they were started, while the caller goes on (the "comm stream" of
 * docs/ARCHITECTURE.md §2). Tickets number the collectives from 1; waiting for a ticket waits for
 * every collective up to it. The MPI transport (comm/transport_mpi.c) runs them on a worker thread
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

typedef enum mp_coll_kind {
    MP_COLL_ALLREDUCE,      /* buf: count elements, each replaced by its reduction over ranks */
    MP_COLL_BCAST,          /* buf: count bytes, root's on every rank */
    MP_COLL_REDUCE_SCATTER, /* buf: count elements in rank blocks (mp_coll_piece); afterwards
                               each rank's piece holds the sum over ranks of that piece, and the
                               rest of buf on that rank is not summed: each element holds zero or
                               what it held before (so zero stays zero: gradient padding) */
    MP_COLL_ALLGATHER       /* buf: count elements in rank blocks; afterwards every rank holds
                               each rank's piece as that rank had it */
} mp_coll_kind;

/* One collective as it is queued; every kind works in place. The block kinds see buf as a slice
 * of a larger buffer cut into blocks of `block` elements, block r belonging to rank r (a ZeRO
 * shard), buf starting at element `base` of it: a gradient bucket anywhere in a flat buffer, or
 * (base 0, count = size x block) the whole buffer, NCCL's in-place ncclReduceScatter and
 * ncclAllGather. Every element of buf must have an owner: base + count <= size x block. */
typedef struct mp_coll {
    mp_coll_kind kind;
    void *buf;       /* the transport's memory */
    size_t count;    /* elements of dtype; bytes for bcast */
    mp_dtype dtype;  /* not bcast */
    mp_redop op;     /* allreduce; reduce-scatter sums */
    int root;        /* bcast */
    size_t block, base; /* reduce-scatter, all-gather: see above */
    char what[96];   /* for messages */
} mp_coll;

/* Rank `rank`'s piece of a block collective's buf: elements [*lo, *lo + *n), empty (n 0) when
 * buf does not reach into its block. */
static inline void mp_coll_piece(const mp_coll *c, int rank, size_t *lo, size_t *n)
{
    size_t from = (size_t)rank * c->block, to = from + c->block, end = c->base + c->count;
    from = from > c->base ? from : c->base;
    to = to < end ? to : end;
    *lo = from - c->base;
    *n = to > from ? to - from : 0;
    if (*n == 0)
        *lo = 0;
}

/* Whether a block collective's buf is the whole blocked buffer (base 0, size x block). */
static inline bool mp_coll_whole(const mp_coll *c, int size)
{
    return c->base == 0 && c->count == (size_t)size * c->block;
}

/* The bytes of buf a collective covers, [*lo, *lo + *bytes), that it reads (`result` false) or
 * leaves defined (`result` true) on rank `rank`: all of it, except the rank's own piece for what
 * an all-gather reads and what a reduce-scatter leaves. */
static inline void mp_coll_span(const mp_coll *c, int rank, bool result, size_t *lo,
                                size_t *bytes)
{
    size_t elem = c->kind == MP_COLL_BCAST ? 1 : mp_dtype_size(c->dtype), n = c->count;
    *lo = 0;
    if ((c->kind == MP_COLL_ALLGATHER && !result) ||
        (c->kind == MP_COLL_REDUCE_SCATTER && result))
        mp_coll_piece(c, rank, lo, &n);
    *lo *= elem;
    *bytes = n * elem;
}

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
    /* Optional, with order (NCCL): graphs (docs/gpu.md). capture(self, true), while the
     * compute stream captures a graph, makes the collectives started until capture(self,
     * false) parts of that graph instead of running them: each is forked from the compute
     * stream and its end is a point the compute stream can wait on inside the graph; their
     * tickets have MP_TICKET_CAPTURED set and serve order alone. capture(self, false) joins
     * the last of them back into the compute stream (before the caller ends the capture). */
    mp_status (*capture)(void *self, bool begin);
    /* Optional, with capture: runs run(graph), the launch on the compute stream of a graph that
     * holds captured collectives, after every collective started before it, and gives the
     * launch a ticket of its own (*ticket), which wait and the watchdog treat as one
     * collective named `what`: the graph's collectives run inside it, and events recorded in
     * a capture record nothing at a launch. */
    mp_status (*launch)(void *self, mp_status (*run)(void *graph), void *graph, const char *what,
                        uint64_t *ticket);
} mp_transport_ops;

/* Set in the tickets of captured collectives (mp_transport_ops.capture). */
#define MP_TICKET_CAPTURED (UINT64_C(1) << 62)

typedef struct mp_transport {
    const mp_transport_ops *ops;
    void *self;
} mp_transport;

#endif
