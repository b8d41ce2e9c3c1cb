/* Float inputs for the tests of half conversions (test_floats.h). */
#include "tests/util/test_floats.h"

#include <math.h>

#include "engine/dtype.h"
#include "engine/rng.h"

size_t mp_test_boundary_floats(float *out)
{
    size_t n = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = mp_f16_to_f32((uint16_t)h);
        out[n++] = v;
        if (isnan(v) || isinf(v))
            continue;
        out[n++] = nextafterf(v, INFINITY);
        out[n++] = nextafterf(v, -INFINITY);
        uint16_t up = (uint16_t)(h + 1);
        if ((up & 0x7fff) > 0x7c00)
            continue;
        /* The midpoint to the next half up in magnitude (a float, exactly) and its neighbours;
         * past 65504 the "next" value is inf and the midpoint 65520. */
        double vu = (up & 0x7fff) == 0x7c00 ? copysign(65536.0, v) : mp_f16_to_f32(up);
        float mid = (float)(((double)v + vu) / 2);
        out[n++] = mid;
        out[n++] = nextafterf(mid, 0.0f);
        out[n++] = nextafterf(mid, copysignf(INFINITY, mid));
    }
    static const uint32_t bits[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,
        0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
        0x7f800001u, 0xff800001u, 0x7f802000u, 0x7fbfffffu, 0x7fffffffu, 0xffffffffu,
        0x7fc00001u, 0x7fe01234u, 0xff9fe000u, 0x7f801fffu, 0x33000000u, 0x33000001u,
        0x32ffffffu, 0x33800000u, 0x387fc000u, 0x387fe000u, 0x387fffffu, 0x38800000u,
        0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477fffffu, 0x47800000u, 0x3f7fffffu,
        0x3f808000u, 0x3f818000u, 0x3f7f8000u, 0x00008000u, 0x807f8000u};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        out[n++] = mp_bits_f32(bits[i]);
    return n;
}

void mp_test_random_floats(float *out, size_t n, uint64_t seed)
{
    mp_rng r;
    mp_rng_seed(&r, seed, 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = mp_rng_next(&r);
        uint32_t u = (uint32_t)x;
        if ((x >> 32) & 3) /* exponent in [2^-26, 2^17): fp16 range with margins both sides */
            u = (u & 0x807fffffu) | (((uint32_t)((x >> 40) % 43u) + 101u) << 23);
        out[i] = mp_bits_f32(u);
    }
}
