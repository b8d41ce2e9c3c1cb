/* The NCCL stand-in of tests (see nccl_standin.h): __wrap_ definitions of the NCCL calls that
 * comm/transport_nccl.c makes. A collective is checked and queued on its stream at once (a
 * group's at the group's end, as one launch); the stream's worker (nccl_standin_stream.c) runs
 * it later with non-blocking MPI on host memory (sk_run). */
#include "tests/util/nccl_standin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/nap.h"
#include "engine/dtype.h"
#include "tests/util/nccl_standin_internal.h"

/* The wrapped NCCL calls (the names the transport's object calls, prefixed by the linker). */
ncclResult_t __wrap_ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t __wrap_ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config);
ncclResult_t __wrap_ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err);
ncclResult_t __wrap_ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, ncclComm_t c, cudaStream_t s);
ncclResult_t __wrap_ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t s);
ncclResult_t __wrap_ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                                  int root, ncclComm_t c, cudaStream_t s);
ncclResult_t __wrap_ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                      cudaStream_t s);
ncclResult_t __wrap_ncclAllGather(const void *send, void *recv, size_t sendcount,
                                  ncclDataType_t type, ncclComm_t c, cudaStream_t s);
ncclResult_t __wrap_ncclGroupStart(void);
ncclResult_t __wrap_ncclGroupEnd(void);
ncclResult_t __wrap_ncclCommFinalize(ncclComm_t c);
ncclResult_t __wrap_ncclCommDestroy(ncclComm_t c);
ncclResult_t __wrap_ncclCommAbort(ncclComm_t c);
const char *__wrap_ncclGetErrorString(ncclResult_t rc);
const char *__wrap_ncclGetLastError(ncclComm_t c);

#define ALL_RANKS (-2)
#define NO_RANK (-1)
#define POLL_S 20e-6

typedef struct fault_spec {
    int inprogress;
    int init_stuck, async_rank, hang_rank; /* a rank, ALL_RANKS or NO_RANK */
    long async_k, hang_k;
    bool async_late; /* the asynchronous error comes after the launch finished */
    bool rs_offset;
} fault_spec;

static fault_spec faults = {0, NO_RANK, NO_RANK, NO_RANK, 0, 0, false, false};
static bool faults_set;
static atomic_long launches_total;
static atomic_int inside; /* threads inside a call on a communicator */
static int group_depth;
static sk_coll *group_head, *group_tail; /* the open group's collectives */
static struct ncclComm *group_comm;
static cudaStream_t group_stream;

static int parse_rank(const char *s)
{
    return strcmp(s, "*") == 0 ? ALL_RANKS : atoi(s);
}

static void parse_faults(const char *spec)
{
    fault_spec f = {0, NO_RANK, NO_RANK, NO_RANK, 0, 0, false, false};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *a = strchr(tok, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (a)
            *a++ = '\0';
        if (b)
            *b++ = '\0';
        if (strcmp(tok, "inprogress") == 0 && a)
            f.inprogress = atoi(a);
        else if (strcmp(tok, "initstuck") == 0 && a)
            f.init_stuck = parse_rank(a);
        else if ((strcmp(tok, "async") == 0 || strcmp(tok, "late") == 0) && b)
            f.async_rank = parse_rank(a), f.async_k = atol(b), f.async_late = tok[0] == 'l';
        else if (strcmp(tok, "hang") == 0 && b)
            f.hang_rank = parse_rank(a), f.hang_k = atol(b);
        else if (strcmp(tok, "rs_offset") == 0)
            f.rs_offset = true;
        else {
            fprintf(stderr, "nccl stand-in: unknown fault \"%s\" (see nccl_standin.h)\n", tok);
            exit(2);
        }
    }
    faults = f;
}

void mp_standin_fault(const char *spec)
{
    parse_faults(spec);
    faults_set = true;
}

long mp_standin_launches(void)
{
    return atomic_load(&launches_total);
}

static bool is_rank(int who, int rank)
{
    return who == ALL_RANKS || who == rank;
}

/* Every call on a communicator runs alone (the transport's lock): a second thread inside at
 * once is a broken invariant of the code under test. */
static void enter(const char *call)
{
    if (atomic_fetch_add(&inside, 1) != 0) {
        fprintf(stderr, "nccl stand-in: %s called while another NCCL call was running\n", call);
        abort();
    }
}

static void leave(void)
{
    atomic_fetch_sub(&inside, 1);
}

/* The return of a call that may run asynchronously. */
static ncclResult_t async_return(struct ncclComm *c)
{
    if (faults.inprogress <= 0)
        return ncclSuccess;
    c->polls = faults.inprogress;
    return ncclInProgress;
}

static ncclResult_t usage(struct ncclComm *c, ncclResult_t rc, const char *what)
{
    if (c)
        snprintf(c->last, sizeof c->last, "stand-in: %s", what);
    return rc;
}

/* Queues a launch of colls on c's stream s, with the faults that apply to it. */
static ncclResult_t launch(struct ncclComm *c, cudaStream_t s, sk_coll *colls)
{
    sk_op *op = calloc(1, sizeof *op);
    if (!op || !s) {
        free(op);
        for (sk_coll *k = colls, *next; k; k = next) {
            next = k->next;
            free(k);
        }
        return usage(c, ncclInvalidArgument, "no stream, or out of memory");
    }
    op->colls = colls;
    op->comm = c;
    op->launch = ++c->launches;
    atomic_fetch_add(&launches_total, 1);
    op->fail = is_rank(faults.async_rank, c->rank) && op->launch == faults.async_k;
    op->fail_late = faults.async_late;
    op->hang = is_rank(faults.hang_rank, c->rank) && op->launch == faults.hang_k;
    atomic_fetch_add(&c->inflight, 1);
    if (sk_stream_push(s, op)) /* captured: in flight at each launch of its graph */
        atomic_fetch_sub(&c->inflight, 1);
    return async_return(c);
}

/* A collective's arguments: queued alone, or kept for the open group's launch. */
static ncclResult_t queue(struct ncclComm *c, cudaStream_t s, const sk_coll *args)
{
    sk_coll *k = malloc(sizeof *k);
    if (!k)
        return usage(c, ncclSystemError, "out of memory");
    *k = *args;
    k->next = NULL;
    if (group_depth == 0)
        return launch(c, s, k);
    if (group_comm && group_comm != c) {
        free(k);
        return usage(c, ncclInvalidUsage, "the stand-in groups one communicator's calls only");
    }
    if (group_tail)
        group_tail->next = k;
    else
        group_head = k;
    group_tail = k;
    group_comm = c;
    group_stream = s;
    return ncclSuccess;
}

/* The engine's dtype of an NCCL type; false for types the stand-in does not reduce. */
static bool dtype_of(ncclDataType_t t, mp_dtype *dt)
{
    switch (t) {
    case ncclFloat16: *dt = MP_F16; return true;
    case ncclBfloat16: *dt = MP_BF16; return true;
    case ncclFloat32: *dt = MP_F32; return true;
    case ncclFloat64: *dt = MP_F64; return true;
    default: return false;
    }
}

static size_t type_size(ncclDataType_t t)
{
    mp_dtype dt;
    return t == ncclUint8 || t == ncclInt8 ? 1 : dtype_of(t, &dt) ? mp_dtype_size(dt) : 0;
}

/* out = x[0] op x[1] op ... op x[k-1] in rank order, n elements each, x one block after the
 * other; a sum rounds to dt after each addition. */
static void fold(void *out, const char *x, int k, size_t n, mp_dtype dt, ncclRedOp_t op)
{
    size_t bytes = n * mp_dtype_size(dt);
    memmove(out, x, bytes);
    for (int r = 1; r < k; r++) {
        const char *in = x + (size_t)r * bytes;
        if (op == ncclMax) {
            for (size_t i = 0; i < n; i++)
                if (mp_load(in, dt, i) > mp_load(out, dt, i))
                    mp_store(out, dt, i, mp_load(in, dt, i));
        } else if (dt == MP_F16 || dt == MP_BF16) {
            mp_half_add(out, (const uint16_t *)in, n, dt);
        } else if (dt == MP_F32) {
            for (size_t i = 0; i < n; i++)
                ((float *)out)[i] += ((const float *)in)[i];
        } else {
            for (size_t i = 0; i < n; i++)
                ((double *)out)[i] += ((const double *)in)[i];
        }
    }
}

/* Checks what every collective needs; NULL when it may run, else the reason. */
static const char *refuse(struct ncclComm *c, ncclDataType_t t, ncclRedOp_t op, bool reduces,
                          size_t bytes)
{
    mp_dtype dt;
    if (!c)
        return "no communicator";
    if (reduces && (!dtype_of(t, &dt) || (op != ncclSum && op != ncclMax)))
        return "a reduction type or operation the stand-in does not model";
    if (!reduces && type_size(t) == 0)
        return "a data type the stand-in does not model";
    if (bytes > (size_t)INT32_MAX / (size_t)(c->size + 1))
        return "more bytes than one MPI call of the stand-in moves";
    return NULL;
}

/* Waits for *req, polling; false when the communicator was aborted or the stream quits
 * first (the request is left: the job is ending). */
static bool wait_req(MPI_Request *req, struct ncclComm *comm, cudaStream_t s)
{
    for (;;) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return false;
        if (done)
            return true;
        if (atomic_load(&comm->aborted) || sk_stream_quitting(s))
            return false;
        mp_nap(POLL_S);
    }
}

bool sk_run(const sk_coll *c, struct ncclComm *comm, cudaStream_t s)
{
    if (atomic_load(&comm->aborted))
        return false;
    size_t elem = type_size(c->type), bytes = c->count * elem, all = (size_t)comm->size * bytes;
    mp_dtype dt = MP_F32;
    dtype_of(c->type, &dt);
    char *tmp = malloc(all + 1);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS, n = (int)bytes;
    switch (c->kind) {
    case SK_ALLREDUCE:
        rc = MPI_Iallgather(c->send, n, MPI_BYTE, tmp, n, MPI_BYTE, comm->mpi, &req);
        break;
    case SK_REDUCE:
        rc = MPI_Igather(c->send, n, MPI_BYTE, tmp, n, MPI_BYTE, c->root, comm->mpi, &req);
        break;
    case SK_BCAST:
        if (comm->rank == c->root && c->send != c->recv)
            memmove(c->recv, c->send, bytes);
        rc = MPI_Ibcast(c->recv, n, MPI_BYTE, c->root, comm->mpi, &req);
        break;
    case SK_REDUCE_SCATTER:
        rc = MPI_Ialltoall(c->send, n, MPI_BYTE, tmp, n, MPI_BYTE, comm->mpi, &req);
        break;
    default: /* SK_ALLGATHER: the piece copied first, as it may lie inside recv */
        memcpy(tmp, c->send, bytes);
        rc = MPI_Iallgather(tmp, n, MPI_BYTE, c->recv, n, MPI_BYTE, comm->mpi, &req);
        break;
    }
    bool ok = rc == MPI_SUCCESS && wait_req(&req, comm, s);
    if (ok && (c->kind == SK_ALLREDUCE || (c->kind == SK_REDUCE && comm->rank == c->root)))
        fold(c->recv, tmp, comm->size, c->count, dt, c->op);
    if (ok && c->kind == SK_REDUCE_SCATTER) {
        fold(tmp, tmp, comm->size, c->count, dt, c->op);
        size_t shift = faults.rs_offset && c->count > 1 ? elem : 0;
        memcpy((char *)c->recv + shift, tmp, bytes - shift); /* rotated when sabotaged */
        memcpy(c->recv, tmp + bytes - shift, shift);
    }
    if (ok || req == MPI_REQUEST_NULL)
        free(tmp); /* else MPI may still write it */
    return ok;
}

ncclResult_t __wrap_ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "stand-in %d %ld", (int)getpid(),
             (long)time(NULL));
    return ncclSuccess;
}

ncclResult_t __wrap_ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                           int rank, ncclConfig_t *config)
{
    if (!faults_set)
        mp_standin_fault(getenv("MPDIST_NCCL_STANDIN"));
    struct ncclComm *c = calloc(1, sizeof *c);
    *comm = c;
    if (!c)
        return ncclSystemError;
    c->fin = MPI_REQUEST_NULL;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi) != MPI_SUCCESS)
        return usage(c, ncclSystemError, "MPI_Comm_dup failed");
    MPI_Comm_rank(c->mpi, &c->rank);
    MPI_Comm_size(c->mpi, &c->size);
    ncclUniqueId root = id;
    MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, c->mpi);
    if (memcmp(&root, &id, sizeof id) != 0)
        return usage(c, ncclInvalidArgument, "the unique id differs from rank 0's");
    if (nranks != c->size || rank != c->rank)
        return usage(c, ncclInvalidArgument, "nranks or rank differ from MPI's world");
    if (!config || config->blocking != 0)
        return usage(c, ncclInvalidUsage, "only non-blocking communicators are modelled");
    c->init_stuck = is_rank(faults.init_stuck, c->rank);
    return c->init_stuck ? ncclInProgress : async_return(c);
}

ncclResult_t __wrap_ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err)
{
    enter("ncclCommGetAsyncError");
    *err = (ncclResult_t)atomic_load(&c->async);
    if (*err == ncclSuccess && (c->polls > 0 || c->init_stuck)) {
        c->polls -= c->polls > 0;
        *err = ncclInProgress;
    } else if (*err == ncclSuccess && c->finalizing) { /* the barrier, once the launches ended */
        int done = 0;
        if (c->fin == MPI_REQUEST_NULL && atomic_load(&c->inflight) == 0 &&
            MPI_Ibarrier(c->mpi, &c->fin) != MPI_SUCCESS)
            *err = usage(c, ncclSystemError, "the finalize barrier failed");
        else if (c->fin == MPI_REQUEST_NULL ||
                 MPI_Test(&c->fin, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
            *err = ncclInProgress;
        else
            c->finalizing = false;
    }
    leave();
    return ncclSuccess;
}

/* A collective call: checked (refuse), then queued as one call on the communicator. */
static ncclResult_t submit(struct ncclComm *c, cudaStream_t s, sk_coll k, const char *call)
{
    bool reduces = k.kind != SK_BCAST && k.kind != SK_ALLGATHER;
    const char *no = refuse(c, k.type, k.op, reduces, k.count * type_size(k.type));
    if (no)
        return usage(c, ncclInvalidArgument, no);
    enter(call);
    ncclResult_t res = queue(c, s, &k);
    leave();
    return res;
}

ncclResult_t __wrap_ncclAllReduce(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                  cudaStream_t s)
{
    return submit(c, s, (sk_coll){SK_ALLREDUCE, send, recv, count, type, op, 0, NULL},
                  "ncclAllReduce");
}

ncclResult_t __wrap_ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t s)
{
    return submit(c, s, (sk_coll){SK_REDUCE, send, recv, count, type, op, root, NULL},
                  "ncclReduce");
}

ncclResult_t __wrap_ncclBroadcast(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, int root, ncclComm_t c, cudaStream_t s)
{
    return submit(c, s, (sk_coll){SK_BCAST, send, recv, count, type, ncclSum, root, NULL},
                  "ncclBroadcast");
}

/* Whether [a, a + an) and [b, b + bn) overlap. */
static bool overlap(const char *a, size_t an, const char *b, size_t bn)
{
    return a < b + bn && b < a + an;
}

ncclResult_t __wrap_ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                      cudaStream_t s)
{
    size_t bytes = recvcount * type_size(type);
    const char *in = send, *out = recv;
    if (c && out != in + (size_t)c->rank * bytes &&
        overlap(in, (size_t)c->size * bytes, out, bytes))
        return usage(c, ncclInvalidArgument, "reduce-scatter buffers overlap out of place");
    return submit(c, s, (sk_coll){SK_REDUCE_SCATTER, send, recv, recvcount, type, op, 0, NULL},
                  "ncclReduceScatter");
}

ncclResult_t __wrap_ncclAllGather(const void *send, void *recv, size_t sendcount,
                                  ncclDataType_t type, ncclComm_t c, cudaStream_t s)
{
    size_t bytes = sendcount * type_size(type);
    const char *in = send, *out = recv;
    if (c && in != out + (size_t)c->rank * bytes &&
        overlap(in, bytes, out, (size_t)c->size * bytes))
        return usage(c, ncclInvalidArgument, "all-gather buffers overlap out of place");
    return submit(c, s, (sk_coll){SK_ALLGATHER, send, recv, sendcount, type, ncclSum, 0, NULL},
                  "ncclAllGather");
}

ncclResult_t __wrap_ncclGroupStart(void)
{
    if (group_depth++ == 0) {
        group_head = group_tail = NULL;
        group_comm = NULL;
        group_stream = NULL;
    }
    return ncclSuccess;
}

ncclResult_t __wrap_ncclGroupEnd(void)
{
    if (group_depth == 0)
        return ncclInvalidUsage;
    if (--group_depth > 0 || !group_head)
        return ncclSuccess;
    enter("ncclGroupEnd");
    ncclResult_t res = launch(group_comm, group_stream, group_head);
    group_head = group_tail = NULL;
    leave();
    return res;
}

ncclResult_t __wrap_ncclCommFinalize(ncclComm_t c)
{
    enter("ncclCommFinalize");
    c->finalizing = true;
    (void)async_return(c); /* the inprogress fault: more polls before it settles */
    leave();
    return ncclInProgress;
}

ncclResult_t __wrap_ncclCommDestroy(ncclComm_t c)
{
    if (!c)
        return ncclSuccess;
    enter("ncclCommDestroy");
    if (c->finalizing || atomic_load(&c->inflight) != 0) { /* NCCL would hang or fail */
        fprintf(stderr, "nccl stand-in: ncclCommDestroy before ncclCommFinalize finished\n");
        abort();
    }
    MPI_Comm_free(&c->mpi);
    free(c);
    leave();
    return ncclSuccess;
}

/* The communicator's queued work is dropped; the memory stays (a stream's worker may still look
 * at it), and so does the MPI communicator (a peer may still be inside a collective on it, and
 * freeing it is collective). */
ncclResult_t __wrap_ncclCommAbort(ncclComm_t c)
{
    if (!c)
        return ncclSuccess;
    enter("ncclCommAbort");
    atomic_store(&c->aborted, true);
    leave();
    return ncclSuccess;
}

const char *__wrap_ncclGetErrorString(ncclResult_t rc)
{
    switch (rc) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (stand-in)";
    case ncclInvalidArgument: return "invalid argument (stand-in)";
    case ncclInvalidUsage: return "invalid usage (stand-in)";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "an NCCL error (stand-in)";
    }
}

const char *__wrap_ncclGetLastError(ncclComm_t c)
{
    return c ? c->last : "";
}
