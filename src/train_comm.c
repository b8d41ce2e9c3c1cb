/* How the gradients travel (comm.backend): NCCL on the GPUs when every rank has a GPU of its
 * own (or shares one under comm.share_gpu, a testing mode: comm/device_bind.h), MPI otherwise;
 * rank 0 prints the choice and why. A backend whose memory is host memory it declares
 * device-like (the staged CPU backend, a test of the GPU's paths) takes the device path over a
 * second MPI transport on several ranks, so the CPU suite runs it. */
#include <stdio.h>
#include <string.h>

#include "comm/device_bind.h"
#include "src/train.h"

mp_status mp_train_connect(mp_trainer *t)
{
    mp_comm *c = t->comm;
    mp_gpu_id *ids = mp_alloc((size_t)c->size * sizeof *ids, MP_MEM_WORKSPACE);
    mp_status st = mp_comm_gather_gpus(c, t->device, ids);
    int use_nccl = 0;
    char why[256] = "";
    bool refused = false; /* by mp_comm_choose: "comm.backend = nccl, but why" */
    if (st == MP_OK) {
        st = mp_comm_choose(t->cfg->comm.backend, t->device >= 0, mp_comm_nccl_built(),
                            t->cfg->comm.share_gpu, c->size, ids, &use_nccl, why, sizeof why);
        refused = st != MP_OK;
    }
    if (st == MP_OK && use_nccl) /* before the process's first NCCL call */
        st = mp_comm_share_gpu_env(c->rank, c->size, ids, NULL);
    mp_free(ids);
    if (refused) { /* the key named as the loader names it, once */
        const char *msg = mp_error_message(), *key = "comm.backend = ";
        char at[900];
        if (strncmp(msg, key, strlen(key)) == 0)
            msg += strlen(key);
        return mp_fail(st, "%s: %s", mp_config_key_at(t->cfg, "comm.backend", at, sizeof at),
                       msg);
    }
    if (st != MP_OK) /* gathering the GPUs (a communication or CUDA error), comm.share_gpu */
        return st;
    bool staged = !t->ops->host_memory && !t->ops->queue() && c->size > 1 &&
                  c->thread_level == MPI_THREAD_MULTIPLE;
    if (use_nccl || staged) {
        MP_TRY(mp_comm_use_device(c, t->device, use_nccl ? t->ops->queue() : NULL));
        t->device_comm = true;
    }
    if (staged && !use_nccl)
        snprintf(why + strlen(why), sizeof why - strlen(why),
                 "; %s memory: the device path, on a second MPI transport", t->ops->name);
    if (c->rank == 0)
        printf("comm: %s\n", why);
    return MP_OK;
}
