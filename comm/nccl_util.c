/* The NCCL helpers of comm/ (see nccl_util.h). */
#ifdef MP_HAVE_NCCL

#include "comm/nccl_util.h"

#include <stdio.h>
#include <string.h>

#include "comm/gpu_check.h"
#include "comm/nap.h"
#include "engine/clock.h"

#define POLL_S 100e-6 /* the host's polling of NCCL's state */

ncclDataType_t mp_nccl_dtype(mp_dtype dt)
{
    switch (dt) {
    case MP_F16: return ncclFloat16;
    case MP_BF16: return ncclBfloat16;
    case MP_F64: return ncclFloat64;
    case MP_F32: break;
    }
    return ncclFloat32;
}

/* The block collectives of mp_nccl_enqueue. */
static ncclResult_t enqueue_blocks(ncclComm_t nc, cudaStream_t s, int rank, int size,
                                   const mp_coll *c)
{
    size_t elem = mp_dtype_size(c->dtype);
    ncclDataType_t type = mp_nccl_dtype(c->dtype);
    char *buf = c->buf;
    if (mp_coll_whole(c, size)) {
        char *mine = buf + (size_t)rank * c->block * elem;
        return c->kind == MP_COLL_REDUCE_SCATTER
                   ? ncclReduceScatter(buf, mine, c->block, type, ncclSum, nc, s)
                   : ncclAllGather(mine, buf, c->block, type, nc, s);
    }
    ncclResult_t rc = ncclGroupStart();
    for (int r = 0; r < size && rc == ncclSuccess; r++) {
        size_t lo, n;
        mp_coll_piece(c, r, &lo, &n);
        char *p = buf + lo * elem;
        if (n > 0)
            rc = c->kind == MP_COLL_REDUCE_SCATTER ? ncclReduce(p, p, n, type, ncclSum, r, nc, s)
                                                   : ncclBroadcast(p, p, n, type, r, nc, s);
    }
    ncclResult_t end = ncclGroupEnd();
    return rc != ncclSuccess ? rc : end;
}

ncclResult_t mp_nccl_enqueue(ncclComm_t nc, cudaStream_t s, int rank, int size,
                             const mp_coll *c)
{
    if (c->kind == MP_COLL_BCAST)
        return ncclBroadcast(c->buf, c->buf, c->count, ncclUint8, c->root, nc, s);
    if (c->kind == MP_COLL_REDUCE_SCATTER || c->kind == MP_COLL_ALLGATHER)
        return enqueue_blocks(nc, s, rank, size, c);
    return ncclAllReduce(c->buf, c->buf, c->count, mp_nccl_dtype(c->dtype),
                         c->op == MP_REDOP_MAX ? ncclMax : ncclSum, nc, s);
}

ncclResult_t mp_nccl_state(ncclComm_t nc)
{
    ncclResult_t err = ncclSuccess, rc = ncclCommGetAsyncError(nc, &err);
    return rc != ncclSuccess ? rc : err;
}

mp_status mp_nccl_settle(ncclComm_t nc, ncclResult_t rc, double limit_s, int rank,
                         const char *host, const char *doing)
{
    for (double t0 = mp_now(); rc == ncclInProgress && mp_now() - t0 < limit_s;) {
        mp_nap(POLL_S);
        rc = mp_nccl_state(nc);
    }
    if (rc == ncclInProgress)
        return mp_fail(MP_ECOMM, "comm: [rank %d @ %s] NCCL did not finish %s within %g s "
                       "(comm.timeout_s)", rank, host, doing, limit_s);
    if (rc != ncclSuccess)
        return mp_fail(MP_ECOMM, "comm: [rank %d @ %s] NCCL failed %s: %s (%s)", rank, host,
                       doing, ncclGetErrorString(rc), ncclGetLastError(nc));
    return MP_OK;
}

mp_status mp_nccl_agree(const mp_peers *c, mp_status st)
{
    int mine = st == MP_OK ? c->size : c->rank, first = c->size;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->world));
    if (first == c->size)
        return MP_OK;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mp_error_message());
    MPI_CHECK(MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, c->world));
    return mp_fail(MP_ECOMM, "%s", msg);
}

mp_status mp_nccl_form(const mp_peers *c, mp_status st, const ncclUniqueId *id, ncclComm_t *nc)
{
    ncclUniqueId root = *id;
    *nc = NULL;
    if (MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, c->world) != MPI_SUCCESS && st == MP_OK)
        st = mp_fail(MP_ECOMM, "comm: [rank %d @ %s] broadcasting the NCCL unique id failed",
                     c->rank, mp_peers_host(c, c->rank));
    MP_TRY(mp_nccl_agree(c, st));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t rc = ncclCommInitRankConfig(nc, c->size, root, c->rank, &config);
    return mp_nccl_agree(c, mp_nccl_settle(*nc, rc, *c->timeout_s, c->rank,
                                           mp_peers_host(c, c->rank),
                                           "creating the communicator"));
}

#endif
