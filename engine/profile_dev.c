/* The profile's device clock (see profile_dev.h). Invariants: set[cur] holds the slots begun
 * since the last step's end, set[1 - cur] the step ended before (step >= 0 while it waits to be
 * read); a slot's begin and end marks are its set's mark[2 slot] and mark[2 slot + 1], kept and
 * re-recorded from step to step; a slot's parent was open when it began, so it comes before it. */
#include "engine/profile_dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/clock.h"

#define MP_PROF_DEV_MAX_SLOTS (1 << 20) /* ops a step (more: that step is dropped) */

/* One op (or step) timed. */
typedef struct dev_span {
    char kind[sizeof(((mp_prof_entry *)0)->kind)];
    mp_prof_phase phase;
    int parent;   /* the slot open when it began; -1: none */
    bool ended;   /* its end mark recorded */
    double host0; /* the host clock at its begin (the trace's) */
    double ms;    /* its time, once read */
} dev_span;

/* The slots of one step. */
typedef struct dev_set {
    int n, cap;     /* slots used and allocated */
    dev_span *span; /* cap slots */
    void **mark;    /* 2 cap marks, NULL until first recorded */
    int step;       /* the ended step's slot while it waits to be read; -1: none */
    bool broken;    /* a mark failed or a slot was ended wrongly: its figures are dropped */
    bool counted;   /* its step's figures go to the sink */
} dev_set;

static struct {
    const mp_ops *ops;
    int cur, open; /* the set being filled; its innermost open slot (-1: none) */
    dev_set set[2];
} dev;

/* Empties set s for the next step (its marks kept). */
static void set_clear(dev_set *s)
{
    s->n = 0;
    s->step = -1;
    s->broken = s->counted = false;
}

void mp_prof_dev_start(const mp_ops *ops)
{
    memset(&dev, 0, sizeof dev);
    dev.ops = ops;
    dev.open = -1;
    set_clear(&dev.set[0]);
    set_clear(&dev.set[1]);
}

/* Grows set s by doubling; false when it cannot. */
static bool set_grow(dev_set *s)
{
    int cap = s->cap ? 2 * s->cap : 256;
    if (cap > MP_PROF_DEV_MAX_SLOTS)
        return false;
    dev_span *sp = realloc(s->span, sizeof *sp * (size_t)cap);
    if (!sp)
        return false;
    s->span = sp;
    void **mk = realloc(s->mark, sizeof *mk * 2 * (size_t)cap);
    if (!mk)
        return false;
    memset(mk + 2 * s->cap, 0, sizeof *mk * 2 * (size_t)(cap - s->cap));
    s->mark = mk;
    s->cap = cap;
    return true;
}

double mp_prof_dev_begin(void)
{
    dev_set *s = &dev.set[dev.cur];
    if (s->n == s->cap && !set_grow(s)) {
        s->broken = true;
        return -1.0;
    }
    int k = s->n++;
    s->span[k] = (dev_span){.parent = dev.open, .host0 = mp_now()};
    if (dev.ops->mark_record(&s->mark[2 * k]) != MP_OK)
        s->broken = true;
    dev.open = k;
    return (double)k;
}

bool mp_prof_dev_end(double mark, const char *kind, mp_prof_phase phase, double *host0)
{
    dev_set *s = &dev.set[dev.cur];
    int k = mark >= 0 && mark < s->n ? (int)mark : -1;
    if (k < 0 || k != dev.open) { /* not the innermost open op: mis-nested or stray */
        s->broken = true;
        return false;
    }
    dev_span *sp = &s->span[k];
    if (dev.ops->mark_record(&s->mark[2 * k + 1]) != MP_OK)
        s->broken = true;
    snprintf(sp->kind, sizeof sp->kind, "%s", kind);
    sp->phase = phase;
    sp->ended = true;
    dev.open = sp->parent;
    *host0 = sp->host0;
    return true;
}

/* Reads set s's marks (waiting for them) and gives its ops' own times and its step's time to
 * sink; when a mark cannot be read, only sink->dropped. */
static void set_read(dev_set *s, const mp_prof_dev_sink *sink)
{
    for (int i = 0; i < s->n; i++) {
        dev_span *sp = &s->span[i];
        sp->ms = 0.0;
        if (sp->ended &&
            dev.ops->mark_elapsed(s->mark[2 * i], s->mark[2 * i + 1], &sp->ms) != MP_OK) {
            sink->dropped(); /* the op's own next check shows the error */
            return;
        }
    }
    const double step_ms = s->span[s->step].ms;
    /* a slot comes after its parent and before its children: its whole time leaves its parent's
       before its children's leave its own */
    for (int i = 0; i < s->n; i++)
        if (s->span[i].ended && s->span[i].parent >= 0)
            s->span[s->span[i].parent].ms -= s->span[i].ms;
    for (int i = 0; i < s->n; i++)
        if (i != s->step && s->span[i].ended)
            sink->op(s->span[i].kind, s->span[i].phase, s->span[i].ms);
    sink->step(step_ms);
}

/* Gives set t at least n slots with their marks made (recorded once now, to be recorded again
 * when used), so that a counted step does not pay for making them; as far as it can. */
static void set_reserve(dev_set *t, int n)
{
    while (t->cap < n && set_grow(t)) {
    }
    for (int i = 0; i < 2 * t->cap && i < 2 * n; i++)
        if (!t->mark[i] && dev.ops->mark_record(&t->mark[i]) != MP_OK)
            return;
}

void mp_prof_dev_step_end(double mark, bool counted, const mp_prof_dev_sink *sink)
{
    dev_set *s = &dev.set[dev.cur], *prev = &dev.set[1 - dev.cur];
    double host0;
    bool ended = mp_prof_dev_end(mark, "step", MP_PROF_STEP, &host0);
    s->step = ended && !s->broken ? (int)mark : -1;
    s->counted = counted;
    if (counted && s->step < 0)
        sink->dropped();
    if (prev->step >= 0 && prev->counted)
        set_read(prev, sink);
    set_clear(prev);
    if (!counted) /* warm-up: the next step's set gets this one's size and marks now */
        set_reserve(prev, s->n);
    dev.cur = 1 - dev.cur;
    dev.open = -1;
}

void mp_prof_dev_stop(const mp_prof_dev_sink *sink)
{
    if (!dev.ops)
        return;
    dev_set *last = &dev.set[1 - dev.cur]; /* the step ended last */
    if (sink && last->step >= 0 && last->counted)
        set_read(last, sink);
    for (int k = 0; k < 2; k++) {
        dev_set *s = &dev.set[k];
        for (int i = 0; i < 2 * s->cap; i++)
            if (s->mark[i] && dev.ops->mark_free)
                dev.ops->mark_free(s->mark[i]);
        free(s->mark);
        free(s->span);
    }
    memset(&dev, 0, sizeof dev);
}
