/* The device collectives of mp_comm (comm.h) on the NCCL transport c->dtx. Invariant, as for
 * the host ones: never more than MP_TRANSPORT_DEPTH started and not seen finished, so the
 * transport's start never blocks; a failure marks the communicator broken (the job must end
 * with mp_comm_abort) and this rank as the one to report it. */
#include "comm/comm.h"

#include <stdio.h>
#include <string.h>

#include "comm/transport_nccl.h"

mp_status mp_comm_use_device(mp_comm *c, int device, void *compute_stream)
{
    if (c->dtx.ops)
        return mp_fail(MP_EUSAGE, "comm: the device transport is open already");
    MP_TRY(mp_comm_wait(c, c->issued)); /* opening uses c->world outside the host transport */
    return mp_transport_nccl_open(&c->dtx, c, device, compute_stream);
}

void mp_comm_drop_device(mp_comm *c)
{
    if (!c->dtx.ops)
        return;
    c->dtx.ops->close(c->dtx.self);
    memset(&c->dtx, 0, sizeof c->dtx);
    c->dissued = 0;
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

mp_status mp_comm_device_allreduce_start(mp_comm *c, void *dev_buf, size_t n, mp_dtype dt,
                                         mp_redop op, const char *what, uint64_t *ticket)
{
    MP_TRY(need_device(c, what));
    if (c->broken) /* the failure's message stays the one to print */
        return MP_ECOMM;
    mp_coll coll = {.kind = MP_COLL_ALLREDUCE, .buf = dev_buf, .count = n, .dtype = dt, .op = op};
    snprintf(coll.what, sizeof coll.what, "%s", what);
    if (c->dissued >= MP_TRANSPORT_DEPTH)
        MP_TRY(mp_comm_device_wait(c, c->dissued - MP_TRANSPORT_DEPTH + 1));
    mp_status st = c->dtx.ops->start(c->dtx.self, &coll, ticket);
    if (st != MP_OK)
        return broken(c, st);
    c->dissued = *ticket;
    return MP_OK;
}

mp_status mp_comm_device_order(mp_comm *c, uint64_t ticket)
{
    MP_TRY(need_device(c, "ordering the compute stream"));
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
                             "(comm.timeout_s) in %s at step %lld (NCCL)", c->rank, c->host,
                             c->timeout_s, any ? coll.what : "a device collective",
                             (long long)c->step));
}
