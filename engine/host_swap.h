/* Host access to tensors that live in a backend's memory (device memory on a GPU), for the code
 * that reads or writes them on the host: checkpoints, broadcasts over MPI, initialisation.
 * mp_host_begin points each given tensor at a fresh host copy (downloaded, or left zeroed), so
 * existing host code and the views it computes from the tensor work unchanged; mp_host_end
 * uploads the host copies when asked and points the tensors back at their backend memory.
 * Tensors that share storage (an FP32 model that is its own master) share one host copy. With a
 * backend whose memory is host memory (ops->host_memory) both are no-ops. */
#ifndef MP_HOST_SWAP_H
#define MP_HOST_SWAP_H

#include <stdbool.h>

#include "engine/ops.h"

enum { MP_HOST_SWAP_MAX = 1024 };

typedef struct mp_host_swap {
    const mp_ops *ops;
    int n;
    mp_tensor *t[MP_HOST_SWAP_MAX];
    void *dev[MP_HOST_SWAP_MAX];
} mp_host_swap;

/* Points ts[0..n) (tensors with no storage are skipped) at host copies; download: fill them
 * from the backend (else they are zeroed). MP_EINTERNAL when n exceeds MP_HOST_SWAP_MAX or a
 * copy fails (every tensor is pointed back first). */
mp_status mp_host_begin(mp_host_swap *s, const mp_ops *ops, mp_tensor *const *ts, int n,
                        bool download);

/* Ends a mp_host_begin: upload: copies the host values into the backend memory first; then
 * every tensor points at its backend memory again and the host copies are freed. */
mp_status mp_host_end(mp_host_swap *s, bool upload);

#endif
