/* Fuzz target: the token shard reader (mp_tokens_load, mp_tokens_batch). Each input becomes a
 * fresh directory under /tmp with a training and a validation shard:
 *   byte 0      flags: bits 0-1 the context (2, 3, 8 or 64 tokens), bit 2 headerless tokens
 *               of 4 bytes (else 2), bits 3-4 the vocabulary (2, 256, 65536 or 1000000), bit 5
 *               a limit of 2 windows a split (else none)
 *   bytes 1-2   n, big-endian: the next n bytes (at most what is left) are train.bin
 *   the rest    val.bin
 * (a shard that starts with llm.c's magic is read with its header.) The load must succeed, or
 * fail with MP_EDATA and a one-line message, with both datasets zeroed; a loaded pair must have
 * windows within its limit, and every window of both splits must gather with tokens and labels
 * below the vocabulary. Anything else aborts, for the fuzzer to report. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/dataset.h"
#include "io/tokens.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Gathers every window of d (at most the first 64) one at a time and checks the values. */
static void check_windows(const mp_dataset *d, int64_t vocab, int64_t limit)
{
    if (d->count < 1 || (limit > 0 && d->count > limit) || d->num_classes != vocab || d->h != 1)
        abort();
    float x[64];
    int32_t y[64];
    for (int64_t j = 0; j < d->count && j < 64; j++) {
        if (mp_tokens_batch(d, &j, 1, 7, 3, MP_F32, x, y) != MP_OK)
            abort();
        for (int k = 0; k < d->w; k++)
            if (x[k] < 0 || x[k] >= (float)vocab || y[k] < 0 || y[k] >= vocab)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    static const int contexts[4] = {2, 3, 8, 64};
    static const int64_t vocabs[4] = {2, 256, 65536, 1000000};
    unsigned flags = data[0];
    int context = contexts[flags & 3], width = flags & 4 ? 4 : 2;
    int64_t vocab = vocabs[(flags >> 3) & 3], limit = flags & 32 ? 2 : 0;
    size_t n = (size_t)data[1] << 8 | data[2];
    data += 3;
    size -= 3;
    n = n < size ? n : size;
    char dir[] = "/tmp/mpdist-fuzz-tokens-XXXXXX", train[128] = "", val[128] = "";
    if (!mkdtemp(dir))
        return 0;
    if (mp_fuzz_put_file(train, sizeof train, dir, "train.bin", data, n) == 0 &&
        mp_fuzz_put_file(val, sizeof val, dir, "val.bin", data + n, size - n) == 0) {
        mp_dataset tr, te, zero;
        memset(&zero, 0, sizeof zero);
        mp_status st = mp_tokens_load(&tr, &te, dir, context, width, vocab, limit, limit);
        if (st == MP_OK) {
            check_windows(&tr, vocab, limit);
            check_windows(&te, vocab, limit);
            mp_dataset_free(&tr);
            mp_dataset_free(&te);
        } else {
            const char *msg = mp_error_message();
            if (st != MP_EDATA || !msg[0] || strchr(msg, '\n') || memcmp(&tr, &zero, sizeof tr) ||
                memcmp(&te, &zero, sizeof te))
                abort();
        }
    }
    if (train[0])
        unlink(train);
    if (val[0])
        unlink(val);
    rmdir(dir);
    return 0;
}
