/* Where the windows of a sequence dataset (text, token shards) start in an epoch: what
 * io/text.c and io/tokens.c share (io/dataset.h). */
#include "engine/rng.h"
#include "io/dataset.h"

int64_t mp_text_offset(const mp_dataset *d, uint64_t seed, int64_t epoch)
{
    if (!d->text_shift)
        return 0;
    mp_rng r;
    mp_rng_seed(&r, seed ^ MP_TEXT_SALT, (uint64_t)epoch);
    return (int64_t)mp_rng_below(&r, (uint64_t)d->w);
}
