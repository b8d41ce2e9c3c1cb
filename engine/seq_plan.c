/* The lifetimes of a sequence's tensors over a training step (see seq.h, mp_seq_plan_forward):
 * one tick per op, in the order mp_seq_forward, mp_seq_backward and the block classes
 * (engine/layer_residual.c, engine/layer_transformer.c) run them. Inside a block's backward
 * every read is placed at the block's last tick: nothing is written there but the block's
 * scratch, live over all of it, so the children's own order does not matter. A block's children
 * are plain layers (the residual and transformer classes build them so); the walk follows each
 * class's forward through mid_tmp and sum_over_main (engine/layer.h), which a change to those
 * classes must keep true. */
#include "engine/seq.h"

static void write_at(mp_plan *p, const mp_tensor *t, int64_t tick)
{
    if (t->ndim > 0)
        mp_plan_write(p, t, tick);
}

static void read_at(mp_plan *p, const mp_tensor *t, int64_t tick)
{
    if (t && t->ndim > 0)
        mp_plan_read(p, t, tick);
}

/* The input layer i of s reads: its cast copy, or the previous output, or the sequence's. */
static const mp_tensor *input_of(const mp_seq *s, int i, const mp_tensor *x)
{
    if (s->xcast[i].ndim > 0)
        return &s->xcast[i];
    return i == 0 ? x : &s->acts[i - 1];
}

/* A block's forward, its output written to y: the children from x (child 1 from out_tmp with
 * mid_tmp), then the sum. */
static void forward_block(mp_layer *l, const mp_tensor *x, const mp_tensor *y, mp_plan *p)
{
    mp_block *b = l->block;
    const mp_tensor *out[MP_BLOCK_CHILDREN] = {x, x};
    for (int c = 0; c < b->nchild; c++) {
        mp_seq child = mp_block_child(b, c);
        const mp_tensor *in = c == 1 && b->mid_tmp ? &b->out_tmp : x;
        out[c] = child.n > 0 ? mp_seq_plan_forward(&child, in, p) : in;
        if (c == 0 && b->mid_tmp) { /* h = x + child 0's output */
            int64_t t = ++p->tick;
            read_at(p, x, t);
            read_at(p, out[0], t);
            write_at(p, &b->out_tmp, t);
        }
    }
    int64_t t = ++p->tick;
    read_at(p, x, t);
    read_at(p, b->mid_tmp ? &b->out_tmp : NULL, t);
    for (int c = 0; c < b->nchild; c++)
        read_at(p, out[c], t);
    write_at(p, y, t);
    if (b->sum_over_main && b->n[0] > 0)
        mp_plan_inplace(p, y, out[0], t);
}

const mp_tensor *mp_seq_plan_forward(const mp_seq *s, const mp_tensor *x, mp_plan *p)
{
    for (int i = 0; i < s->n; i++) {
        mp_layer *l = &s->layers[i];
        const mp_tensor *in = input_of(s, i, x);
        if (s->xcast[i].ndim > 0) {
            int64_t t = ++p->tick;
            read_at(p, i == 0 ? x : &s->acts[i - 1], t);
            write_at(p, &s->xcast[i], t);
        }
        if (l->block) {
            forward_block(l, in, &s->acts[i], p);
        } else {
            int64_t t = ++p->tick;
            read_at(p, in, t);
            write_at(p, &s->acts[i], t);
            write_at(p, &l->save, t);
            if (l->cls->inplace_forward)
                mp_plan_inplace(p, &s->acts[i], in, t);
        }
    }
    return s->n > 0 ? &s->acts[s->n - 1] : x;
}

static void backward_seq(const mp_seq *s, const mp_tensor *x, mp_plan *p, int64_t at,
                         int64_t *end);

/* A block's backward window: the forward again when recomputing, then its scratch and every
 * read of its children at the window's last tick, which it returns. */
static int64_t backward_block(mp_layer *l, const mp_tensor *x, const mp_tensor *y, bool recompute,
                              mp_plan *p)
{
    mp_block *b = l->block;
    int64_t from = p->tick + 1;
    if (recompute)
        forward_block(l, x, y, p);
    int64_t last = ++p->tick;
    mp_tensor *scratch[4] = {&b->gbuf[0], &b->gbuf[1], &b->in_tmp, b->mid_tmp ? NULL : &b->out_tmp};
    for (int k = 0; k < 4; k++) {
        if (scratch[k]) {
            write_at(p, scratch[k], from);
            read_at(p, scratch[k], last);
        }
    }
    read_at(p, b->mid_tmp ? &b->out_tmp : NULL, last);
    for (int c = 0; c < b->nchild; c++) {
        mp_seq child = mp_block_child(b, c);
        backward_seq(&child, c == 1 && b->mid_tmp ? &b->out_tmp : x, p, last, NULL);
    }
    return last;
}

/* Backward over s from its last layer; `at` > 0 places every read there (inside a block). */
static void backward_seq(const mp_seq *s, const mp_tensor *x, mp_plan *p, int64_t at,
                         int64_t *end)
{
    for (int i = s->n - 1; i >= 0; i--) {
        mp_layer *l = &s->layers[i];
        const mp_tensor *in = input_of(s, i, x);
        int64_t t = l->block ? backward_block(l, in, &s->acts[i], s->recompute, p)
                    : at > 0   ? at
                               : ++p->tick;
        if (!l->cls->skips_x)
            read_at(p, in, t);
        if (!l->cls->skips_y)
            read_at(p, &s->acts[i], t);
        read_at(p, &l->save, t);
        if (end)
            end[i] = t;
    }
}

void mp_seq_plan_backward(const mp_seq *s, const mp_tensor *x, mp_plan *plan, int64_t *end)
{
    backward_seq(s, x, plan, 0, end);
}
