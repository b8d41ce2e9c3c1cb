/* The sharding sampler, with torch.utils.data.DistributedSampler's semantics:
 * each epoch a permutation of [0, n) seeded by (seed, epoch), identical on every rank (or
 * 0..n-1 when shuffle is off). Without drop_last the permutation is padded to a multiple of
 * `world` by repeating its first indices, so every rank gets ceil(n / world) samples; with
 * drop_last its tail is cut to floor(n / world) * world. Rank r takes positions
 * r, r + world, r + 2 world, ... of the (padded or cut) permutation.
 * A resumed epoch starts at global position `start` (the samples all ranks consumed before
 * the checkpoint, whatever the world size was then): the rest of the permutation, [start, n),
 * is sharded the same way over the current ranks, so with an unchanged world size each rank
 * continues exactly where it stopped. */
#ifndef MP_SAMPLER_H
#define MP_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct mp_sampler {
    int64_t n;          /* dataset size */
    int world, rank;
    uint64_t seed;
    bool shuffle, drop_last;
    int64_t num_local;  /* samples this rank sees in a whole epoch */
    int64_t count;      /* samples this rank sees in the current (possibly resumed) epoch */
    int64_t *local;     /* (count <= num_local) this epoch's indices for this rank, owned */
    int64_t *perm;      /* (n) scratch permutation, owned */
} mp_sampler;

/* Prepares a sampler for n samples (n >= world unless !drop_last), rank in [0, world).
 * Returns 0, or -1 when the arguments are invalid. Call mp_sampler_set_epoch before use. */
int mp_sampler_init(mp_sampler *s, int64_t n, int world, int rank, uint64_t seed, bool shuffle,
                    bool drop_last);

/* Fills s->local with this rank's indices for `epoch` (s->count = num_local). */
void mp_sampler_set_epoch(mp_sampler *s, int64_t epoch);

/* Fills s->local with this rank's share of positions [start, n) of `epoch`'s permutation and
 * sets s->count (0 <= start <= n). start = 0 is mp_sampler_set_epoch. */
void mp_sampler_set_epoch_at(mp_sampler *s, int64_t epoch, int64_t start);

/* How many samples of an epoch started at position `start` this rank takes (what
 * mp_sampler_set_epoch_at sets s->count to); no permutation is made. */
int64_t mp_sampler_share(const mp_sampler *s, int64_t start);

/* Frees the sampler's arrays. */
void mp_sampler_free(mp_sampler *s);

#endif
