/* The data plane (comm.h, mp_comm_coll_*): collectives on a backend's memory. Host memory goes
 * to the host transport, other memory to the device transport when it is open, else through a
 * host copy (the staged route). Invariants: a data ticket is its route's ticket, with DEVICE set
 * for the device transport; staged records are kept in start order (their host tickets
 * increase), at most MP_TRANSPORT_DEPTH, each holding one host block from when its collective
 * starts until its result is copied back, so no block is in two collectives at once; a staged
 * collective whose input overlaps an earlier one's result starts only after that result is
 * back, so the staged route sees collectives in order as the other routes do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll.h"
#include "comm/comm_device.h"
#include "comm/watchdog.h"

#define DEVICE (UINT64_C(1) << 63)

typedef struct stage_block {
    void *host;        /* mem->host_alloc (pinned on CUDA) */
    size_t cap;
    const mp_ops *mem; /* whose host_alloc made it */
    bool busy;
} stage_block;

typedef struct stage_rec {
    uint64_t ticket;   /* on the host transport */
    const mp_ops *mem;
    char *dev;         /* the caller's buffer */
    int block;
    size_t lo, bytes;  /* what comes back: mp_coll_span's result */
} stage_rec;

struct mp_comm_stage {
    stage_block blocks[MP_TRANSPORT_DEPTH];
    stage_rec recs[MP_TRANSPORT_DEPTH];
    int head, n; /* the records: a ring, the oldest at head */
};

mp_status mp_comm_host_start(mp_comm *c, const mp_coll *coll, uint64_t *ticket)
{
    if (c->broken) /* the failure's message stays the one to print */
        return MP_ECOMM;
    if (c->capture)
        return mp_fail(MP_EINTERNAL, "comm: %s: a host collective inside a graph's capture, "
                       "which the graph cannot hold", coll->what);
    if (c->issued >= MP_TRANSPORT_DEPTH)
        MP_TRY(mp_comm_wait(c, c->issued - MP_TRANSPORT_DEPTH + 1));
    MP_TRY(c->tx.ops->start(c->tx.self, coll, ticket));
    c->issued = *ticket;
    return MP_OK;
}

/* Waits for the host collectives up to `ticket` and copies the staged results among them back
 * into backend memory, freeing their blocks. */
static mp_status copy_back(mp_comm *c, uint64_t ticket)
{
    MP_TRY(mp_comm_wait(c, ticket));
    struct mp_comm_stage *s = c->stage;
    while (s && s->n > 0 && s->recs[s->head].ticket <= ticket) {
        stage_rec *r = &s->recs[s->head];
        stage_block *b = &s->blocks[r->block];
        MP_TRY(r->mem->copy_in(r->dev + r->lo, (char *)b->host + r->lo, r->bytes));
        b->busy = false;
        s->head = (s->head + 1) % MP_TRANSPORT_DEPTH;
        s->n--;
    }
    return MP_OK;
}

/* A free block of at least `bytes` made by mem: a fitting one, else an empty slot, else a free
 * one reallocated (after the backend's queue drained: a copy_in may still read it). */
static mp_status acquire(struct mp_comm_stage *s, const mp_ops *mem, size_t bytes, int *out)
{
    int empty = -1, other = -1;
    for (int i = 0; i < MP_TRANSPORT_DEPTH; i++) {
        stage_block *b = &s->blocks[i];
        if (b->busy)
            continue;
        if (b->host && b->mem == mem && b->cap >= bytes) {
            *out = i;
            return MP_OK;
        }
        if (!b->host && empty < 0)
            empty = i;
        if (b->host && other < 0)
            other = i;
    }
    int i = empty >= 0 ? empty : other;
    if (i < 0) /* more blocks busy than records: cannot be */
        return mp_fail(MP_EINTERNAL, "comm: every staging block is in use");
    stage_block *b = &s->blocks[i];
    if (b->host) {
        MP_TRY(b->mem->sync());
        b->mem->host_free(b->host);
    }
    *b = (stage_block){.host = mem->host_alloc(bytes, MP_MEM_WORKSPACE), .cap = bytes, .mem = mem};
    if (!b->host)
        return mp_fail(MP_EINTERNAL, "comm: out of host memory for a %zu-byte copy of a "
                                     "collective's buffer", bytes);
    *out = i;
    return MP_OK;
}

static mp_status staged_start(mp_comm *c, const mp_ops *mem, const mp_coll *coll,
                              uint64_t *ticket)
{
    if (!c->stage && !(c->stage = calloc(1, sizeof *c->stage)))
        return mp_fail(MP_EINTERNAL, "comm: out of host memory for the staging records");
    struct mp_comm_stage *s = c->stage;
    if (s->n == MP_TRANSPORT_DEPTH)
        MP_TRY(copy_back(c, s->recs[s->head].ticket));
    size_t in_lo, in_bytes, out_lo, out_bytes;
    mp_coll_span(coll, c->rank, false, &in_lo, &in_bytes);
    mp_coll_span(coll, c->rank, true, &out_lo, &out_bytes);
    size_t end = in_lo + in_bytes > out_lo + out_bytes ? in_lo + in_bytes : out_lo + out_bytes;
    const char *from = (const char *)coll->buf + in_lo, *to = from + in_bytes;
    for (int i = s->n - 1; i >= 0; i--) { /* an earlier result it reads comes back first */
        const stage_rec *r = &s->recs[(s->head + i) % MP_TRANSPORT_DEPTH];
        if (r->dev + r->lo < to && from < r->dev + r->lo + r->bytes) {
            MP_TRY(copy_back(c, r->ticket));
            break;
        }
    }
    int k = 0;
    MP_TRY(acquire(s, mem, end, &k));
    stage_block *b = &s->blocks[k];
    MP_TRY(mem->copy_out((char *)b->host + in_lo, (const char *)coll->buf + in_lo, in_bytes));
    mp_coll h = *coll;
    h.buf = b->host;
    MP_TRY(mp_comm_host_start(c, &h, ticket));
    b->busy = true;
    s->recs[(s->head + s->n) % MP_TRANSPORT_DEPTH] =
        (stage_rec){*ticket, mem, coll->buf, k, out_lo, out_bytes};
    s->n++;
    return MP_OK;
}

mp_coll mp_coll_of(mp_coll_kind kind, void *buf, size_t count, mp_dtype dt, mp_redop op,
                   const char *what)
{
    mp_coll c = {.kind = kind, .buf = buf, .count = count, .dtype = dt, .op = op};
    snprintf(c.what, sizeof c.what, "%s", what);
    return c;
}

mp_coll mp_coll_blocks(mp_coll_kind kind, void *buf, size_t count, mp_dtype dt, size_t block,
                       size_t base, const char *what)
{
    mp_coll c = mp_coll_of(kind, buf, count, dt, MP_REDOP_SUM, what);
    c.block = block;
    c.base = base;
    return c;
}

/* MP_EINTERNAL for a block collective with elements no rank owns. */
static mp_status check_blocks(const mp_comm *c, const mp_coll *coll)
{
    if (coll->kind != MP_COLL_REDUCE_SCATTER && coll->kind != MP_COLL_ALLGATHER)
        return MP_OK;
    if (coll->block == 0 || coll->base + coll->count > (size_t)c->size * coll->block)
        return mp_fail(MP_EINTERNAL, "comm: %s: elements [%zu, %zu) reach past %d blocks of %zu",
                       coll->what, coll->base, coll->base + coll->count, c->size, coll->block);
    return MP_OK;
}

mp_status mp_comm_coll_start(mp_comm *c, const mp_ops *mem, const mp_coll *coll,
                             uint64_t *ticket)
{
    MP_TRY(check_blocks(c, coll));
    if (!mem || mem->host_memory)
        return mp_comm_host_start(c, coll, ticket);
    if (!c->dtx.ops)
        return staged_start(c, mem, coll, ticket);
    MP_TRY(mp_comm_device_start(c, coll, ticket));
    *ticket |= DEVICE;
    return MP_OK;
}

mp_status mp_comm_coll_order(mp_comm *c, uint64_t ticket, bool *waited)
{
    if (ticket & DEVICE)
        return mp_comm_device_order(c, ticket & ~DEVICE, waited);
    *waited = true;
    return copy_back(c, ticket);
}

mp_status mp_comm_coll_wait(mp_comm *c, uint64_t ticket)
{
    if (ticket & DEVICE)
        return mp_comm_device_wait(c, ticket & ~DEVICE);
    return copy_back(c, ticket);
}

void mp_comm_stage_free(mp_comm *c)
{
    struct mp_comm_stage *s = c->stage;
    for (int i = 0; s && i < MP_TRANSPORT_DEPTH; i++)
        if (s->blocks[i].host)
            s->blocks[i].mem->host_free(s->blocks[i].host);
    free(s);
    c->stage = NULL;
}
