/* Rank -> GPU binding and the choice of the collectives' backend (comm.backend). The decisions
 * are pure functions of what every rank reported, so every rank takes the same one and tests
 * need no GPU: a rank uses GPU local_rank % count of those it sees, and NCCL is chosen when the
 * run is on GPUs, NCCL is built in, no two ranks share a GPU (NCCL refuses "Duplicate GPU";
 * comm.share_gpu lets them, for tests) and there are two ranks or more, else MPI, with the reason in one line for the start-up banner. */
#ifndef MP_DEVICE_BIND_H
#define MP_DEVICE_BIND_H

#include <stdbool.h>
#include <stddef.h>

#include "comm/comm.h"

/* One rank's GPU: its host name and the PCI bus id of its device ("" when it has none). */
typedef struct mp_gpu_id {
    char host[64];
    char bus[32];
} mp_gpu_id;

/* The device index a rank with `local_rank` (its rank among the ranks on its host) uses when it
 * sees `device_count` devices: local_rank % device_count; -1 when it sees none. Pure. */
int mp_device_for_local_rank(int local_rank, int device_count);

/* Whether this build has NCCL (the device transport). Not collective. */
bool mp_comm_nccl_built(void);

/* Chooses the backend for `requested` ("auto", "mpi" or "nccl"), given whether the run is on
 * the CUDA backend (`gpu`), whether NCCL is built in, whether ranks may share a GPU under NCCL
 * (`share_gpu`, comm.share_gpu), and ids[0..size-1], every rank's GPU (mp_comm_gather_gpus).
 * auto: NCCL when gpu, nccl_built, every rank has a GPU, no two ranks' (host, bus) pairs are
 * equal unless share_gpu, and size >= 2, else MPI (sharing under share_gpu: "NCCL: 2 ranks
 * sharing 1 GPU (comm.share_gpu: ...)"). Sets *use_nccl (1 NCCL, 0 MPI) and writes
 * the reason to why (whylen bytes, cut to fit), e.g. "NCCL: 2 ranks, one GPU each" or "MPI:
 * ranks 0 and 1 share the GPU 0000:65:00.0 on host h1, and NCCL needs one GPU per rank". "nccl"
 * when NCCL is not possible: MP_EUSAGE with that reason as the message (and in why). One rank
 * (size 1) that could have NCCL gets MPI under "auto" and "nccl" alike, with the reason "MPI: one
 * rank, ...": it runs no collective, so a device transport would be made for nothing. An
 * unknown `requested`: MP_EUSAGE. Pure: no I/O, no MPI. */
mp_status mp_comm_choose(const char *requested, bool gpu, bool nccl_built, bool share_gpu,
                         int size, const mp_gpu_id *ids, int *use_nccl, char *why,
                         size_t whylen);

/* How many distinct GPUs ids[0..size-1] name (a GPU is a (host, bus) pair; "" buses count as
 * none); fewer than size when ranks share. Pure. */
int mp_gpu_count_distinct(int size, const mp_gpu_id *ids);

/* The testing mode comm.share_gpu (issue 46), for rank `rank` of ids[0..size-1] when some ranks
 * share a GPU (else it does nothing and *applied, when applied is not NULL, is false): NCCL refuses two ranks of one host
 * on one GPU ("Duplicate GPU"), and takes a rank's host identity from NCCL_HOSTID (NCCL 2.28's
 * getHostHash, read once, at the process's first NCCL call), so this sets NCCL_HOSTID to a
 * value of this rank's own (overwriting one set for the job: a shared value would bring the
 * refusal back), which makes each rank a one-GPU host to NCCL, talking to the others over the
 * network transport: NCCL_NET=Socket, NCCL_MNNVL_ENABLE=0 (no fabric clique may make the
 * "hosts" NVLink peers) and, when every rank is on one host, NCCL_SOCKET_IFNAME=lo, each unless
 * already set. Call before the process's first NCCL call. MP_EINTERNAL when setenv fails. It
 * tests NCCL's API, streams, events and the watchdog, not NVLink or P2P, and gives no speed. */
mp_status mp_comm_share_gpu_env(int rank, int size, const mp_gpu_id *ids, bool *applied);

/* Collective over c: every rank's host name and the PCI bus id of its CUDA device `device`
 * ("" when device < 0 or the build has no CUDA) into ids[0..c->size-1], in rank order. Device
 * indices are those the CUDA runtime shows this process, so CUDA_VISIBLE_DEVICES applies; bus
 * ids name the physical GPU whatever the index, so two ranks shown the same GPU under different
 * indices are still seen sharing it. Waits for the host collectives started so far first. A
 * rank whose bus id cannot be read reports "" (and returns the CUDA failure) after taking part,
 * so no rank hangs. Host names longer than 63 bytes are cut. */
mp_status mp_comm_gather_gpus(mp_comm *c, int device, mp_gpu_id *ids);

#endif
