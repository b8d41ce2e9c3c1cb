/* Learning-rate schedules. */
#include "engine/schedule.h"

#include <math.h>
#include <string.h>

int mp_schedule_parse(const char *name, mp_sched_type *type)
{
    static const char *const names[] = {"constant", "step", "cosine", "linear"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) {
            *type = (mp_sched_type)i;
            return 0;
        }
    return -1;
}

double mp_schedule_lr(const mp_schedule *s, int64_t step)
{
    step += s->offset;
    if (step < s->warmup_steps)
        return s->base_lr * (double)(step + 1) / (double)s->warmup_steps;
    step -= s->warmup_steps;
    int64_t total = s->total_steps - s->warmup_steps;
    if (total < 1)
        total = 1;
    double t = (double)(step < total ? step : total) / (double)total;
    switch (s->type) {
    case MP_SCHED_CONSTANT: return s->base_lr;
    case MP_SCHED_STEP:
        return s->base_lr * pow(s->gamma, (double)(step / (s->step_every > 0 ? s->step_every : 1)));
    case MP_SCHED_COSINE:
        return s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * t));
    case MP_SCHED_LINEAR: return s->min_lr + (s->base_lr - s->min_lr) * (1.0 - t);
    }
    return s->base_lr;
}
