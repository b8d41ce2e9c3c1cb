/* The per-op profile of training steps (log.profile): wall time by op kind ("conv2d",
 * "batchnorm", "cast", "loss", "optimizer", ...) and phase (forward, backward, step), each op's
 * time exclusive of the ops nested in it (a residual block's own time is its sum; its inner
 * layers count under their own kinds), by one of two clocks (log.profile_clock):
 *  - host: every begin and end first waits for the backend's queue (ops->sync) and reads the host
 *    clock, so on a GPU an op's time is its issue and its execution with nothing overlapped, and
 *    the run is slower; the CPU's ops are synchronous, and the cost is two clock reads an op.
 *  - device: every begin and end records one of the backend's clock marks (ops->mark_record, a
 *    CUDA timing event on the backend's stream) and nothing waits there; a step's marks are read
 *    when the next step ends (so the host runs at most a step ahead), and an op's time is the
 *    device's from the work queued before its begin finishing to the work queued before its end
 *    finishing: its kernels, and any idle gap while the host was still issuing them (an op whose
 *    time is mostly its issue shows it, as the host clock shows it). The step's own time is the
 *    device's too. Work on other streams (NCCL's) shows only where the stream waits for it
 *    ("gradient sync wait": the exposed part). Ops must nest; a step with an op ended out of
 *    order, or a mark that fails, is left out and counted as such. Where the backend has no
 *    clock marks (NULL ops), the host clock. mp_profile_now still waits for the queue.
 * One profile per process, kept by the thread that runs the model (the transports' threads do
 * not time into it). */
#ifndef MP_PROFILE_H
#define MP_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/ops.h"

#define MP_PROFILE_MAX 64

typedef enum mp_prof_phase { MP_PROF_FORWARD, MP_PROF_BACKWARD, MP_PROF_STEP } mp_prof_phase;

typedef struct mp_prof_entry {
    char kind[24];
    mp_prof_phase phase;
    double s;      /* exclusive seconds */
    int64_t calls;
} mp_prof_entry;

/* Turns the profile on with everything at zero; ops is the backend it waits for or whose clock
 * marks it records (device true: the device clock, when ops has clock marks). */
void mp_profile_start(const mp_ops *ops, bool device);

/* Whether the profile times (or, once stopped, timed) by the device clock (see above). */
bool mp_profile_device_clock(void);

/* Turns it off and frees its clock marks (its figures stay readable). */
void mp_profile_stop(void);

/* Whether it is on. */
bool mp_profile_on(void);

/* The host clock (mp_now); while the profile is on, read after the backend's queue has drained,
 * so that on a GPU it marks the device's progress as the profile's own marks do. */
double mp_profile_now(void);

/* Starts timing an op `kind` (or a training step); returns the mark for mp_profile_end (0 when
 * off; with the device clock, the op's slot). With a trace on (engine/trace.h) the mark is the host clock also when the profile is
 * off, mp_profile_end records the op as a span of the trace, and `kind` opens its NVTX range. */
double mp_profile_begin(const char *kind);

/* Ends the op begun at `mark`: its time less that of the ops begun inside it is added to
 *  (kind, phase); kind is copied (23 characters at most).
 * Past MP_PROFILE_MAX (kind, phase) pairs the last entry, renamed "(other kinds)", takes the
 * rest. Nothing when off. */
void mp_profile_end(double mark, const char *kind, mp_prof_phase phase);

/* mp_profile_end whose trace span is named "label (kind)" (a layer's name and kind); the
 * profile counts it under kind. */
void mp_profile_end_as(double mark, const char *kind, mp_prof_phase phase, const char *label);

/* Ends a training step begun at `mark` (with mp_profile_begin, outside any op): adds its wall
 * time to the steps' total and counts it; with the device clock, reads the marks of the step
 * before it and adds that step's figures (the last step's come at mp_profile_stop). The first
 * step after mp_profile_start is warm-up (workspaces grow, caches are cold): its figures are
 * dropped instead. A mark that cannot be recorded or read drops that step's figures (the op's
 * own next check shows the error). */
void mp_profile_step_end(double mark);

/* The entries in first-seen order (*n of them), and the steps' count and total seconds. */
const mp_prof_entry *mp_profile_entries(int *n, int64_t *steps, double *step_s);

/* Prints the table to f: one row per (kind, phase), slowest first, with milliseconds per step,
 * its share of the step time and calls per step, then the time in no op ("(between ops)"); a
 * line saying so when no step was counted. `who` names the process ("rank 0"). */
void mp_profile_print(FILE *f, const char *who);

/* The name of a phase: "forward", "backward", "step". */
const char *mp_prof_phase_name(mp_prof_phase p);

#endif
