/* The state of the mixed-precision step (docs/ARCHITECTURE.md §2), kept in backend memory so that
 * on a GPU the kernels read the loss scale and the overflow flag and the step never waits for the
 * host, and the rule that ends a step, written once for the CPU and the CUDA kernel. */
#ifndef MP_AMP_STATE_H
#define MP_AMP_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/hd.h"
#include "engine/scaler.h"

/* Every field is 8 bytes: the layout is the same in C and CUDA. sumsq, found_inf, stop, fill,
 * bad_labels and data_pending are MP_AMP_AGREE adjacent doubles from &sumsq, so that one MAX
 * all-reduce agrees on all six. */
typedef struct mp_amp_state {
    mp_scaler_state scaler; /* the loss scale and its counters */
    double sumsq;           /* sum of squares of this step's unscaled gradients (amp_check) */
    double found_inf;       /* nonzero: a gradient of this step is inf or NaN */
    double stop;            /* the host's stop request (a signal number), for the agreement */
    double fill;            /* the largest |gradient| stored or sent in half, as a fraction of
                               that type's largest finite value (amp_check; 0: none) */
    double bad_labels;      /* sticky: nonzero once a loss that cannot refuse a label outside
                               [0, C) at once (the GPU's) met one; agreed with the rest, so
                               every rank ends the run at the next host point */
    double data_pending;    /* this step's data error: 0, or the mp_amp_data_error word of a
                               rank whose loader failed during the run (which writes it before
                               each of its steps); the MAX over ranks: the worst code, then the
                               lowest rank */
    double data_error;      /* sticky: the first nonzero data_pending a step agreed on (so the
                               earliest step's failure), after which every rank ends the run at
                               the next host point with its code, printed by its rank */
    int64_t steps;          /* optimizer steps taken, skipped steps excluded */
    double step_scale;      /* the loss scale the last ended step used */
    int64_t diverged;       /* sticky: the count of skipped steps in a row when it first reached
                               max_consecutive_skips (the run must end), else 0 */
    double lr;              /* this step's learning rate (amp_step_values), which an optimizer
                               step with mp_optim_args.lr_from_state reads: a graph replays it */
    int64_t mask_step;      /* this micro-batch's index, step * accum_steps + i
                               (amp_step_values), from which the dropout masks of a model given
                               it (mp_model_mask_step) draw */
} mp_amp_state;

#define MP_AMP_AGREE 6

/* data_error's word for a failure with status `code` (> 0) on rank `rank` (>= 0, < 2^31): larger
 * for a larger code, then for a lower rank; exact in a double. */
static inline double mp_amp_data_error(int code, int rank)
{
    return (double)code * 4294967296.0 + (double)(2147483647 - rank);
}

/* The code and the rank of a nonzero data_error word. */
static inline void mp_amp_data_error_of(double word, int *code, int *rank)
{
    double c = (double)(int64_t)(word / 4294967296.0);
    *code = (int)c;
    *rank = 2147483647 - (int)(word - c * 4294967296.0);
}

/* Ends a step (the amp_update op): remembers the scale it used, advances the scaler with
 * found_inf and fill (noting divergence, which the host may read steps later), counts a step
 * that was not skipped, keeps the first data error, and clears found_inf, sumsq, fill and
 * data_pending; stop stays. */
MP_HD static inline void mp_amp_state_update(mp_amp_state *st, const mp_scaler_config *c)
{
    bool found_inf = st->found_inf != 0.0;
    st->step_scale = st->scaler.scale;
    if (mp_scaler_update(&st->scaler, c, found_inf, st->fill) && !st->diverged)
        st->diverged = st->scaler.consecutive_skips;
    st->steps += !found_inf;
    if (st->data_error == 0.0)
        st->data_error = st->data_pending;
    st->data_pending = 0.0;
    st->found_inf = 0.0;
    st->sumsq = 0.0;
    st->fill = 0.0;
}

#endif
