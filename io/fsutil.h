/* Small file-system helpers shared by the writers in io/ (metrics, checkpoints, datasets). */
#ifndef MP_FSUTIL_H
#define MP_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/status.h"

/* mkdir -p of the directory part of `path` (everything before its last '/'). Returns 0, or -1
 * with errno set and the directory that could not be made left in dir[0..cap). */
int mp_make_parents(const char *path, char *dir, size_t cap);

/* Opens `path` for reading only when it is a regular file: opened without blocking (so a FIFO
 * or a device cannot stall the open), checked with fstat, then set back to blocking reads.
 * Returns the descriptor (*size: the file's bytes when size is not NULL), or -1 with *why set to
 * a static text: the system's message, "not a regular file (a FIFO)", "... (a directory)",
 * "... (a device)" or "... (a socket)"; errno is the system's error, EINVAL for a file that is
 * not regular. */
int mp_open_regular(const char *path, long long *size, const char **why);

/* mp_open_regular as a stdio stream ("rb"), or NULL with *why set. */
FILE *mp_fopen_regular(const char *path, const char **why);

/* Opens `path` for writing as a stdio stream, truncated ("w") or appended to (append), created
 * with mode 0666 (less the umask) when missing, without blocking on the open: a FIFO that no
 * process reads is an error instead of a wait. Returns the stream, or NULL with errno set and
 * *why the system's message or "a FIFO that no process reads (start the reader first)". */
FILE *mp_fopen_output(const char *path, bool append, const char **why);

/* Whether `path` is a regular file that holds bytes that do not start with `prefix` (another
 * program's file, which a writer of files that start so must not overwrite), or bytes that
 * cannot be read. A missing or empty file, one that is not regular, and one whose bytes are a
 * start of `prefix` (cut short) are not. */
bool mp_file_foreign(const char *path, const char *prefix);

/* The last name of `path` when the directory it is in (the part before its last '/'; "." when
 * there is none, "/" for "/NAME") is directory `dir` itself (the same device and inode), else
 * NULL; NULL too when either directory does not exist. A pointer into path. */
const char *mp_path_name_in(const char *dir, const char *path);

/* Whether `path` (which need not exist yet: its nearest existing ancestor is resolved, links
 * and all, and the rest's names appended, "." dropped and ".." taking one off) is directory
 * `dir` or lies under it. False when dir is no existing directory. */
bool mp_path_within(const char *dir, const char *path);

/* MP_OK when `dir` is an existing directory, else MP_EDATA with "DIR: no such directory",
 * "DIR: not a directory" or the system's message (dataset directories). */
mp_status mp_check_dir(const char *dir);

#endif
