/* Planned activation memory; see plan.h. */
#include "engine/plan.h"

#include <stdlib.h>
#include <string.h>

static void *grow(void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int cap2 = *cap ? 2 * *cap : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(p, (size_t)cap2 * elem);
    if (!q)
        abort(); /* as mp_alloc: out of host memory at model build */
    *cap = cap2;
    return q;
}

void mp_plan_add(mp_plan *p, mp_tensor *t)
{
    p->buf = grow(p->buf, &p->cap, p->n + 1, sizeof *p->buf);
    mp_plan_buf *b = &p->buf[p->n];
    memset(b, 0, sizeof *b);
    b->t = t;
    b->bytes = ((size_t)mp_tensor_bytes(t) + MP_PLAN_ALIGN - 1) / MP_PLAN_ALIGN * MP_PLAN_ALIGN;
    b->root = p->n++;
}

static int find(const mp_plan *p, const mp_tensor *t)
{
    for (int i = 0; t && i < p->n; i++)
        if (p->buf[i].t == t)
            return i;
    return -1;
}

/* Adds span [from, to] to b, joining it with the last span when they touch; with every slot
 * taken the last span grows instead (live longer: a correct plan, only larger). */
static void add_span(mp_plan_buf *b, int64_t from, int64_t to)
{
    if (b->nspan > 0 && (from <= b->to[b->nspan - 1] + 1 || b->nspan == MP_PLAN_SPANS)) {
        if (to > b->to[b->nspan - 1])
            b->to[b->nspan - 1] = to;
        return;
    }
    b->from[b->nspan] = from;
    b->to[b->nspan++] = to;
}

void mp_plan_write(mp_plan *p, const mp_tensor *t, int64_t tick)
{
    int i = find(p, t);
    if (i < 0)
        return;
    mp_plan_buf *b = &p->buf[i];
    if (b->nspan == 0 || tick > b->to[b->nspan - 1])
        add_span(b, tick, tick);
}

void mp_plan_read(mp_plan *p, const mp_tensor *t, int64_t tick)
{
    int i = find(p, t);
    if (i < 0)
        return;
    mp_plan_buf *b = &p->buf[i];
    if (b->nspan == 0) /* read before any write: live from here on (never planned so) */
        add_span(b, tick, tick);
    else if (tick > b->to[b->nspan - 1])
        b->to[b->nspan - 1] = tick;
}

void mp_plan_inplace(mp_plan *p, const mp_tensor *out, const mp_tensor *in, int64_t tick)
{
    int o = find(p, out), i = find(p, in);
    if (o < 0 || i < 0 || o == i)
        return;
    p->pair = grow(p->pair, &p->pair_cap, p->npair + 1, sizeof *p->pair);
    p->pair[p->npair++] = (mp_plan_pair){o, i, tick};
}

static int root(const mp_plan *p, int i)
{
    while (p->buf[i].root != i)
        i = p->buf[i].root;
    return i;
}

/* Whether `out` may join root r (in's): every overlap of their spans is a joint, one of r's
 * spans ending at an op that names the pair (out, in) and one of out's beginning there. So
 * nothing reads `in` after such an op, at every tick the pair is named, and the two are live
 * together nowhere else. */
static bool joins_clean(const mp_plan *p, const mp_plan_buf *r, int out, int in)
{
    const mp_plan_buf *o = &p->buf[out];
    for (int i = 0; i < r->nspan; i++)
        for (int j = 0; j < o->nspan; j++) {
            if (r->from[i] > o->to[j] || o->from[j] > r->to[i])
                continue;
            bool named = false;
            for (int k = 0; k < p->npair && !named; k++)
                named = p->pair[k].out == out && p->pair[k].in == in &&
                        p->pair[k].at == o->from[j];
            if (r->to[i] != o->from[j] || !named)
                return false;
        }
    return true;
}

/* Merges b's spans into r's, in order. */
static void join_spans(mp_plan_buf *r, const mp_plan_buf *b)
{
    int64_t from[2 * MP_PLAN_SPANS], to[2 * MP_PLAN_SPANS];
    int n = 0, i = 0, j = 0;
    while (i < r->nspan || j < b->nspan) {
        bool take_r = j >= b->nspan || (i < r->nspan && r->from[i] <= b->from[j]);
        from[n] = take_r ? r->from[i] : b->from[j];
        to[n++] = take_r ? r->to[i++] : b->to[j++];
    }
    r->nspan = 0;
    for (int k = 0; k < n; k++)
        add_span(r, from[k], to[k]); /* joins touching spans */
}

/* Joins every in-place pair of the same bytes and dtype whose lifetimes meet only at it. */
static void join_pairs(mp_plan *p)
{
    for (int k = 0; k < p->npair; k++) {
        const mp_plan_pair *q = &p->pair[k];
        const mp_plan_buf *in = &p->buf[q->in], *out = &p->buf[q->out];
        int ro = root(p, q->out), ri = root(p, q->in);
        if (in->bytes != out->bytes || in->t->dtype != out->t->dtype || ro == ri ||
            ro != q->out || !joins_clean(p, &p->buf[ri], q->out, q->in))
            continue;
        join_spans(&p->buf[ri], &p->buf[ro]);
        p->buf[ro].root = ri;
    }
}

static bool overlap(const mp_plan_buf *a, const mp_plan_buf *b)
{
    if (a->nspan == 0 || b->nspan == 0) /* never written or read by the walk: kept apart */
        return true;
    for (int i = 0; i < a->nspan; i++)
        for (int j = 0; j < b->nspan; j++)
            if (a->from[i] <= b->to[j] && b->from[j] <= a->to[i])
                return true;
    return false;
}

static _Thread_local const mp_plan *sorting; /* qsort's comparators read the plan */

static int by_size(const void *x, const void *y)
{
    const mp_plan_buf *a = &sorting->buf[*(const int *)x], *b = &sorting->buf[*(const int *)y];
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    int64_t fa = a->nspan ? a->from[0] : 0, fb = b->nspan ? b->from[0] : 0;
    if (fa != fb)
        return fa < fb ? -1 : 1;
    return *(const int *)x - *(const int *)y;
}

static int by_offset(const void *x, const void *y)
{
    const mp_plan_buf *a = &sorting->buf[*(const int *)x], *b = &sorting->buf[*(const int *)y];
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* Whether buffer b gets no storage: drop_unwalked, and the walk never reached it. */
static bool dropped(const mp_plan *p, const mp_plan_buf *b)
{
    return p->drop_unwalked && b->nspan == 0;
}

void mp_plan_place(mp_plan *p)
{
    for (int i = 0; i < p->n; i++)
        if (dropped(p, &p->buf[i]))
            p->buf[i].bytes = 0;
    if (p->apart) {
        p->size = 0;
        for (int i = 0; i < p->n; i++) {
            p->buf[i].offset = p->size;
            p->size += p->buf[i].bytes;
        }
        return;
    }
    join_pairs(p);
    int *order = calloc((size_t)p->n + 1, sizeof *order);
    int *busy = calloc((size_t)p->n + 1, sizeof *busy);
    if (!order || !busy)
        abort();
    int n = 0;
    for (int i = 0; i < p->n; i++)
        if (root(p, i) == i)
            order[n++] = i;
    sorting = p;
    qsort(order, (size_t)n, sizeof *order, by_size);
    p->size = 0;
    for (int k = 0; k < n; k++) {
        mp_plan_buf *b = &p->buf[order[k]];
        int nb = 0;
        for (int j = 0; j < k; j++) /* placed already and live at the same time */
            if (overlap(b, &p->buf[order[j]]))
                busy[nb++] = order[j];
        qsort(busy, (size_t)nb, sizeof *busy, by_offset);
        size_t at = 0;
        for (int j = 0; j < nb; j++) {
            const mp_plan_buf *o = &p->buf[busy[j]];
            if (o->offset >= at + b->bytes)
                break; /* the gap before o fits */
            if (o->offset + o->bytes > at)
                at = o->offset + o->bytes;
        }
        b->offset = at;
        if (at + b->bytes > p->size)
            p->size = at + b->bytes;
    }
    for (int i = 0; i < p->n; i++)
        p->buf[i].offset = p->buf[root(p, i)].offset;
    free(order);
    free(busy);
}

void mp_plan_bind(const mp_plan *p, char *base)
{
    for (int i = 0; i < p->n; i++)
        p->buf[i].t->data = base && !dropped(p, &p->buf[i]) ? base + p->buf[i].offset : NULL;
}

bool mp_plan_live(const mp_plan *p, int i, int64_t tick)
{
    const mp_plan_buf *b = &p->buf[i];
    for (int s = 0; s < b->nspan; s++)
        if (b->from[s] <= tick && tick < b->to[s])
            return true;
    return false;
}

size_t mp_plan_unshared(const mp_plan *p)
{
    size_t s = 0;
    for (int i = 0; i < p->n; i++)
        s += p->buf[i].bytes;
    return s;
}

void mp_plan_free(mp_plan *p)
{
    free(p->buf);
    free(p->pair);
    memset(p, 0, sizeof *p);
}
