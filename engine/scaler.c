/* The loss scaler's state machine. */
#include "engine/scaler.h"

mp_scaler_state mp_scaler_init(const mp_scaler_config *c)
{
    mp_scaler_state s = {.scale = c->init_scale, .hysteresis_left = c->hysteresis};
    return s;
}

bool mp_scaler_update(mp_scaler_state *s, const mp_scaler_config *c, bool found_inf)
{
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
    return false;
}
