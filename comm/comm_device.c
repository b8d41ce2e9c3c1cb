/* The device transport of mp_comm (comm.h), c->dtx: the NCCL transport on a GPU, or, for a
 * backend whose memory is host memory it declares device-like (the staged CPU backend), a
 * second MPI transport over a duplicate of the world, so that the device path (buckets summed in
 * place, the agreement and the ordering on the compute stream, the transport's lifetime) runs
 * in the CPU suite. Invariant, as for
 * the host ones: never more than MP_TRANSPORT_DEPTH started and not seen finished, so the
 * transport's start never blocks; a failure marks the communicator broken (the job must end
 * with mp_comm_abort) and this rank as the one to report it. */
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

mp_status mp_comm_device_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket)
{
    MP_TRY(need_device(c, coll->what));
    if (c->broken) /* the failure's message stays the one to print */
        return MP_ECOMM;
    if (c->dissued >= MP_TRANSPORT_DEPTH)
        MP_TRY(mp_comm_device_wait(c, c->dissued - MP_TRANSPORT_DEPTH + 1));
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
    if (*waited) /* the compute stream is the host's: it waits */
        return mp_comm_device_wait(c, ticket);
    mp_status st = c->dtx.ops->order(c->dtx.self, ticket);
    return st == MP_OK ? MP_OK : broken(c, st);
}

mp_status mp_comm_device_wait(mp_comm *c, uint64_t ticket)
{
    MP_TRY(need_device(c, "waiting"));
    bool done = false;
    mp_status st = c->dtx.ops->wait(c->dtx.self, ticket, c->timeout_s, &done);
    if (st != MP_OK)
        return broken(c, st);
    if (done)
        return MP_OK;
    mp_coll coll;
    uint64_t oldest = 0;
    bool any = c->dtx.ops->pending(c->dtx.self, &coll, &oldest);
    return broken(c, mp_fail(MP_ECOMM, "comm: [rank %d @ %s] timed out after %.0f s "
                             "(comm.timeout_s) in %s at step %lld (%s)", c->rank, c->host,
                             c->timeout_s, any ? coll.what : "a device collective",
                             (long long)c->step, c->dtx.ops->name));
}
