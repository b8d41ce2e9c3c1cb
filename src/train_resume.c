/* A resumed start shared by every rank (mp_train_share_start, train.h): what rank 0 loaded from a
 * checkpoint goes to the others, and the steps are replanned for this rank count. */
#include "src/train.h"

typedef struct shared_header {
    mp_resume_point start;
    mp_scaler_state scaler;
    int64_t opt_steps;
} shared_header;

mp_status mp_train_share_start(mp_trainer *t)
{
    MP_TRY(mp_train_sync(t));
    if (t->comm->size > 1) {
        shared_header h = {t->start, t->scaler, t->opt.steps};
        MP_TRY(mp_comm_bcast(t->comm, &h, sizeof h, 0, "broadcast of the resume point"));
        t->start = h.start;
        t->scaler = h.scaler;
        t->opt.steps = h.opt_steps;
    }
    if (t->start.world_size == 0)
        return MP_OK; /* a fresh start: the initial parameters are all there is */
    mp_train_replan(t);
    if (t->start.step < t->total_steps)
        MP_TRY(mp_train_check_batches(t, mp_sampler_share(&t->sampler, t->start.position), true));
    if (t->comm->size == 1)
        return MP_OK;
    MP_TRY(mp_train_sync_buffers(t));
    for (int k = 0; k < MP_NGROUPS; k++) {
        MP_TRY(mp_train_bcast(t, &t->opt.slot1[k], "broadcast of the optimizer state"));
        MP_TRY(mp_train_bcast(t, &t->opt.slot2[k], "broadcast of the optimizer state"));
    }
    return MP_OK;
}
