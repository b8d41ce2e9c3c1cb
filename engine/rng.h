/* A small deterministic PRNG (xoshiro256**, seeded through splitmix64). Streams seeded with
 * the same (seed, stream) produce the same numbers on every rank and every platform. */
#ifndef MP_RNG_H
#define MP_RNG_H

#include <stdint.h>

typedef struct mp_rng {
    uint64_t s[4];
} mp_rng;

/* Seeds r from a user seed and a stream id (e.g. an epoch or a purpose tag). */
void mp_rng_seed(mp_rng *r, uint64_t seed, uint64_t stream);

/* The next 64 random bits. */
uint64_t mp_rng_next(mp_rng *r);

/* A uniform double in [0, 1) with 53 random bits. */
double mp_rng_uniform(mp_rng *r);

/* A uniform integer in [0, n) without modulo bias; n > 0. */
uint64_t mp_rng_below(mp_rng *r, uint64_t n);

#endif
