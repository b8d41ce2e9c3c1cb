/* The bare NCCL communicator (see nccl_raw.h). Invariant: `failed` holds the first failure; once
 * set, the communicator has been aborted and every later call returns it. */
#include "comm/nccl_raw.h"

#ifdef MP_HAVE_NCCL

#include <stdio.h>
#include <stdlib.h>

#include "comm/gpu_check.h"
#include "comm/nap.h"
#include "comm/nccl_util.h"
#include "engine/clock.h"

#define POLL_S 20e-6 /* the wait's polling of the event */

struct mp_nccl_raw {
    const mp_peers *comm;
    ncclComm_t nccl;
    cudaStream_t stream;
    cudaEvent_t done;
    mp_status failed;
};

/* Records r's first failure (returned), aborting the communicator so that nothing waits on it. */
static mp_status fail(mp_nccl_raw *r, mp_status st)
{
    if (r->nccl)
        ncclCommAbort(r->nccl);
    r->nccl = NULL;
    if (r->failed == MP_OK)
        r->failed = st;
    return r->failed;
}

/* This rank's part of setting up: the device, the stream, the event and, on rank 0, the id. */
static mp_status setup(mp_nccl_raw *r, int device, ncclUniqueId *id)
{
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming));
    if (r->comm->rank == 0)
        NCCL_CHECK(ncclGetUniqueId(id));
    return MP_OK;
}

mp_status mp_nccl_raw_open(mp_nccl_raw **out, const mp_peers *c, int device)
{
    mp_nccl_raw *r = calloc(1, sizeof *r);
    ncclUniqueId id = {{0}};
    mp_status st = r ? MP_OK : mp_fail(MP_EINTERNAL, "comm: out of host memory for NCCL");
    if (r) {
        r->comm = c;
        st = setup(r, device, &id);
    }
    ncclComm_t nc = NULL;
    st = mp_nccl_form(c, st, &id, &nc);
    if (r)
        r->nccl = nc;
    if (st != MP_OK) {
        if (r)
            fail(r, st); /* aborted: its peers may be gone */
        mp_nccl_raw_close(r);
        return st;
    }
    *out = r;
    return MP_OK;
}

mp_status mp_nccl_raw_start(mp_nccl_raw *r, const mp_coll *coll)
{
    if (r->failed != MP_OK)
        return r->failed;
    bool blocks = coll->kind == MP_COLL_REDUCE_SCATTER || coll->kind == MP_COLL_ALLGATHER;
    if ((blocks && !mp_coll_whole(coll, r->comm->size)) ||
        (!blocks && coll->kind != MP_COLL_ALLREDUCE))
        return mp_fail(MP_EINTERNAL, "comm: the bare NCCL communicator takes all-reduces and "
                                     "whole-buffer reduce-scatters and all-gathers (%s)",
                       coll->what);
    ncclResult_t rc = mp_nccl_enqueue(r->nccl, r->stream, r->comm->rank, r->comm->size, coll);
    mp_status st = mp_nccl_settle(r->nccl, rc, *r->comm->timeout_s, r->comm->rank,
                                  mp_peers_host(r->comm, r->comm->rank), coll->what);
    return st == MP_OK ? MP_OK : fail(r, st);
}

mp_status mp_nccl_raw_wait(mp_nccl_raw *r, double limit_s)
{
    if (r->failed != MP_OK)
        return r->failed;
    const char *host = mp_peers_host(r->comm, r->comm->rank);
    double t0 = mp_now();
    cudaError_t rc = cudaEventRecord(r->done, r->stream);
    if (rc == cudaSuccess)
        while ((rc = mp_cuda_query(cudaEventQuery(r->done))) == cudaErrorNotReady) {
            if (mp_now() - t0 >= limit_s)
                return fail(r, mp_fail(MP_ECOMM, "comm: [rank %d @ %s] timed out after %g s "
                                                 "(--timeout) in bench-comm's raw NCCL loop",
                                       r->comm->rank, host, limit_s));
            mp_nap(POLL_S);
        }
    if (rc != cudaSuccess)
        return fail(r, mp_check_fail(MP_ECOMM, "cuda", "cudaEventQuery(done)", __FILE__,
                                     __LINE__, cudaGetErrorString(rc)));
    ncclResult_t err = mp_nccl_state(r->nccl);
    if (err != ncclSuccess && err != ncclInProgress)
        return fail(r, mp_fail(MP_ECOMM, "comm: [rank %d @ %s] NCCL failed in bench-comm's raw "
                                         "loop: %s (%s)", r->comm->rank, host,
                               ncclGetErrorString(err), ncclGetLastError(r->nccl)));
    return MP_OK;
}

void mp_nccl_raw_close(mp_nccl_raw *r)
{
    if (!r)
        return;
    if (r->nccl && r->failed == MP_OK && mp_nccl_raw_wait(r, *r->comm->timeout_s) == MP_OK &&
        mp_nccl_settle(r->nccl, ncclCommFinalize(r->nccl), *r->comm->timeout_s, r->comm->rank,
                       mp_peers_host(r->comm, r->comm->rank), "finalizing") == MP_OK)
        ncclCommDestroy(r->nccl);
    else if (r->nccl)
        ncclCommAbort(r->nccl);
    if (r->done)
        cudaEventDestroy(r->done);
    if (r->stream)
        cudaStreamDestroy(r->stream);
    free(r);
}

#else

struct mp_nccl_raw {
    int unused;
};

mp_status mp_nccl_raw_open(mp_nccl_raw **out, const mp_peers *c, int device)
{
    (void)out;
    (void)c;
    (void)device;
    return mp_fail(MP_EUSAGE, "comm: this build has no NCCL");
}

mp_status mp_nccl_raw_start(mp_nccl_raw *r, const mp_coll *coll)
{
    (void)r;
    (void)coll;
    return mp_fail(MP_EUSAGE, "comm: this build has no NCCL");
}

mp_status mp_nccl_raw_wait(mp_nccl_raw *r, double limit_s)
{
    (void)r;
    (void)limit_s;
    return mp_fail(MP_EUSAGE, "comm: this build has no NCCL");
}

void mp_nccl_raw_close(mp_nccl_raw *r)
{
    (void)r;
}

#endif
