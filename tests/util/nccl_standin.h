/* A stand-in for NCCL and the CUDA stream and event calls of comm/transport_nccl.c, for tests
 * on machines without a GPU (issue 46). It is linked into one test program only, whose link
 * line wraps each call the transport makes (-Wl,--wrap=SYMBOL, tests/CMakeLists.txt): the
 * product's own object code then runs against it; the product binary never contains it, and
 * the real NCCL runs on a GPU machine (tests/gpu/run.sh).
 *
 * Model: a communicator is a duplicate of MPI_COMM_WORLD; "device memory" is host memory; a
 * stream is a queue run in order by a worker thread of its own, as a GPU runs a CUDA stream
 * beside the host, so a collective call only queues it (nothing blocks the caller) and its
 * worker runs it later with non-blocking MPI; an event is complete once its stream has
 * finished what was queued before it, and cudaStreamWaitEvent queues a wait. Sums are in rank
 * order in the dtype's own arithmetic, rounding after each addition as a ring does
 * (comm/halfsum.h's rule per addition for the half types): on 2 ranks a sum is one rounding,
 * the MPI transport's bytes. The communicator is non-blocking: finalize is an MPI_Ibarrier,
 * started once its launches have finished, that ncclCommGetAsyncError polls; abort drops its
 * queued work. The stand-in checks the transport's invariant that NCCL calls on a
 * communicator never overlap (two threads inside at once abort the process with a message),
 * that in-place reduce-scatter and all-gather pass NCCL's in-place offsets, that the unique id
 * every rank passes is rank 0's, and that a communicator is destroyed only once finalized.
 *
 * Faults (mp_standin_fault, or the environment variable MPDIST_NCCL_STANDIN at the first
 * ncclCommInitRankConfig), comma-separated; R is a rank or '*' for every rank, K counts the
 * launches (a collective outside a group, or a group's end) from 1:
 *   inprogress:N  every call that may run asynchronously returns ncclInProgress, and
 *                 ncclCommGetAsyncError says ncclInProgress N times before the result
 *   initstuck:R   rank R's communicator never finishes forming
 *   async:R:K     launch K fails on rank R: it never finishes, and from then on
 *                 ncclCommGetAsyncError reports ncclSystemError there
 *   late:R:K      the same error, but launch K itself finishes (a failure between steps)
 *   hang:R:K      launch K on rank R moves its data, then never finishes, and nothing queued
 *                 after it on that stream runs: the others go on to the next collective and
 *                 wait there for rank R
 *   rs_offset     every reduce-scatter writes its result rotated by one element (as a
 *                 transport passing a wrong offset would), to show that a test catches it
 * A rank stopped with SIGSTOP stops its workers too, so the others wait inside the collective,
 * as on a GPU. */
#ifndef MP_NCCL_STANDIN_H
#define MP_NCCL_STANDIN_H

#include <stdbool.h>

/* Sets the faults of communicators created from now on (NULL or "": none); overrides the
 * environment. Not thread-safe; call between communicators. */
void mp_standin_fault(const char *spec);

/* A new stand-in stream (a cudaStream_t as void *), for a test's compute stream. */
void *mp_standin_stream(void);

/* How many launches the stand-in ran on this rank since the process started. */
long mp_standin_launches(void);

/* CUDA graphs for the transport's capture mode (cudaStreamBeginCapture, EndCapture,
 * GraphLaunch, GraphExecDestroy, which the backend calls, not the transport): begin makes
 * what is queued on `stream` and on the streams that join it (by waiting on an event recorded
 * in the capture) items of a graph instead of running them; end returns the graph, or NULL
 * (saying why on stderr) when a stream was left unjoined or a wait reached outside the
 * capture; launch queues one run of its items, in the order they were captured, on `stream`
 * (false: out of memory); free frees a graph (NULL is ignored). A collective's faults (hang,
 * async) are drawn when it is captured and apply at every launch. */
void mp_standin_capture_begin(void *stream);
void *mp_standin_capture_end(void *stream);
bool mp_standin_graph_launch(void *graph, void *stream);
void mp_standin_graph_free(void *graph);

#endif
