/* The per-op profile (see profile.h). Invariants, host clock: depth counts the ops begun and not
 * ended; for d up to MP_PROFILE_DEPTH, child[d] holds the seconds of the ops that ended at depth
 * d + 1 since the op at depth d began, which end() takes off that op's own time (deeper ops count
 * their whole time). Device clock: profile_dev.c's slots, read a step late into the entries. */
#include "engine/profile.h"

#include <stdlib.h>
#include <string.h>

#include "engine/clock.h"
#include "engine/profile_dev.h"
#include "engine/trace.h"

#define MP_PROFILE_DEPTH 32

static bool dev_on; /* the device clock (profile_dev.h); kept once stopped, for the print */

static struct {
    bool on, warm; /* warm: the first step has ended */
    const mp_ops *ops;
    int n, depth;
    double child[MP_PROFILE_DEPTH + 1];
    mp_prof_entry e[MP_PROFILE_MAX];
    int64_t steps, dropped; /* dropped: device clock steps left out */
    double step_s;
} prof;

static double now_synced(void)
{
    if (prof.ops && prof.ops->sync)
        (void)prof.ops->sync(); /* a failure shows at the op's own next check */
    return mp_now();
}

static mp_prof_entry *entry(const char *name, mp_prof_phase phase);

/* The device clock's sink: an op's own time and a step's. */
static void add_op(const char *kind, mp_prof_phase phase, double ms)
{
    mp_prof_entry *e = entry(kind, phase);
    e->s += 1e-3 * ms;
    e->calls++;
}

static void add_step(double ms)
{
    prof.step_s += 1e-3 * ms;
    prof.steps++;
}

static void add_dropped(void) { prof.dropped++; }

static const mp_prof_dev_sink sink = {add_op, add_step, add_dropped};

void mp_profile_start(const mp_ops *ops, bool device)
{
    mp_prof_dev_stop(NULL); /* an earlier profile never stopped: its marks freed */
    memset(&prof, 0, sizeof prof);
    prof.ops = ops;
    prof.on = true;
    dev_on = device && ops && ops->mark_record && ops->mark_elapsed;
    if (dev_on)
        mp_prof_dev_start(ops);
}

bool mp_profile_device_clock(void) { return dev_on; }

void mp_profile_stop(void)
{
    if (prof.on && dev_on)
        mp_prof_dev_stop(&sink); /* the last step's figures */
    prof.on = false;
}

bool mp_profile_on(void) { return prof.on; }

/* Zeroes the figures, keeping the profile on and warm. */
static void reset_warm(void)
{
    const mp_ops *ops = prof.ops;
    bool on = prof.on;
    memset(&prof, 0, sizeof prof);
    prof.ops = ops;
    prof.on = on;
    prof.warm = true;
}

double mp_profile_now(void)
{
    return prof.on ? now_synced() : mp_now();
}

double mp_profile_begin(const char *kind)
{
    mp_trace_push(kind);
    if (!prof.on)
        return mp_trace_on() ? mp_now() : 0.0;
    if (dev_on)
        return mp_prof_dev_begin();
    double t = now_synced();
    if (++prof.depth <= MP_PROFILE_DEPTH)
        prof.child[prof.depth] = 0.0;
    return t;
}

static mp_prof_entry *entry(const char *name, mp_prof_phase phase)
{
    char kind[sizeof prof.e[0].kind]; /* as stored, so a long name finds its entry */
    snprintf(kind, sizeof kind, "%s", name);
    for (int i = 0; i < prof.n; i++)
        if (prof.e[i].phase == phase && strcmp(prof.e[i].kind, kind) == 0)
            return &prof.e[i];
    if (prof.n == MP_PROFILE_MAX) { /* full: the last entry takes the rest */
        mp_prof_entry *last = &prof.e[MP_PROFILE_MAX - 1];
        snprintf(last->kind, sizeof last->kind, "(other kinds)");
        return last;
    }
    mp_prof_entry *e = &prof.e[prof.n++];
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    e->phase = phase;
    return e;
}

/* The trace's span of an op: named "label (kind)", or kind without a label. */
static void trace_op(const char *kind, const char *label, mp_prof_phase phase, double t0,
                     double t1)
{
    char name[160];
    if (label && label[0])
        snprintf(name, sizeof name, "%s (%s)", label, kind);
    else
        snprintf(name, sizeof name, "%s", kind);
    mp_trace_span(name, mp_prof_phase_name(phase), MP_TRACE_MAIN, t0, t1, -1);
}

void mp_profile_end_as(double mark, const char *kind, mp_prof_phase phase, const char *label)
{
    mp_trace_pop();
    if (prof.on && dev_on) {
        double host0;
        if (mp_prof_dev_end(mark, kind, phase, &host0) && mp_trace_on())
            trace_op(kind, label, phase, host0, mp_now());
        return;
    }
    if (!prof.on || prof.depth == 0) {
        if (mp_trace_on())
            trace_op(kind, label, phase, mark, mp_now());
        return;
    }
    double end = now_synced(), el = end - mark;
    if (mp_trace_on())
        trace_op(kind, label, phase, mark, end);
    double own = prof.depth <= MP_PROFILE_DEPTH ? el - prof.child[prof.depth] : el;
    prof.depth--;
    if (prof.depth <= MP_PROFILE_DEPTH)
        prof.child[prof.depth] += el;
    mp_prof_entry *e = entry(kind, phase);
    e->s += own;
    e->calls++;
}

void mp_profile_end(double mark, const char *kind, mp_prof_phase phase)
{
    mp_profile_end_as(mark, kind, phase, NULL);
}

void mp_profile_step_end(double mark)
{
    mp_trace_pop();
    if (!prof.on)
        return;
    if (dev_on) {
        mp_prof_dev_step_end(mark, prof.warm, &sink);
        prof.warm = true;
        return;
    }
    double el = now_synced() - mark;
    if (!prof.warm) {
        reset_warm();
        return;
    }
    prof.step_s += el;
    prof.steps++;
    prof.depth = 0;
    prof.child[0] = 0.0;
}

const mp_prof_entry *mp_profile_entries(int *n, int64_t *steps, double *step_s)
{
    *n = prof.n;
    *steps = prof.steps;
    *step_s = prof.step_s;
    return prof.e;
}

const char *mp_prof_phase_name(mp_prof_phase p)
{
    return p == MP_PROF_FORWARD ? "forward" : p == MP_PROF_BACKWARD ? "backward" : "step";
}

static int by_time(const void *a, const void *b)
{
    double x = ((const mp_prof_entry *)a)->s, y = ((const mp_prof_entry *)b)->s;
    return x < y ? 1 : x > y ? -1 : 0;
}

void mp_profile_print(FILE *f, const char *who)
{
    if (prof.steps == 0) {
        fprintf(f, "profile (%s): no step after the first to count\n", who);
        return;
    }
    mp_prof_entry e[MP_PROFILE_MAX];
    memcpy(e, prof.e, sizeof e[0] * (size_t)prof.n);
    qsort(e, (size_t)prof.n, sizeof e[0], by_time);
    double per = 1e3 / (double)prof.steps, step_ms = prof.step_s * per, ops_ms = 0.0;
    fprintf(f, "profile (%s, %s clock): %lld steps after the first, %.2f ms a step\n", who,
            dev_on ? "device" : "host", (long long)prof.steps, step_ms);
    if (prof.dropped)
        fprintf(f, "profile: %lld steps left out: a clock mark failed or ops ended out of "
                   "order\n",
                (long long)prof.dropped);
    fprintf(f, "%-24s %-9s %10s %7s %11s\n", "op", "phase", "ms/step", "share", "calls/step");
    for (int i = 0; i < prof.n; i++) {
        double ms = e[i].s * per;
        ops_ms += ms;
        fprintf(f, "%-24s %-9s %10.3f %6.1f%% %11.1f\n", e[i].kind,
                mp_prof_phase_name(e[i].phase), ms, step_ms > 0 ? 100.0 * ms / step_ms : 0.0,
                (double)e[i].calls / (double)prof.steps);
    }
    double rest = step_ms - ops_ms;
    fprintf(f, "%-24s %-9s %10.3f %6.1f%%\n", "(between ops)", "step", rest,
            step_ms > 0 ? 100.0 * rest / step_ms : 0.0);
}
