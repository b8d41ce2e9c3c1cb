/* A logging window's end (src/train_window.h). */
#include "src/train_window.h"

#include <string.h>

#include "src/train.h"

/* The mean over the window's steps (its last MP_WINDOW_COMM) of the least comm_ms over the ranks
 * (*last: the all-reduce as the last rank to arrive saw it) and of the most less the least
 * (*skew), from one MAX over the ranks of each step's comm_ms and its negation. No clock is
 * compared between ranks. Steps where a rank did not measure (comm_ms 0: it never waited) are
 * left out; -1 for both when none is left, when the logging step measured none (NCCL's first
 * steps) or there is one rank. */
static mp_status comm_spread(mp_trainer *t, const mp_window *w, double *last, double *skew)
{
    *last = *skew = -1.0;
    int n = w->steps < MP_WINDOW_COMM ? (int)w->steps : MP_WINDOW_COMM;
    if (t->comm->size == 1 || n == 0 || !t->sync.timed) /* !timed on every rank alike */
        return MP_OK;
    double v[2 * MP_WINDOW_COMM];
    for (int i = 0; i < n; i++) {
        v[i] = w->comm[i];
        v[n + i] = -w->comm[i];
    }
    MP_TRY(mp_comm_allreduce(t->comm, v, (size_t)(2 * n), MP_F64, MP_REDOP_MAX,
                             "spread of the all-reduce times over the ranks"));
    double sl = 0.0, sk = 0.0;
    int used = 0;
    for (int i = 0; i < n; i++)
        if (-v[n + i] > 0) {
            sl += -v[n + i];
            sk += v[i] + v[n + i];
            used++;
        }
    if (used > 0) {
        *last = sl / used;
        *skew = sk / used;
    }
    return MP_OK;
}

mp_status mp_train_log_window(mp_trainer *t, int64_t step, int64_t epoch, double loss,
                              double lr, double scale, bool skipped, mp_window *w,
                              double *global_loss, double *rate)
{
    double v[1] = {loss};
    if (t->comm->size > 1)
        MP_TRY(mp_comm_allreduce(t->comm, v, 1, MP_F64, MP_REDOP_SUM, "sum of the step losses"));
    *global_loss = v[0] / t->comm->size;
    double dt = mp_now() - w->t0, device_ms = -1.0;
    if (w->mark[0] && w->mark[1] && w->steps > 0) {
        MP_TRY(t->ops->mark_elapsed(w->mark[0], w->mark[1], &device_ms));
        device_ms /= (double)w->steps;
    }
    mp_step_record r = {
        .step = step,
        .epoch = epoch,
        .loss = *global_loss,
        .lr = lr,
        .loss_scale = scale,
        .skipped = skipped,
        .images_per_s = dt > 0 ? (double)w->images / dt : 0.0,
        .step_ms = w->steps ? 1e3 * dt / (double)w->steps : 0.0,
        .device_ms = device_ms,
        .comm_ms = w->timed ? w->comm_ms / (double)w->timed : 0.0, /* over the timed steps */
        .comm_hidden = w->comm_ms > 0 ? 1.0 - w->exposed_ms / w->comm_ms : -1.0,
    };
    MP_TRY(comm_spread(t, w, &r.comm_last_ms, &r.comm_skew_ms));
    *rate = r.images_per_s;
    if (t->metrics)
        mp_metrics_step(t->metrics, &r);
    mp_progress_step(&t->progress, step, epoch + 1, *global_loss, lr, r.images_per_s);
    void *start = w->mark[1], *end = w->mark[0];
    memset(w, 0, sizeof *w);
    w->mark[0] = start;
    w->mark[1] = end;
    w->t0 = mp_now();
    return MP_OK;
}
