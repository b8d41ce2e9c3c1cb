/* Fuzz target: the HDF5 image reader (mp_h5data_load, then batches through
 * mp_dataset_batch_augmented). Each input is written as a file under /tmp:
 *   byte 0      flags: bit 0 layout nchw, bits 1-2 data.num_classes (2, 10, 256 or 1000000),
 *               bit 3 a limit of 3 samples a split, bit 4 augmentation (pad 2, flip)
 *   the rest    the HDF5 file, read with the default names (train/images, train/labels,
 *               test/images, test/labels)
 * The load must succeed, or fail with MP_EDATA and a one-line message, with both datasets zeroed
 * and MP_MEM_DATA back where it was; a loaded pair must have labels in range, and every sample
 * (at most the first 32 of each split) must gather, or fail with MP_EDATA and one line.
 * Anything else aborts, for the fuzzer to report. Images are at most 4096 x 4096 x 4, so a
 * header alone cannot make a sample too large to allocate. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "io/augment.h"
#include "io/dataset.h"
#include "io/h5data.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_line_edata(mp_status st)
{
    const char *msg = mp_error_message();
    if (st != MP_EDATA || !msg[0] || strchr(msg, '\n'))
        abort();
}

/* Gathers the first samples of d one at a time into a batch of FP32. */
static void gather(const mp_dataset *d, int64_t classes, int64_t limit, bool aug)
{
    static const double mean[MP_DATA_MAX_CHANNELS] = {0.5, 0.5, 0.5, 0.5};
    static const double std[MP_DATA_MAX_CHANNELS] = {0.25, 0.25, 0.25, 0.25};
    if (d->count < 1 || (limit > 0 && d->count > limit) || !d->h5 || d->images)
        abort();
    size_t per = (size_t)d->h * (size_t)d->w * (size_t)d->c;
    if (per > (size_t)1 << 24) /* 16M values (64 MiB of FP32): fine, but skip the gather */
        return;
    float *x = malloc(per * sizeof *x);
    if (!x)
        return;
    for (int64_t j = 0; j < d->count && j < 32; j++) {
        int32_t y;
        mp_status st = mp_dataset_batch_augmented(d, &j, 1, mean, std, 3, 1, aug ? 2 : 0, aug,
                                                  MP_F32, x, &y);
        if (st != MP_OK)
            one_line_edata(st);
        else if (y < 0 || y >= classes)
            abort();
    }
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const int64_t classes[4] = {2, 10, 256, 1000000};
    static const mp_h5data_keys keys[2] = {{"train/images", "train/labels"},
                                           {"test/images", "test/labels"}};
    unsigned flags = data[0];
    bool nchw = flags & 1, aug = flags & 16;
    int64_t nc = classes[(flags >> 1) & 3], limit = flags & 8 ? 3 : 0;
    char dir[] = "/tmp/mpdist-fuzz-h5data-XXXXXX", path[128] = "";
    if (!mkdtemp(dir))
        return 0;
    if (mp_fuzz_put_file(path, sizeof path, dir, "data.h5", data + 1, size - 1) == 0) {
        int64_t before = mp_mem_current(MP_MEM_DATA);
        mp_dataset tr, te, zero;
        memset(&zero, 0, sizeof zero);
        mp_status st = mp_h5data_load(&tr, &te, path, keys, nchw, nc, 1, limit, limit);
        if (st == MP_OK) {
            gather(&tr, nc, limit, aug);
            gather(&te, nc, limit, false);
            mp_dataset_free(&tr);
            mp_dataset_free(&te);
        } else {
            one_line_edata(st);
            if (memcmp(&tr, &zero, sizeof tr) || memcmp(&te, &zero, sizeof te))
                abort();
        }
        if (mp_mem_current(MP_MEM_DATA) != before)
            abort();
    }
    if (path[0])
        unlink(path);
    rmdir(dir);
    return 0;
}
