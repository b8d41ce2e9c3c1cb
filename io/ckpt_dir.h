/* The checkpoint directory: files named ckpt-<step, 8 digits>.h5, so the newest is the one with
 * the highest step; temporary files (".ckpt-*.h5.<pid>-<n>.tmp", see h5file.h, and the older
 * ".ckpt-*.h5.tmp") are never listed, and those a killed writer left are removed at a run's
 * start (mp_ckpt_clean_temps). A run holds the directory's lock (mp_ckpt_dir_lock) for its
 * lifetime, so two runs never write into one directory. */
#ifndef MP_CKPT_DIR_H
#define MP_CKPT_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/status.h"

#define MP_CKPT_MAX_FILES 4096

/* The step of a checkpoint's file name ("ckpt-<digits>.h5", no directory), or -1 for any
 * other name. */
int64_t mp_ckpt_name_step(const char *name);

/* "<dir>/ckpt-<step>.h5" into out[0..size). */
void mp_ckpt_path(const char *dir, int64_t step, char *out, size_t size);

/* The steps of the `max` newest checkpoint files in `dir` (all are read), newest first, into
 * steps[0..max); returns how many were written, 0 for a missing or empty directory, -1 (with
 * an MP_ECKPT message) when the directory cannot be read. */
int mp_ckpt_list(const char *dir, int64_t *steps, int max);

/* Removes checkpoint files of `dir` so that the one of step `latest` (just written) and the
 * keep - 1 newest of lower steps remain (keep >= 1). Files of higher steps are not this run's
 * (a run resumed from an older file, or damaged ones that auto-resume skipped): they are neither
 * counted nor removed, so they never push out this run's own checkpoints, and a save reaching
 * their step replaces them. Files that cannot be removed are left; MP_ECKPT names the first
 * one. */
mp_status mp_ckpt_prune(const char *dir, int keep, int64_t latest);

/* Whether `path` names a file that saves into checkpoint directory `dir` write, replace or
 * remove (a checkpoint, a save's temporary, the lock), its directory being `dir` itself (the
 * same device and inode); false when either directory does not exist. */
bool mp_ckpt_dir_names(const char *dir, const char *path);

/* Makes `dir` and its parents and checks that files can be created in it (a probe file is
 * created and removed), so that a run learns before training, not at its first save, that its
 * checkpoints cannot be written. MP_ECKPT naming the directory and the system's reason. */
mp_status mp_ckpt_dir_prepare(const char *dir);

/* Takes an exclusive lock on checkpoint directory `dir` (created when missing) for the rest of
 * the process: an open file description lock (fcntl F_OFD_SETLK) on "<dir>/.mpdist.lock", which
 * then names this process ("pid P on host H, since T"). The system drops the lock when the
 * process ends, however it ends. A second run on the same directory is refused before it writes
 * anything: MP_ECKPT naming the holder. Taking it again for the same directory in the same
 * process is a no-op while its lock file is the one locked; when that file is gone (the
 * directory removed and made again by a save), the lock is taken anew on a new one, or refused
 * as above when another run took the directory meanwhile; another directory moves the lock
 * there. Not thread-safe: one thread at a time (the start, then the checkpoint writer). Where
 * the file system has no locks (ENOLCK, EOPNOTSUPP, EINVAL), MP_OK with a warning line (no
 * newline) in note[0..cap), else note is "". */
mp_status mp_ckpt_dir_lock(const char *dir, char *note, size_t cap);

/* Removes the temporaries that killed writers left in `dir`: files named exactly as the writer
 * names them (".ckpt-<step>.h5.<pid>-<n>.tmp", mp_h5_temp_path of mp_ckpt_path, or the older
 * ".ckpt-<step>.h5.tmp"), and only those whose last
 * change is at least min_age_s seconds old: a younger one may be another live job's save into
 * the same directory, and is left. Writes one line (no newline) saying what was removed and left
 * to said[0..cap), "" when there was nothing. Returns the number removed; -1 (with an MP_ECKPT
 * message) when the directory cannot be read. */
int mp_ckpt_clean_temps(const char *dir, double min_age_s, char *said, size_t cap);

#endif
