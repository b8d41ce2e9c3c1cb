/* The NCCL and CUDA-event stand-in of tests (see nccl_standin.h): __wrap_ definitions of the
 * calls comm/transport_nccl.c makes, over MPI on host memory. */
#include "tests/util/nccl_standin.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/dtype.h"

/* The wrapped calls (the names the transport's object calls, prefixed by the linker). */
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
cudaError_t __wrap_cudaSetDevice(int device);
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t __wrap_cudaStreamDestroy(cudaStream_t s);
cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t __wrap_cudaEventDestroy(cudaEvent_t e);
cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t __wrap_cudaEventQuery(cudaEvent_t e);
cudaError_t __wrap_cudaGetLastError(void);
cudaError_t __wrap_cudaPeekAtLastError(void);
const char *__wrap_cudaGetErrorString(cudaError_t rc);

#define ALL_RANKS (-2)
#define NO_RANK (-1)

struct CUstream_st {
    bool stuck; /* work queued on it from now on never finishes */
};

struct CUevent_st {
    bool never; /* recorded on a stuck stream */
};

struct ncclComm {
    MPI_Comm mpi;
    int rank, size;
    int polls;          /* ncclCommGetAsyncError answers ncclInProgress this many more times */
    bool init_stuck;    /* never finishes forming */
    ncclResult_t async; /* the injected asynchronous error, ncclSuccess when none */
    MPI_Request fin; /* the finalize barrier while it runs, else MPI_REQUEST_NULL */
    long launches;
    char last[256]; /* ncclGetLastError */
};

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
static _Thread_local cudaError_t last_error = cudaSuccess;
static int group_depth, group_ops;
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

/* A collective (or a group of them) was launched on c's stream s. */
static ncclResult_t launched(struct ncclComm *c, cudaStream_t s)
{
    c->launches++;
    atomic_fetch_add(&launches_total, 1);
    if (is_rank(faults.async_rank, c->rank) && c->launches >= faults.async_k &&
        c->async == ncclSuccess) {
        c->async = ncclSystemError;
        snprintf(c->last, sizeof c->last, "stand-in: injected asynchronous error in "
                 "launch %ld", c->launches);
        if (s && !faults.async_late) /* what failed never finishes */
            s->stuck = true;
    }
    if (is_rank(faults.hang_rank, c->rank) && c->launches >= faults.hang_k && s)
        s->stuck = true;
    return async_return(c);
}

static ncclResult_t usage(struct ncclComm *c, ncclResult_t rc, const char *what)
{
    if (c)
        snprintf(c->last, sizeof c->last, "stand-in: %s", what);
    return rc;
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

/* Runs a collective's body as NCCL would launch it: inside a group it only counts. */
static ncclResult_t finish(struct ncclComm *c, cudaStream_t s, int mpi_rc)
{
    if (mpi_rc != MPI_SUCCESS)
        return usage(c, ncclSystemError, "an MPI call failed");
    if (group_depth > 0) {
        group_ops++;
        group_comm = c;
        group_stream = s;
        return ncclSuccess;
    }
    return launched(c, s);
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
    *err = ncclSuccess;
    if (c->async != ncclSuccess) {
        *err = c->async;
    } else if (c->polls > 0 || c->init_stuck) {
        c->polls -= c->polls > 0;
        *err = ncclInProgress;
    } else if (c->fin != MPI_REQUEST_NULL) {
        int done = 0;
        if (MPI_Test(&c->fin, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            *err = usage(c, ncclSystemError, "the finalize barrier failed");
        else if (!done)
            *err = ncclInProgress;
    }
    leave();
    return ncclSuccess;
}

ncclResult_t __wrap_ncclAllReduce(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                  cudaStream_t s)
{
    size_t bytes = count * type_size(type);
    const char *no = refuse(c, type, op, true, bytes);
    if (no)
        return usage(c, ncclInvalidArgument, no);
    enter("ncclAllReduce");
    char *all = malloc((size_t)c->size * bytes + 1);
    int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->mpi);
    mp_dtype dt = MP_F32;
    dtype_of(type, &dt);
    if (rc == MPI_SUCCESS)
        fold(recv, all, c->size, count, dt, op);
    free(all);
    ncclResult_t res = finish(c, s, rc);
    leave();
    return res;
}

ncclResult_t __wrap_ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t s)
{
    size_t bytes = count * type_size(type);
    const char *no = refuse(c, type, op, true, bytes);
    if (no)
        return usage(c, ncclInvalidArgument, no);
    enter("ncclReduce");
    char *all = c->rank == root ? malloc((size_t)c->size * bytes + 1) : NULL;
    int rc = MPI_Gather(send, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, root, c->mpi);
    mp_dtype dt = MP_F32;
    dtype_of(type, &dt);
    if (rc == MPI_SUCCESS && all)
        fold(recv, all, c->size, count, dt, op);
    free(all);
    ncclResult_t res = finish(c, s, rc);
    leave();
    return res;
}

ncclResult_t __wrap_ncclBroadcast(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, int root, ncclComm_t c, cudaStream_t s)
{
    size_t bytes = count * type_size(type);
    const char *no = refuse(c, type, ncclSum, false, bytes);
    if (no)
        return usage(c, ncclInvalidArgument, no);
    enter("ncclBroadcast");
    if (c->rank == root && send != recv)
        memmove(recv, send, bytes);
    int rc = MPI_Bcast(recv, (int)bytes, MPI_BYTE, root, c->mpi);
    ncclResult_t res = finish(c, s, rc);
    leave();
    return res;
}

/* Whether [a, a + n) and [b, b + n) overlap. */
static bool overlap(const char *a, size_t an, const char *b, size_t bn)
{
    return a < b + bn && b < a + an;
}

ncclResult_t __wrap_ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                      cudaStream_t s)
{
    size_t bytes = recvcount * type_size(type);
    const char *no = refuse(c, type, op, true, bytes);
    if (no)
        return usage(c, ncclInvalidArgument, no);
    const char *in = send;
    char *out = recv;
    if (out != in + (size_t)c->rank * bytes && overlap(in, (size_t)c->size * bytes, out, bytes))
        return usage(c, ncclInvalidArgument, "reduce-scatter buffers overlap out of place");
    enter("ncclReduceScatter");
    char *all = malloc((size_t)c->size * bytes + 1);
    int rc = MPI_Alltoall(send, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->mpi);
    mp_dtype dt = MP_F32;
    dtype_of(type, &dt);
    if (rc == MPI_SUCCESS) {
        fold(all, all, c->size, recvcount, dt, op);
        size_t shift = faults.rs_offset && recvcount > 1 ? mp_dtype_size(dt) : 0;
        memcpy(out + shift, all, bytes - shift); /* rotated by one element when sabotaged */
        memcpy(out, all + bytes - shift, shift);
    }
    free(all);
    ncclResult_t res = finish(c, s, rc);
    leave();
    return res;
}

ncclResult_t __wrap_ncclAllGather(const void *send, void *recv, size_t sendcount,
                                  ncclDataType_t type, ncclComm_t c, cudaStream_t s)
{
    size_t bytes = sendcount * type_size(type);
    const char *no = refuse(c, type, ncclSum, false, bytes);
    if (no)
        return usage(c, ncclInvalidArgument, no);
    const char *in = send;
    char *out = recv;
    if (in != out + (size_t)c->rank * bytes && overlap(in, bytes, out, (size_t)c->size * bytes))
        return usage(c, ncclInvalidArgument, "all-gather buffers overlap out of place");
    enter("ncclAllGather");
    char *mine = malloc(bytes + 1);
    memcpy(mine, send, bytes);
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c->mpi);
    free(mine);
    ncclResult_t res = finish(c, s, rc);
    leave();
    return res;
}

ncclResult_t __wrap_ncclGroupStart(void)
{
    if (group_depth++ == 0) {
        group_ops = 0;
        group_comm = NULL;
        group_stream = NULL;
    }
    return ncclSuccess;
}

ncclResult_t __wrap_ncclGroupEnd(void)
{
    if (group_depth == 0)
        return ncclInvalidUsage;
    if (--group_depth > 0 || group_ops == 0 || !group_comm)
        return ncclSuccess;
    enter("ncclGroupEnd");
    ncclResult_t res = launched(group_comm, group_stream);
    leave();
    return res;
}

ncclResult_t __wrap_ncclCommFinalize(ncclComm_t c)
{
    enter("ncclCommFinalize");
    ncclResult_t res = ncclInProgress;
    if (MPI_Ibarrier(c->mpi, &c->fin) != MPI_SUCCESS)
        res = usage(c, ncclSystemError, "the finalize barrier failed");
    if (res == ncclInProgress)
        (void)async_return(c); /* the inprogress fault: more polls before it settles */
    leave();
    return res;
}

ncclResult_t __wrap_ncclCommDestroy(ncclComm_t c)
{
    if (!c)
        return ncclSuccess;
    enter("ncclCommDestroy");
    if (c->fin != MPI_REQUEST_NULL) { /* destroyed before finalize finished: NCCL would hang */
        fprintf(stderr, "nccl stand-in: ncclCommDestroy before ncclCommFinalize finished\n");
        abort();
    }
    MPI_Comm_free(&c->mpi);
    free(c);
    leave();
    return ncclSuccess;
}

ncclResult_t __wrap_ncclCommAbort(ncclComm_t c)
{
    if (!c)
        return ncclSuccess;
    enter("ncclCommAbort");
    /* The MPI communicator stays: a peer may still be inside a collective or the finalize
     * barrier on it, and freeing it is collective. */
    free(c);
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

cudaError_t __wrap_cudaSetDevice(int device)
{
    return device >= 0 ? cudaSuccess : (last_error = cudaErrorInvalidDevice);
}

cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    *s = calloc(1, sizeof **s);
    return *s ? cudaSuccess : (last_error = cudaErrorMemoryAllocation);
}

cudaError_t __wrap_cudaStreamDestroy(cudaStream_t s)
{
    free(s);
    return cudaSuccess;
}

cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = calloc(1, sizeof **e);
    return *e ? cudaSuccess : (last_error = cudaErrorMemoryAllocation);
}

cudaError_t __wrap_cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    e->never = s && s->stuck;
    return cudaSuccess;
}

cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    if (s && e->never)
        s->stuck = true;
    return cudaSuccess;
}

/* Like the runtime, a query that finds the event not ready also leaves cudaErrorNotReady in the
 * thread's last-error slot (what mp_cuda_query clears). */
cudaError_t __wrap_cudaEventQuery(cudaEvent_t e)
{
    return e->never ? (last_error = cudaErrorNotReady) : cudaSuccess;
}

cudaError_t __wrap_cudaGetLastError(void)
{
    cudaError_t rc = last_error;
    last_error = cudaSuccess;
    return rc;
}

cudaError_t __wrap_cudaPeekAtLastError(void)
{
    return last_error;
}

const char *__wrap_cudaGetErrorString(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess: return "no error";
    case cudaErrorNotReady: return "device not ready (stand-in)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (stand-in)";
    case cudaErrorMemoryAllocation: return "out of memory (stand-in)";
    default: return "a CUDA error (stand-in)";
    }
}

void *mp_standin_stream(void)
{
    cudaStream_t s = NULL;
    return __wrap_cudaStreamCreateWithFlags(&s, 0) == cudaSuccess ? s : NULL;
}
