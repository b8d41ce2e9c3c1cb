/* Fuzz target: the CIFAR-10 binary reader (mp_cifar10_load). It reads a directory, so each
 * input becomes a fresh directory under /tmp:
 *   byte 0      flags: bit 0 split "test" (test_batch.bin is the rest of the input), else
 *               "train"; bits 1-2 the limit (0, 1, 2 or 50 samples)
 *   train only: bytes 1-8, four big-endian 16-bit sizes of data_batch_1..4.bin, cut from the
 *               rest of the input in order (each at most what is left); data_batch_5.bin is
 *               what remains
 * The load must succeed, or fail with MP_EDATA and a one-line message, with *d zeroed and
 * MP_MEM_DATA back where it was; a loaded set must be 32x32x3 with labels in [0, 10) and exactly
 * min(limit, records) samples. Anything else aborts, for the fuzzer to report. File sizes are
 * real here, so the image array is never larger than the input. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "io/dataset.h"
#include "tests/fuzz/fuzz_files.h"

#define REC 3073

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = data[0];
    bool test = flags & 1;
    static const int64_t limits[4] = {0, 1, 2, 50};
    int64_t limit = limits[(flags >> 1) & 3];
    data++;
    size--;
    size_t len[5] = {size, 0, 0, 0, 0};
    int nfiles = 1;
    if (!test) {
        if (size < 8)
            return 0;
        const uint8_t *sizes = data;
        data += 8;
        size -= 8;
        size_t left = size;
        for (int i = 0; i < 4; i++) {
            size_t n = (size_t)sizes[2 * i] << 8 | sizes[2 * i + 1];
            len[i] = n < left ? n : left;
            left -= len[i];
        }
        len[4] = left;
        nfiles = 5;
    }
    char dir[] = "/tmp/mpdist-fuzz-cifar-XXXXXX", paths[5][128], name[32];
    if (!mkdtemp(dir))
        return 0;
    int ok = 1;
    int64_t records = 0;
    size_t at = 0;
    for (int i = 0; i < nfiles; i++) {
        if (test)
            snprintf(name, sizeof name, "test_batch.bin");
        else
            snprintf(name, sizeof name, "data_batch_%d.bin", i + 1);
        ok = mp_fuzz_put_file(paths[i], sizeof paths[i], dir, name, data + at, len[i]) == 0 && ok;
        records += (int64_t)(len[i] / REC);
        at += len[i];
    }
    if (ok) {
        int64_t before = mp_mem_current(MP_MEM_DATA);
        mp_dataset d;
        mp_status st = mp_cifar10_load(&d, dir, test ? "test" : "train", limit);
        if (st == MP_OK) {
            int64_t want = limit > 0 && limit < records ? limit : records;
            if (d.count != want || d.h != 32 || d.w != 32 || d.c != 3 || d.num_classes != 10)
                abort();
            for (int64_t i = 0; i < d.count; i++)
                if (d.labels[i] < 0 || d.labels[i] > 9)
                    abort();
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
    for (int i = 0; i < nfiles; i++)
        unlink(paths[i]);
    rmdir(dir);
    return 0;
}
