/* Learning-rate schedules, evaluated per optimizer step. */
#ifndef MP_SCHEDULE_H
#define MP_SCHEDULE_H

#include <stdint.h>

typedef enum mp_sched_type { MP_SCHED_CONSTANT, MP_SCHED_STEP, MP_SCHED_COSINE } mp_sched_type;

typedef struct mp_schedule {
    mp_sched_type type;
    double base_lr;
    double min_lr;       /* cosine: the floor reached at total_steps */
    double gamma;        /* step: factor applied every step_every steps */
    int64_t step_every;  /* step: steps between decays (>= 1) */
    int64_t total_steps; /* cosine: length of the half period (>= 1) */
} mp_schedule;

/* Parses "constant" | "step" | "cosine"; returns -1 for anything else. */
int mp_schedule_parse(const char *name, mp_sched_type *type);

/* The learning rate for 0-based optimizer step `step`:
 * constant: base; step: base * gamma^floor(step / step_every);
 * cosine: min + (base - min) * (1 + cos(pi * min(step, total) / total)) / 2. */
double mp_schedule_lr(const mp_schedule *s, int64_t step);

#endif
