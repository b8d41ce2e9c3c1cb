/* What the two files of the NCCL stand-in share (see nccl_standin.h): a stream is a queue of
 * work run in order by a worker thread of its own, as a GPU runs a CUDA stream beside the host;
 * nccl_standin.c queues the collectives (a launch: one, or a group's), nccl_standin_stream.c
 * runs the queues and answers the CUDA stream and event calls. */
#ifndef MP_NCCL_STANDIN_INTERNAL_H
#define MP_NCCL_STANDIN_INTERNAL_H

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ncclComm {
    MPI_Comm mpi;
    int rank, size;
    int polls;            /* ncclCommGetAsyncError answers ncclInProgress this many more times */
    bool init_stuck;      /* never finishes forming */
    atomic_int async;     /* the injected asynchronous error, ncclSuccess when none */
    atomic_bool aborted;  /* ncclCommAbort: queued work on it is dropped */
    atomic_long inflight; /* launches queued and not finished */
    MPI_Request fin;      /* the finalize barrier while it runs, else MPI_REQUEST_NULL */
    bool finalizing;      /* ncclCommFinalize was called: the barrier starts once inflight is 0 */
    long launches;
    char last[256];       /* ncclGetLastError */
};

/* One collective of a launch, with NCCL's arguments. */
typedef struct sk_coll {
    int kind; /* SK_ALLREDUCE ... */
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    struct sk_coll *next;
} sk_coll;

enum { SK_ALLREDUCE, SK_REDUCE, SK_BCAST, SK_REDUCE_SCATTER, SK_ALLGATHER };

struct sk_graph;

/* One item of a stream's queue: a launch (colls on comm), a graph's launch (graph: its items
 * run in order), or, with both NULL, a wait for the work queued on wait_stream up to wait_seq
 * (cudaStreamWaitEvent). */
typedef struct sk_op {
    struct sk_op *next;
    struct sk_graph *graph;
    sk_coll *colls;
    struct ncclComm *comm;
    long launch;           /* its number on comm, for messages */
    bool hang;             /* the fault: it runs, but neither it nor anything after finishes */
    bool fail, fail_late;  /* the fault: an asynchronous error, with it stuck or finished */
    cudaStream_t wait_stream;
    uint64_t wait_seq;
} sk_op;

/* A capture (mp_standin_capture_begin): the items queued on the streams that joined it, in the
 * order they were queued (one valid order of CUDA's graph), which a launch runs in turn. A
 * stream joins by waiting on an event recorded in the capture; each must be joined back (the
 * origin waits on an event recorded on it after its last item) before the capture ends. */
#define SK_GRAPH_STREAMS 4
typedef struct sk_graph {
    sk_op *head, *tail;
    cudaStream_t streams[SK_GRAPH_STREAMS]; /* [0]: the origin */
    uint64_t items[SK_GRAPH_STREAMS];       /* queued on each */
    uint64_t joined[SK_GRAPH_STREAMS];      /* the origin waited for this many of them */
    int nstreams;
    bool ended;
    const char *invalid; /* why the capture failed, or NULL */
    struct ncclComm *comm; /* of its collectives */
} sk_graph;

struct CUstream_st {
    pthread_mutex_t mu;
    sk_graph *capture; /* the capture its items go to, or NULL */
    sk_op *head, *tail;
    uint64_t queued, done; /* items queued and finished since the stream was made */
    bool stuck, quit;
    bool worker_on;
    pthread_t worker;
};

struct CUevent_st {
    cudaStream_t stream; /* where it was last recorded; NULL: never (complete) */
    uint64_t seq;        /* complete once the stream has finished this many items */
    sk_graph *graph;     /* recorded in this capture (seq then counts the stream's items in it),
                            or NULL */
};

/* Queues op on s (its worker starts with the first), or, while s captures, appends it to the
 * capture; true when it was captured. */
bool sk_stream_push(cudaStream_t s, sk_op *op);

/* Runs one collective with non-blocking MPI on comm, polling; false when abandoned (the
 * communicator aborted or the stream asked to quit): nccl_standin.c. */
bool sk_run(const sk_coll *c, struct ncclComm *comm, cudaStream_t s);

/* Whether the stream's worker should drop what it runs (locked read). */
bool sk_stream_quitting(cudaStream_t s);

#endif
