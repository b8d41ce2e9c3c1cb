/* A dataset file read whole from start to end, gzip-compressed or not, through zlib's inflate
 * rather than its gz* API: inflate reports the end of a gzip member only after it has checked
 * the member's CRC-32 and length trailer, so a stream cut anywhere, its trailer included, is
 * told apart from a complete one (gzread of zlib 1.2.13 returns end-of-file without an error
 * when only the trailer is missing). Concatenated members are one stream, as gzip(1) reads them;
 * bytes after the last member that do not start another member are ignored, as by gzip(1): they
 * can only follow data that passed its CRC. A file that does not start with gzip's magic is read
 * as it is. The file must be a regular file (mp_open_regular): a FIFO is refused, never opened
 * for a blocking read. */
#ifndef MP_GZFILE_H
#define MP_GZFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

typedef struct mp_gzf mp_gzf;

/* Opens `path`. MP_EDATA naming it when it cannot be opened or is not a regular file; then
 * *missing (when not NULL) says whether it does not exist, so a caller can try another name. */
mp_status mp_gzf_open(mp_gzf **out, const char *path, bool *missing);

/* Reads up to n bytes of the (decompressed) data into buf; returns how many arrived, fewer than
 * n only at the end of the data, or -1 after MP_EDATA naming the file: a read error, a damaged
 * gzip stream (zlib's message, e.g. "incorrect data check"), or one that ends before its
 * trailer ("truncated"). */
int64_t mp_gzf_read(mp_gzf *f, void *buf, size_t n);

/* Counts the data bytes after those already read into *rest: a gzip stream is read on to its
 * end, discarding the data, so that every member's trailer is checked (MP_EDATA as
 * mp_gzf_read); a file that is not compressed is counted from its size, without reading. */
mp_status mp_gzf_rest(mp_gzf *f, int64_t *rest);

/* Whether the file is gzip-compressed. */
bool mp_gzf_compressed(const mp_gzf *f);

/* The path it was opened with. */
const char *mp_gzf_path(const mp_gzf *f);

/* Closes and frees (NULL is ignored). */
void mp_gzf_close(mp_gzf *f);

#endif
