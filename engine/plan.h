/* Planned activation memory (docs/ARCHITECTURE.md §4): every activation and scratch tensor of a
 * step gets a lifetime over the step's op sequence, and all of them are placed in one arena so
 * that tensors whose lifetimes do not overlap share bytes, as the static memory planners of XLA
 * and TVM place buffers. The model's walk over its layers (engine/seq_plan.c) numbers the ops
 * (ticks) of forward, the loss, backward and recomputation, and tells the plan which tensor each
 * op writes and reads; an op that may write its output over its input (ReLU, a residual sum)
 * names the pair, and the two share one buffer when nothing reads the input after that op.
 * Independent of the backend: both run the same plan, so the CPU's counters show it. */
#ifndef MP_PLAN_H
#define MP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tensor.h"

#define MP_PLAN_ALIGN 256 /* every buffer's offset and size: a multiple of this */
#define MP_PLAN_SPANS 8   /* live spans a buffer keeps (more are joined, which only costs
                             bytes) */

/* One tensor of the plan: its bytes, when it is live and where it lies. A span is live from the
 * op that writes it to the last op that reads what that op wrote; a tensor written again later
 * (a recomputed block's) has a span per write. */
typedef struct mp_plan_buf {
    mp_tensor *t;          /* where the tensor's view lives; bound by mp_plan_bind */
    size_t bytes;          /* rounded up to MP_PLAN_ALIGN */
    int nspan;
    int64_t from[MP_PLAN_SPANS], to[MP_PLAN_SPANS];
    int root;              /* the buffer whose bytes it shares (itself, or the input it
                              overwrites in place) */
    size_t offset;         /* from the arena's start (its root's) */
} mp_plan_buf;

typedef struct mp_plan_pair {
    int out, in;
    int64_t at;
} mp_plan_pair;

typedef struct mp_plan {
    mp_plan_buf *buf;
    int n, cap;
    mp_plan_pair *pair; /* the in-place candidates */
    int npair, pair_cap;
    int64_t tick;       /* the last op numbered (the walk's counter) */
    size_t size;        /* the arena's bytes, once placed */
    bool apart;         /* place every buffer in bytes of its own (a reference for tests) */
    bool drop_unwalked; /* a tensor the walk never wrote or read gets no bytes and no storage
                           (data NULL): a forward-only plan's backward scratch */
} mp_plan;

/* Adds the tensor *t (shape and dtype set, no storage yet) to the plan, which later points its
 * data into the arena; t must stay where it is until mp_plan_bind. */
void mp_plan_add(mp_plan *p, mp_tensor *t);

/* Op `tick` (ticks increase along the step) writes t, or reads it. A tensor the plan does not
 * hold (the batch, a parameter) is ignored. A write after the last read begins a new span. */
void mp_plan_write(mp_plan *p, const mp_tensor *t, int64_t tick);
void mp_plan_read(mp_plan *p, const mp_tensor *t, int64_t tick);

/* Op `tick` may write `out` over `in` element for element: they share a buffer when they have
 * the same bytes and dtype, no op after `tick` reads what `in` held (at every tick the pair is
 * named), and their lifetimes meet nowhere else than at those ticks. */
void mp_plan_inplace(mp_plan *p, const mp_tensor *out, const mp_tensor *in, int64_t tick);

/* Joins the in-place pairs that qualify and places every buffer at the lowest offset where it
 * overlaps no buffer live at the same time (largest first, as TVM's greedy planner); sets size.
 * A tensor the walk never wrote or read is kept apart from every other, or with
 * p->drop_unwalked gets no bytes. With p->apart, one after the other instead, nothing shared. */
void mp_plan_place(mp_plan *p);

/* Points every planned tensor's data into the arena at base (mp_plan_place's size bytes); a
 * dropped one's (drop_unwalked) at NULL. */
void mp_plan_bind(const mp_plan *p, char *base);

/* Whether buffer i (a root) is live after op `tick` has run and before op tick + 1: a span
 * written at or before tick is read after it. */
bool mp_plan_live(const mp_plan *p, int i, int64_t tick);

/* Sum of the planned tensors' bytes (what they took each with its own storage). */
size_t mp_plan_unshared(const mp_plan *p);

/* Frees the plan's lists (not the arena, which the caller owns). */
void mp_plan_free(mp_plan *p);

#endif
