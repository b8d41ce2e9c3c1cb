/* Output dtype rules shared by layer classes (engine/layer.h). */
#include "engine/layer.h"

mp_dtype mp_out_compute(const mp_layer *l, const mp_amp_policy *a, mp_dtype in)
{
    (void)l;
    (void)in;
    return a->compute;
}

mp_dtype mp_out_weights(const mp_layer *l, const mp_amp_policy *a, mp_dtype in)
{
    (void)l;
    (void)in;
    return a->weights;
}
