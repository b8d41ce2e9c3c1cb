/* The device transport of mp_comm (comm.h), c->dtx: the NCCL transport on a GPU, or, for a
 * backend whose memory is host memory it declares device-like (the staged CPU backend), a
 * second MPI transport over a duplicate of the world, so that the device path (buckets summed in
 * place, the agreement and the ordering on the compute stream, the transport's lifetime) runs
 * in the CPU suite. Invariant, as for
 * the host ones: never more than MP_TRANSPORT_DEPTH started and not seen finished, so the
 * transport's start never blocks; a failure marks the communicator broken (the job must end
 * with mp_comm_abort) and this rank as the one to report it. While a graph is captured
 * (c->capture) a failure is the capture's and the communicator stays whole, unless it is
 * MP_ECOMM (NCCL itself failed: the transport is broken, and so is the communicator); the
 * collectives then started take no part in the invariant (NCCL's are not issued; the MPI
 * transport's run when the graph's host call does, each waited for there). */
#include "comm/comm_device.h"

#include <stdio.h>
#include <string.h>

#include "comm/transport_mpi.h"
#include "comm/transport_nccl.h"
#include "comm/watchdog.h"

mp_status mp_comm_use_device(mp_comm *c, int device, void *compute_stream)
{
    if (c->dtx.ops)
        return mp_fail(MP_EUSAGE, "comm: the device transport is open already");
    MP_TRY(mp_comm_wait(c, c->issued)); /* opening uses c->world outside the host transport */
    if (compute_stream)
        return mp_transport_nccl_open(&c->dtx, &c->peers, device, compute_stream);
    if (c->thread_level < MPI_THREAD_MULTIPLE) /* two transport threads call MPI at once */
        return mp_fail(MP_EUSAGE, "comm: device collectives on host memory need "
                                  "MPI_THREAD_MULTIPLE (MPI provided level %d)", c->thread_level);
    MPI_CHECK(MPI_Comm_dup(c->world, &c->dworld));
    mp_status st = mp_transport_mpi_open(&c->dtx, &c->peers, c->dworld);
    if (st != MP_OK)
        MPI_Comm_free(&c->dworld);
    return st;
}

void mp_comm_drop_device(mp_comm *c)
{
    if (!c->dtx.ops)
        return;
    bool host = c->dworld != MPI_COMM_NULL;
    if (!(host && c->broken)) /* a broken MPI transport's worker may be stuck inside MPI */
        c->dtx.ops->close(c->dtx.self);
    memset(&c->dtx, 0, sizeof c->dtx);
    c->dissued = 0;
    int fin = 0;
    MPI_Finalized(&fin);
    if (host && !fin && !c->broken) /* a broken one is left to the abort that ends the job */
        MPI_Comm_free(&c->dworld);
    c->dworld = MPI_COMM_NULL;
}

bool mp_comm_has_device(const mp_comm *c)
{
    return c->dtx.ops != NULL;
}

bool mp_comm_device_orders(const mp_comm *c)
{
    return c->dtx.ops && c->dtx.ops->order && !c->capture;
}

/* A failed device call: the communicator is broken and this rank reports. */
static mp_status broken(mp_comm *c, mp_status st)
{
    c->broken = true;
    c->report = true;
    return st;
}

static mp_status need_device(const mp_comm *c, const char *what)
{
    if (!c->dtx.ops)
        return mp_fail(MP_EINTERNAL, "comm: %s: no device transport (mp_comm_use_device)", what);
    return MP_OK;
}

/* Room for one more ticket on the device transport: never more than MP_TRANSPORT_DEPTH are
 * outstanding (the oldest is waited for first, on the host, under timeout_s). */
static mp_status make_room(mp_comm *c)
{
    if (c->dissued < MP_TRANSPORT_DEPTH)
        return MP_OK;
    return mp_comm_device_wait(c, c->dissued - MP_TRANSPORT_DEPTH + 1);
}

/* A collective the staged CPU backend's graph holds: started and waited for where the graph's
 * host call runs (mp_comm_capture_begin). */
typedef struct recorded_coll {
    mp_comm *c;
    mp_coll coll;
} recorded_coll;

static mp_status run_recorded(const void *arg)
{
    const recorded_coll *r = arg;
    uint64_t ticket = 0;
    MP_TRY(mp_comm_device_start(r->c, &r->coll, &ticket));
    return mp_comm_device_wait(r->c, ticket);
}

/* A failure st while a graph is captured: the capture's alone (a CUDA call: MP_EINTERNAL), or,
 * MP_ECOMM, the communicator's. */
static mp_status capture_failed(mp_comm *c, mp_status st)
{
    return st == MP_ECOMM ? broken(c, st) : st;
}

/* mp_comm_device_start while a graph is captured. */
static mp_status capture_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket)
{
    if (c->dtx.ops->capture)
        return capture_failed(c, c->dtx.ops->start(c->dtx.self, coll, ticket));
    recorded_coll r = {c, *coll};
    *ticket = MP_TICKET_CAPTURED;
    return c->capture->graph_call(run_recorded, &r, sizeof r);
}

mp_status mp_comm_device_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket)
{
    MP_TRY(need_device(c, coll->what));
    if (c->broken) /* the failure's message stays the one to print */
        return MP_ECOMM;
    if (c->capture)
        return capture_start(c, coll, ticket);
    MP_TRY(make_room(c));
    mp_status st = c->dtx.ops->start(c->dtx.self, coll, ticket);
    if (st != MP_OK)
        return broken(c, st);
    c->dissued = *ticket;
    return MP_OK;
}

mp_status mp_comm_device_order(mp_comm *c, uint64_t ticket, bool *waited)
{
    MP_TRY(need_device(c, "ordering the compute stream"));
    *waited = !c->dtx.ops->order;
    if ((ticket & MP_TICKET_CAPTURED) && c->capture && !c->dtx.ops->order) {
        *waited = false; /* the recorded call waits in place */
        return MP_OK;
    }
    if (*waited) /* the compute stream is the host's: it waits */
        return mp_comm_device_wait(c, ticket);
    mp_status st = c->dtx.ops->order(c->dtx.self, ticket);
    if (st != MP_OK)
        return c->capture ? capture_failed(c, st) : broken(c, st);
    return MP_OK;
}

mp_status mp_comm_device_wait(mp_comm *c, uint64_t ticket)
{
    MP_TRY(need_device(c, "waiting"));
    if (c->capture || (ticket & MP_TICKET_CAPTURED))
        return mp_fail(MP_EINTERNAL, "comm: the host waits for a device collective inside a "
                       "graph's capture, which the graph cannot hold");
    bool done = false;
    mp_status st = c->dtx.ops->wait(c->dtx.self, ticket, c->timeout_s, &done);
    if (st != MP_OK)
        return broken(c, st);
    if (done)
        return MP_OK;
    mp_coll coll;
    uint64_t oldest = 0;
    bool any = c->dtx.ops->pending(c->dtx.self, &coll, &oldest);
    return broken(c, mp_fail(MP_ECOMM, "comm: [rank %d @ %s] timed out after %g s "
                             "(comm.timeout_s) in %s at step %lld (%s)", c->rank, c->host,
                             c->timeout_s, any ? coll.what : "a device collective",
                             (long long)c->step, c->dtx.ops->name));
}

bool mp_comm_can_capture(const mp_comm *c, const mp_ops *mem)
{
    if (c->size == 1)
        return true;
    if (!c->dtx.ops)
        return false;
    return c->dtx.ops->capture || (!c->dtx.ops->order && mem->graph_call && !mem->queue());
}

mp_status mp_comm_capture_begin(mp_comm *c, const mp_ops *mem)
{
    if (c->capture)
        return mp_fail(MP_EINTERNAL, "comm: a capture is under way already");
    if (c->broken)
        return MP_ECOMM;
    if (c->dtx.ops && c->dtx.ops->capture)
        MP_TRY(c->dtx.ops->capture(c->dtx.self, true));
    c->capture = mem;
    return MP_OK;
}

mp_status mp_comm_capture_end(mp_comm *c)
{
    if (!c->capture)
        return MP_OK;
    c->capture = NULL;
    return c->dtx.ops && c->dtx.ops->capture ? c->dtx.ops->capture(c->dtx.self, false) : MP_OK;
}

mp_status mp_comm_graph_launch(mp_comm *c, const mp_ops *mem, void *graph, const char *what)
{
    if (!c->dtx.ops || !c->dtx.ops->launch)
        return mem->graph_launch(graph);
    if (c->broken)
        return MP_ECOMM;
    MP_TRY(make_room(c));
    uint64_t ticket = 0;
    mp_status st = c->dtx.ops->launch(c->dtx.self, mem->graph_launch, graph, what, &ticket);
    if (st != MP_OK)
        return broken(c, st);
    c->dissued = ticket;
    return MP_OK;
}
