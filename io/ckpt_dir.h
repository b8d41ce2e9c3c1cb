/* The checkpoint directory: files named ckpt-<step, 8 digits>.h5, so the newest is the one with
 * the highest step; temporary files (".ckpt-*.h5.tmp", see h5file.h) are never listed. */
#ifndef MP_CKPT_DIR_H
#define MP_CKPT_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

#define MP_CKPT_MAX_FILES 4096

/* "<dir>/ckpt-<step>.h5" into out[0..size). */
void mp_ckpt_path(const char *dir, int64_t step, char *out, size_t size);

/* The steps of the `max` newest checkpoint files in `dir` (all are read), newest first, into
 * steps[0..max); returns how many were written, 0 for a missing or empty directory, -1 (with
 * an MP_ECKPT message) when the directory cannot be read. */
int mp_ckpt_list(const char *dir, int64_t *steps, int max);

/* Removes checkpoint files of `dir` so that the one of step `latest` (just written) and the
 * keep - 1 newest others remain (keep >= 1): the file just written is never removed, even when
 * files of higher steps are there. Files that cannot be removed are left; MP_ECKPT names the
 * first one. */
mp_status mp_ckpt_prune(const char *dir, int keep, int64_t latest);

#endif
