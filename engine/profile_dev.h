/* The profile's device clock (engine/profile.h, log.profile_clock = "device"), used by
 * engine/profile.c only: every op begun gets a slot whose begin and end are the backend's clock
 * marks (ops->mark_record); the slots of a step are read one step later (when the host is at most
 * a step ahead, the marks have passed and nothing waits), so that timing never holds the host
 * back. Two sets of slots take turns: the step being issued, and the one ended before it. */
#ifndef MP_PROFILE_DEV_H
#define MP_PROFILE_DEV_H

#include <stdbool.h>

#include "engine/ops.h"
#include "engine/profile.h"

/* Where read figures go: an op's own time (kind, phase, ms), a step's time (ms), and a counted
 * step left out (a mark that could not be made, ended in order or read). */
typedef struct mp_prof_dev_sink {
    void (*op)(const char *kind, mp_prof_phase phase, double ms);
    void (*step)(double ms);
    void (*dropped)(void);
} mp_prof_dev_sink;

/* Starts the device clock on ops (which has clock marks), nothing pending. */
void mp_prof_dev_start(const mp_ops *ops);

/* Reads the ended step still pending into sink (a wait for its marks; sink NULL: dropped), then
 * frees every mark and slot. Nothing when it was not started or is stopped already. */
void mp_prof_dev_stop(const mp_prof_dev_sink *sink);

/* A slot for an op (or a step) begun now, as the mark mp_prof_dev_end takes; a slot that cannot
 * be made or marked drops its step's figures. */
double mp_prof_dev_begin(void);

/* Ends the op in slot `mark` as (kind, phase) with a mark; *host0: the host clock at its begin.
 * False (and the step's figures dropped) when `mark` is not the innermost open slot. */
bool mp_prof_dev_end(double mark, const char *kind, mp_prof_phase phase, double *host0);

/* Ends the step in slot `mark`, counted (its figures go to the sink when read) or not (warm-up),
 * reads the step ended before it into sink, and starts the next step's set (after the warm-up
 * step, with that step's slots and marks made ahead). A step whose marks could not be made,
 * ended or read adds nothing but sink->dropped. */
void mp_prof_dev_step_end(double mark, bool counted, const mp_prof_dev_sink *sink);

#endif
