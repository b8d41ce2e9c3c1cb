/* The temporaries this process is writing (a checkpoint's or an export's `.NAME.<pid>-<n>.tmp`),
 * so that a signal that ends the process (src/signals.c) can remove them instead of leaving a
 * full-size hidden file beside the target. A small table of slots, safe to use from several
 * threads (the checkpoint writer's and the step's) and to read from a signal handler. */
#ifndef MP_TEMP_GUARD_H
#define MP_TEMP_GUARD_H

/* Records `path`, a temporary this process created and is writing. Returns its slot, or -1
 * when every slot is taken or the path is too long (the file is then not removed on a signal:
 * start-up clean-up, as checkpoint.dir's, still applies). */
int mp_temp_guard_add(const char *path);

/* Forgets slot `slot` (from mp_temp_guard_add; -1 is ignored): call it once the temporary is
 * renamed to its target or removed. */
void mp_temp_guard_drop(int slot);

/* Removes every recorded temporary with unlink(2) and nothing else: async-signal-safe, for a
 * handler about to end the process. */
void mp_temp_guard_unlink_all(void);

#endif
