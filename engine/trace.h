/* The timeline (log.trace; docs/usage.md "A timeline of every rank"): events of one process
 * written as Chrome trace-event JSON (the JSON array format, which Perfetto and chrome://tracing
 * open), one file per rank, timestamps in microseconds on one clock across ranks (the caller
 * gives this process's offset to rank 0's clock). Spans are recorded from the host clock as the
 * host sees them: nothing waits for a device. Any thread may record; each names its track (tid).
 * Spans are kept in memory and written 8192 at a time and at the close (a crash loses the
 * unwritten ones; what was written reads as a JSON array cut short).
 * Off, every call costs one load and a branch. On the CUDA backend each span is also an NVTX
 * range of the same name, so that Nsight Systems shows them (mp_trace_push). */
#ifndef MP_TRACE_H
#define MP_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include <stdio.h>

#include "engine/status.h"

/* What every trace file starts with (mp_trace_open's first record): a file at a rank's path
 * that starts otherwise is another program's, not to be written over. */
#define MP_TRACE_HEAD "[\n{\"name\":\"process_name\""

/* Tracks of a rank's timeline. */
enum { MP_TRACE_MAIN = 0, MP_TRACE_COMM = 1, MP_TRACE_IO = 2 };

/* Starts this process's trace in f, a stream open for writing (truncated) on file `path`, which
 * the trace owns from here on (closed at its end, or on failure): pid `rank` named "rank R
 * (host)"; offset_s is added to the host clock (mp_now) to give rank 0's, and origin_s (on rank
 * 0's clock) is the trace's time zero. MP_EUSAGE naming the file when it cannot start. */
mp_status mp_trace_open(FILE *f, const char *path, int rank, const char *host, double offset_s,
                        double origin_s);

/* Whether a trace is open. */
bool mp_trace_on(void);

/* Records a span from t0 to t1 (host clock, mp_now) named `name` in category `cat` on track
 * `tid`; `step` >= 0 adds it as an argument. Thread-safe. Nothing when off. */
void mp_trace_span(const char *name, const char *cat, int tid, double t0, double t1,
                   int64_t step);

/* Opens an NVTX range `name` on the calling thread when tracing on a CUDA build (nothing
 * otherwise); mp_trace_pop closes the innermost one. */
void mp_trace_push(const char *name);
void mp_trace_pop(void);

/* Ends the array, closes the file; MP_EUSAGE when writing failed (the file is named). Nothing
 * when off. */
mp_status mp_trace_close(void);

#endif
