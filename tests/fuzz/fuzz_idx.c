/* Fuzz target: the IDX reader (mp_idx_load), raw and gzip. mp_idx_load reads a directory, so
 * each input becomes a fresh directory under /tmp holding an image file and a label file:
 *   byte 0      flags: bit 0 the images are named *.gz, bit 1 the labels are named *.gz,
 *               bits 2-3 the limit (0, 1, 3 or 100 samples), bit 4 split "test" (t10k-*)
 *   bytes 1-2   n, big-endian: the next n bytes (at most what is left) are the image file
 *   the rest    the label file
 * (a *.gz name holding raw bytes is read raw, as zlib does.) The load must succeed, or fail with
 * MP_EDATA and a one-line message, with *d zeroed and MP_MEM_DATA back where it was; a loaded
 * set must be within its limit with labels in [0, 10), and batches of it must gather. Anything
 * else aborts, for the fuzzer to report. A header promising huge sizes is refused by the
 * memory check before anything is allocated, and nothing is allocated from the header alone,
 * so no input can reach the fuzzer's RSS or malloc limits beyond its decompressed size. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "io/dataset.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checks a loaded set and gathers a batch of its first and last samples. */
static void check_loaded(const mp_dataset *d, int64_t limit)
{
    if (d->count < 1 || (limit > 0 && d->count > limit) || d->h < 1 || d->w < 1 || d->c != 1 ||
        !d->images || !d->labels || d->num_classes != 10)
        abort();
    for (int64_t i = 0; i < d->count; i++)
        if (d->labels[i] < 0 || d->labels[i] >= 10)
            abort();
    size_t per = (size_t)d->h * (size_t)d->w;
    if (per > (1u << 20))
        return;
    float *x = malloc(2 * per * sizeof *x);
    int32_t y[2];
    int64_t idx[2] = {0, d->count - 1};
    if (!x)
        abort();
    mp_dataset_batch(d, idx, 2, 0.5, 0.25, MP_F32, x, y);
    if (y[0] != d->labels[0] || y[1] != d->labels[d->count - 1])
        abort();
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned flags = data[0];
    size_t ilen = (size_t)data[1] << 8 | data[2];
    data += 3;
    size -= 3;
    if (ilen > size)
        ilen = size;
    static const int64_t limits[4] = {0, 1, 3, 100};
    int64_t limit = limits[(flags >> 2) & 3];
    const char *prefix = flags & 16 ? "t10k" : "train";
    char dir[] = "/tmp/mpdist-fuzz-idx-XXXXXX", img[128], lab[128], name[64];
    if (!mkdtemp(dir))
        return 0;
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", prefix, flags & 1 ? ".gz" : "");
    int ok = mp_fuzz_put_file(img, sizeof img, dir, name, data, ilen) == 0;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", prefix, flags & 2 ? ".gz" : "");
    ok = mp_fuzz_put_file(lab, sizeof lab, dir, name, data + ilen, size - ilen) == 0 && ok;
    if (ok) {
        int64_t before = mp_mem_current(MP_MEM_DATA);
        mp_dataset d;
        mp_status st = mp_idx_load(&d, dir, flags & 16 ? "test" : "train", 10, limit);
        if (st == MP_OK) {
            check_loaded(&d, limit);
            mp_dataset_free(&d);
        } else {
            const char *msg = mp_error_message();
            mp_dataset zero;
            memset(&zero, 0, sizeof zero);
            if (st != MP_EDATA || !msg[0] || strchr(msg, '\n') || memcmp(&d, &zero, sizeof d))
                abort();
        }
        if (mp_mem_current(MP_MEM_DATA) != before)
            abort();
    }
    unlink(img);
    unlink(lab);
    rmdir(dir);
    return 0;
}
