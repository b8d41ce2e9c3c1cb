/* The no-host-synchronisation check of a training run (issue 7): a 1-rank run on synthetic
 * data, counting with the backend's own accounting (ops->counters) the device-to-host reads and
 * the synchronisations of each step. Steps that are not host points (logging, evaluation,
 * checkpoint, epoch-end and last steps) must have none; host points must read the state, so the
 * accounting itself is shown to count. Used by tests/mpi/test_nosync.c on the CPU backend with
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
