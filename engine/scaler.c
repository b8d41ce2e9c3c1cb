/* The loss scaler's state machine. */
#include "engine/scaler.h"

mp_scaler_state mp_scaler_init(const mp_scaler_config *c)
{
    mp_scaler_state s = {.scale = c->init_scale, .hysteresis_left = c->hysteresis};
    return s;
}
