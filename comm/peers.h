/* What the leaves of comm/ (the transports, the NCCL census and helpers, bench-comm's bare NCCL
 * communicator) know of the ranks they serve (docs/ARCHITECTURE.md §5): the MPI communicator, who
 * is on it, MPI's types for half sums, the communicator's current limit and step, and a way to
 * end the job. The communicator (comm/comm.h) owns one, filled at start-up and constant after,
 * and hands a pointer to each leaf, so that no leaf reaches back into the communicator. */
#ifndef MP_PEERS_H
#define MP_PEERS_H

#include <mpi.h>
#include <stdint.h>

#define MP_HOST_MAX 64 /* bytes of a host name as messages print it */

typedef struct mp_peers {
    MPI_Comm world;                   /* the ranks (errors returned, not fatal) */
    int rank, size;
    int thread_level;                 /* what MPI_Init_thread provided */
    const char (*hosts)[MP_HOST_MAX]; /* (size) every rank's host name */
    MPI_Datatype half_word;           /* two bytes, for fp16/bf16 reductions */
    MPI_Op sum_f16, sum_bf16;         /* their sums in FP32, rounded once (comm/halfsum.c) */
    const double *timeout_s;          /* the owner's comm.timeout_s, read when it is used */
    const int64_t *step;              /* the owner's training step (messages); -1 outside */
    void (*abort)(void *owner, int code); /* ends every rank at once, from any thread */
    void *owner;                      /* abort's argument */
} mp_peers;

/* Rank `rank`'s host name ("?" out of range or before the names are known). */
static inline const char *mp_peers_host(const mp_peers *p, int rank)
{
    return p->hosts && rank >= 0 && rank < p->size ? p->hosts[rank] : "?";
}

#endif
