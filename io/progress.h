/* The progress line on rank 0: a live bar with rate and ETA when stdout is a terminal, a plain
 * line every `every` steps otherwise (Slurm logs), or nothing. */
#ifndef MP_PROGRESS_H
#define MP_PROGRESS_H

#include "engine/clock.h"

#include <stdint.h>
#include <stdio.h>

typedef enum mp_progress_mode {
    MP_PROGRESS_AUTO,
    MP_PROGRESS_BAR,
    MP_PROGRESS_PLAIN,
    MP_PROGRESS_NONE
} mp_progress_mode;

typedef struct mp_progress {
    mp_progress_mode mode; /* resolved: never AUTO after init */
    FILE *out;
    int64_t total_steps;
    int64_t every;
    double t0;             /* monotonic seconds at init */
    int dirty;             /* a bar is on screen without its newline */
} mp_progress;

/* Parses "auto" | "bar" | "plain" | "none"; returns -1 for anything else. */
int mp_progress_mode_parse(const char *s, mp_progress_mode *mode);

/* Starts progress reporting to `out` (AUTO picks BAR when out reaches a terminal, also through
 * mpirun, else PLAIN). */
void mp_progress_init(mp_progress *p, mp_progress_mode mode, FILE *out, int64_t total_steps,
                      int64_t every);

/* Reports that `step` (1-based) of epoch `epoch` finished with this loss and rate.
 * BAR redraws at most ~10 times a second; PLAIN prints when step % every == 0 or at the end. */
void mp_progress_step(mp_progress *p, int64_t step, int64_t epoch, double loss, double lr,
                      double images_per_s);

/* Prints a whole line (ending any bar first), e.g. an evaluation result. */
void mp_progress_line(mp_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Ends the bar's line if one is drawn. */
void mp_progress_finish(mp_progress *p);

#endif
