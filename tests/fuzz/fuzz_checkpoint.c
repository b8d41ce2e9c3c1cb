/* Fuzz target: checkpoint opening and loading. The input is written to a file and read as
 * `mpdist inspect` reads it (every attribute and dataset, strings of either format), then
 * exported to fp16 as `mpdist export` does. Either must succeed or fail with MP_ECKPT: never
 * crash, hang, leak or read out of bounds (the corpus holds a file of each format, and the
 * reproducer of a flipped global heap size that crashed HDF5). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[] = "/tmp/mpdist-fuzz-ckpt-XXXXXX", out[64];
    int fd = mkstemp(in);
    if (fd < 0)
        return 0;
    FILE *f = fdopen(fd, "wb");
    size_t put = f ? fwrite(data, 1, size, f) : 0;
    if (f)
        fclose(f);
    snprintf(out, sizeof out, "%s.out.h5", in);
    FILE *sink = fopen("/dev/null", "w");
    if (put == size && sink) {
        mp_status st = mp_checkpoint_inspect(in, sink);
        if (st != MP_OK && st != MP_ECKPT)
            abort(); /* a checkpoint is refused as a checkpoint error, nothing else */
        st = mp_checkpoint_export(in, out, MP_F16, (size & 1) != 0, NULL);
        if (st != MP_OK && st != MP_ECKPT)
            abort();
    }
    if (sink)
        fclose(sink);
    unlink(out);
    unlink(in);
    return 0;
}
