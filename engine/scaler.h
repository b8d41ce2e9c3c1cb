/* The loss scaler (docs/ARCHITECTURE.md §3): dynamic scaling as PyTorch's GradScaler, with
 * DeepSpeed's hysteresis, a floor and a ceiling, or a static scale. One addition, for gradients
 * stored or sent in fp16 (O2's half gradients, a half wire): after a good step the scale is halved
 * until the step's largest gradient would fill at most 2^-margin of the half type's range (as
 * Transformer Engine's amax-based scaling keeps a margin). Without it, gradients that grow from
 * step to step are caught only when they overflow, and the skipped steps are exactly those with
 * the largest gradients: early in a run at a high learning rate, the corrections a network
 * needs (issue 16). The state is a small plain struct so a GPU can keep it in device memory;
 * the update is a pure function of (state, found_inf, fill), so every rank that agrees on
 * found_inf and fill holds the same scale. */
#ifndef MP_SCALER_H
#define MP_SCALER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/hd.h"

typedef struct mp_scaler_config {
    bool dynamic;
    double init_scale;      /* dynamic: first scale; static: the scale */
    double growth_factor;   /* > 1 */
    double backoff_factor;  /* in (0, 1) */
    int64_t growth_interval; /* good steps in a row before growing */
    int64_t hysteresis;     /* overflows tolerated before backing off (1 = back off at once) */
    double min_scale, max_scale;
    int64_t max_consecutive_skips; /* 0 = no limit */
    int64_t margin;         /* dynamic: powers of two kept free above the largest half gradient
                               after a good step; -1 = none (GradScaler's rule alone); 0 is
                               not off: the scale stays where that gradient does not overflow */
} mp_scaler_config;

typedef struct mp_scaler_state {
    double scale;
    int64_t growth_tracker;  /* good steps since the last overflow or growth */
    int64_t hysteresis_left; /* overflows still tolerated before the next backoff */
    int64_t skipped_steps;   /* total */
    int64_t consecutive_skips;
} mp_scaler_state;

/* The starting state for a configuration. */
mp_scaler_state mp_scaler_init(const mp_scaler_config *c);

/* Advances the state after a step whose (globally agreed) gradients were or were not finite:
 * found_inf: the step was skipped; a dynamic scale backs off by backoff_factor (not below
 * min_scale) once hysteresis overflows have been tolerated, and the growth tracker restarts.
 * Otherwise: after growth_interval good steps in a row the scale grows by growth_factor (not
 * above max_scale) and hysteresis is restored; then, with margin >= 0, the scale is halved
 * (not below min_scale) while fill, the largest |gradient| of the step as a fraction of the
 * largest finite value of the half type it was stored or sent in (0: none was), grown with the
 * scale from the one the step used, is above 2^-margin. A static scale never changes. Returns
 * true when max_consecutive_skips skipped steps in a row have been reached (the run has
 * diverged). Inline for both sides: the CUDA backend runs this very function in a one-thread
 * kernel on the state in device memory. */
MP_HD static inline bool mp_scaler_update(mp_scaler_state *s, const mp_scaler_config *c,
                                          bool found_inf, double fill)
{
    double used = s->scale;
    if (found_inf) {
        s->skipped_steps++;
        s->consecutive_skips++;
        if (c->dynamic) {
            s->growth_tracker = 0;
            if (s->hysteresis_left > 1) {
                s->hysteresis_left--;
            } else {
                double next = s->scale * c->backoff_factor;
                s->scale = next < c->min_scale ? c->min_scale : next;
            }
        }
        return c->max_consecutive_skips > 0 && s->consecutive_skips >= c->max_consecutive_skips;
    }
    s->consecutive_skips = 0;
    if (c->dynamic && ++s->growth_tracker >= c->growth_interval) {
        double next = s->scale * c->growth_factor;
        s->scale = next > c->max_scale ? c->max_scale : next;
        s->growth_tracker = 0;
        s->hysteresis_left = c->hysteresis;
    }
    if (c->dynamic && c->margin >= 0 && fill > 0.0) {
        double limit = 1.0;
        for (int64_t i = 0; i < c->margin; i++)
            limit *= 0.5;
        while (fill * (s->scale / used) > limit && s->scale * 0.5 >= c->min_scale)
            s->scale *= 0.5;
    }
    return false;
}

#endif
