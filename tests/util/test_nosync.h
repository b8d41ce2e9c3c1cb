/* The no-host-synchronisation check of a training run (issue 7): a run on synthetic data,
 * counting with the backend's own accounting (ops->counters) the device-to-host reads, the
 * synchronisations and the uploads of each step. Steps that are not host points (logging,
 * evaluation, checkpoint, epoch-end and last steps) must have no read and no sync and upload
 * exactly their batch and labels; no step uploads from pageable host memory (a GPU's copy from
 * it may wait for the device); host points must read the state, so the accounting itself is
 * shown to count. Used by tests/mpi/test_nosync.c on the CPU backend with
 * staged memory and by tests/gpu/test_cuda_nosync.c on a GPU. */
#ifndef MP_TEST_NOSYNC_H
#define MP_TEST_NOSYNC_H

#include "comm/comm.h"

/* Trains with amp.device = device and the "key=value" overrides in sets (NULL-terminated),
 * connecting the communicator as mpdist does (mp_train_connect), and fails the test on any
 * step that breaks the rule above. */
void mp_nosync_check(mp_comm *comm, const char *device, const char *const *sets);

/* The two cases both tests run: O2 fp16 with SGD and clipping, O3 bf16 with Adam. */
extern const char *const mp_nosync_o2_fp16_sgd[];
extern const char *const mp_nosync_o3_bf16_adam[];

#endif
