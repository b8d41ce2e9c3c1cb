/* Saving checkpoints from the training loop (train.h: mp_train_state_of, mp_train_save_state,
 * mp_train_saved, mp_train_save_finished): the trainer's state as a checkpoint sees it, saved
 * synchronously, or with checkpoint.async through the background writer (src/checkpoint_async.h),
 * and the report of each file written (progress line and metrics record). */
#include <stdio.h>
#include <sys/stat.h>

#include "engine/clock.h"
#include "engine/trace.h"
#include "src/checkpoint.h"
#include "src/train.h"

/* The size of file `path` in bytes, or 0 when it cannot be seen. */
static int64_t file_bytes(const char *path)
{
    struct stat sb;
    return path[0] && stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

/* Rank 0: reports a checkpoint written (progress line and metrics record). */
static void saved(mp_trainer *t, const mp_ckpt_record *k)
{
    double mb = (double)k->bytes / 1e6;
    if (k->async)
        mp_progress_line(&t->progress, "checkpoint: %s (%.1f MB in %.3f s in the background, "
                         "%lld steps meanwhile; the step stalled %.3f s)", k->path, mb,
                         k->write_s, (long long)k->steps_during, k->stall_s);
    else
        mp_progress_line(&t->progress, "checkpoint: %s (%.1f MB in %.3f s, %.1f MB/s)", k->path,
                         mb, k->stall_s, k->stall_s > 0 ? mb / k->stall_s : 0.0);
    mp_metrics_checkpoint(t->metrics, k);
}

mp_status mp_train_save_finished(mp_trainer *t, bool wait, mp_train_result *r)
{
    bool done;
    mp_ckpt_done d;
    MP_TRY(mp_ckpt_async_poll(t->ckpt, wait, &done, &d));
    if (!done)
        return MP_OK;
    snprintf(r->checkpoint, sizeof r->checkpoint, "%s", d.path);
    mp_ckpt_record k = {.step = d.step, .path = d.path, .bytes = file_bytes(d.path),
                        .async = true, .stall_s = t->ckpt_stall_s, .wait_s = t->ckpt_wait_s,
                        .write_s = d.write_s, .steps_during = d.steps_during};
    saved(t, &k);
    return MP_OK;
}

mp_status mp_train_save_state(mp_trainer *t, mp_train_state *s,
                              const mp_resume_point *at, mp_train_result *r)
{
    if (t->ckpt)
        return mp_ckpt_async_start(t->ckpt, s, at);
    return mp_checkpoint_save(s, at, r->checkpoint, sizeof r->checkpoint);
}

/* Synchronous, the stall is until the file is durable under its name (gather, write, fsync,
 * rename, directory fsync; not the pruning). */
void mp_train_saved(mp_trainer *t, const mp_train_state *s, const mp_resume_point *at,
                    mp_train_result *r, double t0, double waited)
{
    double dt = mp_now() - t0;
    mp_trace_span(t->ckpt ? "checkpoint snapshot" : "checkpoint save", "checkpoint",
                  MP_TRACE_MAIN, t0, t0 + dt, at->step);
    if (t->ckpt) {
        t->ckpt_stall_s = dt, t->ckpt_wait_s = waited;
        return;
    }
    mp_checkpoint_prune(s, at->step);
    if (t->comm->rank == 0) {
        mp_ckpt_record k = {.step = at->step, .path = r->checkpoint,
                            .bytes = file_bytes(r->checkpoint), .stall_s = dt, .write_s = dt};
        saved(t, &k);
    }
}

mp_train_state mp_train_state_of(mp_trainer *t)
{
    mp_train_state s = {.cfg = t->cfg, .ops = t->ops, .rank = t->comm->rank,
                        .world_size = t->comm->size, .accum = t->accum,
                        .dataset_size = t->train.count,
                        .dataset_digest = t->train_digest, .model = &t->model,
                        .params = &t->model.params, .bufs = t->bufs,
                        .nbufs = t->nbufs, .opt = &t->opt, .scaler_cfg = &t->scaler_cfg,
                        .scaler = &t->scaler, .start = &t->start};
    s.ntensors = mp_train_state_tensors(t, MP_STATE_PARAMS | MP_STATE_OPTIM | MP_STATE_BUFFERS,
                                        s.tensors);
    s.noptim = mp_train_state_tensors(t, MP_STATE_OPTIM, s.optim);
    return s;
}
