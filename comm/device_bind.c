/* Rank -> GPU binding and the backend choice (see device_bind.h). The choice names the first
 * reason NCCL cannot be used, checked in a fixed order (CPU run, no NCCL, a rank without a GPU,
 * the lowest pair of ranks sharing a GPU), so every rank writes the same line; then a run of one
 * rank takes no device transport, since it has no gradients to exchange. */
#include "comm/device_bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MPDIST_HAVE_CUDA
#include "comm/gpu_check.h"
#endif

int mp_device_for_local_rank(int local_rank, int device_count)
{
    if (device_count <= 0 || local_rank < 0)
        return -1;
    return local_rank % device_count;
}

bool mp_comm_nccl_built(void)
{
#ifdef MP_HAVE_NCCL
    return true;
#else
    return false;
#endif
}

static bool same_gpu(const mp_gpu_id *a, const mp_gpu_id *b)
{
    return strncmp(a->bus, b->bus, sizeof a->bus) == 0 &&
           strncmp(a->host, b->host, sizeof a->host) == 0;
}

int mp_gpu_count_distinct(int size, const mp_gpu_id *ids)
{
    int n = 0;
    for (int j = 0; j < size; j++) {
        bool seen = !ids[j].bus[0];
        for (int i = 0; i < j && !seen; i++)
            seen = same_gpu(&ids[i], &ids[j]);
        n += !seen;
    }
    return n;
}

/* Why NCCL cannot run these ranks, into why (without the "MPI: " head); false when it can. */
static bool nccl_blocked(bool gpu, bool nccl_built, bool share_gpu, int size,
                         const mp_gpu_id *ids, char *why, size_t whylen)
{
    if (!gpu) {
        snprintf(why, whylen, "amp.device is cpu");
        return true;
    }
    if (!nccl_built) {
        snprintf(why, whylen, "this build has no NCCL");
        return true;
    }
    for (int r = 0; r < size; r++)
        if (!ids[r].bus[0]) {
            snprintf(why, whylen, "rank %d on host %.64s has no GPU", r, ids[r].host);
            return true;
        }
    for (int j = 1; j < size && !share_gpu; j++)
        for (int i = 0; i < j; i++)
            if (same_gpu(&ids[i], &ids[j])) {
                snprintf(why, whylen, "ranks %d and %d share the GPU %.32s on host %.64s, and "
                         "NCCL needs one GPU per rank (comm.share_gpu = true lets them share "
                         "for tests)", i, j, ids[i].bus, ids[i].host);
                return true;
            }
    return false;
}

mp_status mp_comm_choose(const char *requested, bool gpu, bool nccl_built, bool share_gpu,
                         int size, const mp_gpu_id *ids, int *use_nccl, char *why,
                         size_t whylen)
{
    *use_nccl = 0;
    if (whylen)
        why[0] = '\0';
    bool want_nccl = requested && strcmp(requested, "nccl") == 0;
    if (!requested || (!want_nccl && strcmp(requested, "auto") != 0 &&
                       strcmp(requested, "mpi") != 0))
        return mp_fail(MP_EUSAGE, "comm.backend must be \"auto\", \"mpi\" or \"nccl\", not \"%s\"",
                       requested ? requested : "(none)");
    if (strcmp(requested, "mpi") == 0) {
        snprintf(why, whylen, "MPI: comm.backend = mpi");
        return MP_OK;
    }
    char reason[256];
    if (nccl_blocked(gpu, nccl_built, share_gpu, size, ids, reason, sizeof reason)) {
        if (want_nccl) {
            snprintf(why, whylen, "comm.backend = nccl, but %s", reason);
            return mp_fail(MP_EUSAGE, "comm.backend = nccl, but %s", reason);
        }
        snprintf(why, whylen, "MPI: %s", reason);
        return MP_OK;
    }
    if (size == 1) { /* every collective is skipped: an NCCL communicator would only cost */
        snprintf(why, whylen, "MPI: one rank, so no collective runs and no NCCL communicator "
                 "is made");
        return MP_OK;
    }
    *use_nccl = 1;
    int gpus = mp_gpu_count_distinct(size, ids);
    if (gpus < size)
        snprintf(why, whylen, "NCCL: %d ranks sharing %d GPU%s (comm.share_gpu: a testing mode, "
                 "each rank a host of its own to NCCL, over sockets; no speed)", size, gpus,
                 gpus == 1 ? "" : "s");
    else
        snprintf(why, whylen, "NCCL: %d ranks, one GPU each", size);
    return MP_OK;
}

/* setenv(name, value, overwrite), MP_EINTERNAL naming it when it fails. */
static mp_status set_env(const char *name, const char *value, int overwrite)
{
    if (setenv(name, value, overwrite) != 0)
        return mp_fail(MP_EINTERNAL, "comm.share_gpu: cannot set %s=%s", name, value);
    return MP_OK;
}

mp_status mp_comm_share_gpu_env(int rank, int size, const mp_gpu_id *ids, bool *applied)
{
    bool dummy;
    applied = applied ? applied : &dummy;
    *applied = false;
    if (mp_gpu_count_distinct(size, ids) == size)
        return MP_OK;
    bool one_host = true;
    for (int r = 1; r < size; r++)
        one_host = one_host && strncmp(ids[r].host, ids[0].host, sizeof ids[0].host) == 0;
    char id[128];
    snprintf(id, sizeof id, "mpdist-share-gpu-%.64s-rank-%d", ids[rank].host, rank);
    MP_TRY(set_env("NCCL_HOSTID", id, 1));
    MP_TRY(set_env("NCCL_NET", "Socket", 0));
    MP_TRY(set_env("NCCL_MNNVL_ENABLE", "0", 0));
    if (one_host)
        MP_TRY(set_env("NCCL_SOCKET_IFNAME", "lo", 0));
    *applied = true;
    return MP_OK;
}

/* This rank's bus id of `device` into bus (len bytes; "" when there is none to read). */
static mp_status bus_id(int device, char *bus, int len)
{
    bus[0] = '\0';
#ifdef MPDIST_HAVE_CUDA
    if (device >= 0)
        CUDA_CHECK(cudaDeviceGetPCIBusId(bus, len, device));
#else
    (void)device;
    (void)len;
#endif
    return MP_OK;
}

mp_status mp_comm_gather_gpus(mp_comm *c, int device, mp_gpu_id *ids)
{
    MP_TRY(mp_comm_wait(c, c->issued)); /* the gather uses c->world outside the transport */
    mp_gpu_id mine;
    memset(&mine, 0, sizeof mine);
    snprintf(mine.host, sizeof mine.host, "%s", mp_comm_host(c, c->rank));
    mp_status st = bus_id(device, mine.bus, (int)sizeof mine.bus);
    if (st != MP_OK)
        memset(mine.bus, 0, sizeof mine.bus);
    MPI_CHECK(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, ids, (int)sizeof mine, MPI_BYTE,
                            c->world));
    return st;
}
