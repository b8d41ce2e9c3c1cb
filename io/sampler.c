/* DistributedSampler: every rank computes the same epoch permutation (Fisher-Yates driven by
 * mp_rng seeded with (seed, epoch)), views it as padded by wrapping around (position p holds
 * perm[p % n]) or cut to a multiple of world, and keeps positions rank, rank + world, ...
 * So the ranks' shares are disjoint when n % world == 0 or drop_last is set, and together
 * cover every index at least once otherwise. */
#include "io/sampler.h"

#include <string.h>

#include "engine/alloc.h"
#include "engine/rng.h"

int mp_sampler_init(mp_sampler *s, int64_t n, int world, int rank, uint64_t seed, bool shuffle,
                    bool drop_last)
{
    if (!s)
        return -1;
    memset(s, 0, sizeof *s);
    if (n < 0 || world < 1 || rank < 0 || rank >= world || (drop_last && n < world))
        return -1;
    s->n = n;
    s->world = world;
    s->rank = rank;
    s->seed = seed;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
    s->num_local = drop_last ? n / world : (n + world - 1) / world;
    s->local = mp_alloc((size_t)s->num_local * sizeof(int64_t), MP_MEM_DATA);
    s->perm = mp_alloc((size_t)n * sizeof(int64_t), MP_MEM_DATA);
    return 0;
}

void mp_sampler_set_epoch(mp_sampler *s, int64_t epoch) { mp_sampler_set_epoch_at(s, epoch, 0); }

int64_t mp_sampler_share(const mp_sampler *s, int64_t start)
{
    int64_t rest = s->n - start > 0 ? s->n - start : 0, w = s->world;
    return s->drop_last ? rest / w : (rest + w - 1) / w;
}

void mp_sampler_set_epoch_at(mp_sampler *s, int64_t epoch, int64_t start)
{
    int64_t n = s->n;
    for (int64_t i = 0; i < n; i++)
        s->perm[i] = i;
    if (s->shuffle && n > 1) {
        mp_rng r;
        mp_rng_seed(&r, s->seed, (uint64_t)epoch);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)mp_rng_below(&r, (uint64_t)i + 1);
            int64_t t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    int64_t w = s->world;
    s->count = mp_sampler_share(s, start);
    for (int64_t k = 0; k < s->count; k++)
        s->local[k] = s->perm[(start + s->rank + k * w) % n];
}

void mp_sampler_free(mp_sampler *s)
{
    mp_free(s->local);
    mp_free(s->perm);
    memset(s, 0, sizeof *s);
}
