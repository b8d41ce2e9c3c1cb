/* A logging window of the step loop (src/train.c): the steps since the last logged one, their
 * time, images and all-reduce times, and the clock marks that time them on the device; a logged
 * step ends one, writing its record (metrics, progress line) and starting the next. */
#ifndef MP_TRAIN_WINDOW_H
#define MP_TRAIN_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/status.h"

struct mp_trainer;

/* Steps of a logging window whose comm_ms are compared over the ranks (the last ones). */
enum { MP_WINDOW_COMM = 256 };

typedef struct mp_window {
    double t0, comm_ms, exposed_ms;
    int64_t steps, images, timed; /* timed: steps whose sums were timed (sync.timed) */
    double comm[MP_WINDOW_COMM]; /* this rank's comm_ms per step, step i at i % MP_WINDOW_COMM */
    void *mark[2]; /* clock marks (ops->mark_record): the window's start, its end; kept across
                      windows, the end becoming the next start */
} mp_window;

/* Ends window w at step `step` (0-based) of epoch `epoch`: the mean of the ranks' losses (this
 * rank's `loss`) into *global_loss, the window's images/s into *rate, rank 0's record to the
 * metrics and the progress line (device time from w's marks; the all-reduce's time, its hidden
 * share and its spread over the ranks), then w starts over at now, its end mark its start.
 * Collective: every rank calls it at the same steps. */
mp_status mp_train_log_window(struct mp_trainer *t, int64_t step, int64_t epoch, double loss,
                              double lr, double scale, bool skipped, mp_window *w,
                              double *global_loss, double *rate);

#endif
