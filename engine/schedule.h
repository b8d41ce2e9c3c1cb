/* Learning-rate schedules, evaluated per optimizer step. */
#ifndef MP_SCHEDULE_H
#define MP_SCHEDULE_H

#include <stdint.h>

typedef enum mp_sched_type {
    MP_SCHED_CONSTANT,
    MP_SCHED_STEP,
    MP_SCHED_COSINE,
    MP_SCHED_LINEAR
} mp_sched_type;

typedef struct mp_schedule {
    mp_sched_type type;
    double base_lr;
    double min_lr;       /* cosine: the floor reached at total_steps */
    double gamma;        /* step: factor applied every step_every steps */
    int64_t step_every;  /* step: steps between decays (>= 1) */
    int64_t total_steps;  /* cosine, linear: the run's length in the schedule's steps (>= 1) */
    int64_t warmup_steps; /* linear warm-up from 0 to base over these first steps */
    int64_t offset;       /* added to the run's step to give the schedule's (0 unless the run,
                           * or one it resumed, changed its global batch: the schedule keeps
                           * its place in the epochs) */
} mp_schedule;

/* Parses "constant" | "step" | "cosine" | "linear"; returns -1 for anything else. */
int mp_schedule_parse(const char *name, mp_sched_type *type);

/* The learning rate for 0-based step `step` (skipped steps count: the schedule follows the
 * loop, as a PyTorch loop that calls scheduler.step() every iteration), taken at the schedule's
 * step step + s->offset >= 0 (total_steps and warmup_steps count the schedule's steps). During
 * the warm-up, base * (step + 1) / warmup_steps; after it, with s = step - warmup_steps and
 * T = total_steps - warmup_steps:
 * constant: base; step: base * gamma^floor(s / step_every);
 * cosine: min + (base - min) * (1 + cos(pi * min(s, T) / T)) / 2;
 * linear: min + (base - min) * (1 - min(s, T) / T). */
double mp_schedule_lr(const mp_schedule *s, int64_t step);

#endif
