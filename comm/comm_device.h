/* The device transport of the communicator, c->dtx (comm/comm_device.c): opening and closing
 * it, and the device route of the data plane (comm/coll.c) on it. */
#ifndef MP_COMM_DEVICE_H
#define MP_COMM_DEVICE_H

#include "comm/comm_state.h"
#include "engine/ops.h"

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

/* Whether mp_comm_coll_order leaves the host free of the device collectives' sums now: a device
 * transport with a stream of its own (NCCL) and no capture under way. The caller may then time
 * the sums with its backend's marks (comm/buckets.c). Not collective. */
bool mp_comm_device_orders(const mp_comm *c);

/* Starts *coll on the device transport, ordered after the work queued on the compute stream so
 * far; never more than MP_TRANSPORT_DEPTH are outstanding (the oldest is waited for first, on
 * the host, under timeout_s). MP_ECOMM once a device collective failed. */
mp_status mp_comm_device_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket);

/* Makes the compute stream wait for every device collective up to `ticket` (0: none); where
 * the transport has no stream of its own the host waits. *waited says which. */
mp_status mp_comm_device_order(mp_comm *c, uint64_t ticket, bool *waited);

/* The host waits for every device collective up to `ticket`, at most timeout_s. MP_ECOMM when
 * one failed or the time passed (the NCCL watchdog usually ends the job first). */
mp_status mp_comm_device_wait(mp_comm *c, uint64_t ticket);

/* Graphs (docs/gpu.md): whether a step captured as a graph of backend `mem` can hold this
 * communicator's collectives: one rank (none), or device collectives on a transport that
 * captures them (NCCL) or on the staged CPU backend's MPI transport (each a host call in the
 * graph: mem->graph_call). Not collective. */
bool mp_comm_can_capture(const mp_comm *c, const mp_ops *mem);

/* Before mem->graph_begin: the device collectives started until mp_comm_capture_end go into
 * the graph (their tickets serve mp_comm_coll_order alone, and waiting on the host for one is
 * MP_EINTERNAL) and a host collective started meanwhile is MP_EINTERNAL. A failure while
 * capturing fails the capture, not the communicator. Not collective (the capture and the
 * launches of its graph are: every rank captures the same step). */
mp_status mp_comm_capture_begin(mp_comm *c, const mp_ops *mem);

/* Before mem->graph_end, also after a failure: joins the captured collectives back into the
 * compute stream and ends the capture mode. Not collective. */
mp_status mp_comm_capture_end(mp_comm *c);

/* Launches a graph of backend `mem` (mem->graph_launch) that may hold device collectives, named
 * `what` in the watchdog's messages: on NCCL after every collective started before it, as one
 * ticket the watchdog times; elsewhere as it is. Collective: every rank launches the same
 * graph. MP_ECOMM once a device collective failed. */
mp_status mp_comm_graph_launch(mp_comm *c, const mp_ops *mem, void *graph, const char *what);

#endif
