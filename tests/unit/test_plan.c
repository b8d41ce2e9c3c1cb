/* The memory plan's placement (engine/plan.h) on hand-made lifetimes: tensors live at different
 * times share bytes, tensors live at the same time do not, an in-place pair shares only when
 * nothing reads its input later (at every tick it is named) and their lifetimes meet nowhere
 * else, a tensor never named stays apart, a second write begins a second span, and on random
 * lifetimes no two buffers live at the same op overlap while the arena
 * stays at most the sum of the tensors. */
#include "tests/util/test_util.h"

#include <string.h>

#include "engine/plan.h"
#include "engine/rng.h"

#define MAXT 256

static mp_tensor tensors[MAXT];

/* Tensor i of `bytes` bytes (a multiple of MP_PLAN_ALIGN here), added to p. */
static mp_tensor *tensor(mp_plan *p, int i, int64_t bytes)
{
    int64_t n = bytes / 4;
    tensors[i] = mp_tensor_view(NULL, MP_F32, 1, &n);
    mp_plan_add(p, &tensors[i]);
    return &tensors[i];
}

/* Writes t at `from`, reads it at `to`. */
static void live(mp_plan *p, const mp_tensor *t, int64_t from, int64_t to)
{
    mp_plan_write(p, t, from);
    mp_plan_read(p, t, to);
}

static size_t offset(const mp_plan *p, const mp_tensor *t)
{
    for (int i = 0; i < p->n; i++)
        if (p->buf[i].t == t)
            return p->buf[i].offset;
    fail_msg("tensor not in the plan");
    return 0;
}

static void test_disjoint_lifetimes_share(void **state)
{
    (void)state;
    mp_plan p = {0};
    mp_tensor *a = tensor(&p, 0, 4096), *b = tensor(&p, 1, 4096), *c = tensor(&p, 2, 1024);
    live(&p, a, 1, 3);
    live(&p, b, 4, 6); /* after a: a's bytes */
    live(&p, c, 2, 5); /* beside both */
    mp_plan_place(&p);
    assert_int_equal(offset(&p, a), offset(&p, b));
    assert_true(offset(&p, c) >= 4096);
    assert_int_equal(p.size, 4096 + 1024);
    assert_int_equal(mp_plan_unshared(&p), 4096 * 2 + 1024);
    mp_plan_free(&p);
}

static void test_touching_lifetimes_do_not_share(void **state)
{
    (void)state;
    mp_plan p = {0};
    mp_tensor *a = tensor(&p, 0, 512), *b = tensor(&p, 1, 512);
    live(&p, a, 1, 3);
    live(&p, b, 3, 4); /* written by the op that reads a last: not without in-place */
    mp_plan_place(&p);
    assert_int_not_equal(offset(&p, a), offset(&p, b));
    assert_int_equal(p.size, 1024);
    mp_plan_free(&p);
}

static void test_inplace(void **state)
{
    (void)state;
    for (int later = 0; later < 2; later++) {
        mp_plan p = {0};
        mp_tensor *in = tensor(&p, 0, 2048), *out = tensor(&p, 1, 2048);
        live(&p, in, 1, 2);
        live(&p, out, 2, 5);
        mp_plan_inplace(&p, out, in, 2);
        if (later)
            mp_plan_read(&p, in, 4); /* the input is still read: no sharing */
        mp_plan_place(&p);
        if (later) {
            assert_int_not_equal(offset(&p, in), offset(&p, out));
            assert_int_equal(p.size, 4096);
        } else {
            assert_int_equal(offset(&p, in), offset(&p, out));
            assert_int_equal(p.size, 2048);
        }
        mp_plan_free(&p);
    }
}

/* A pair named at two ticks (a recomputed block) shares only if it qualifies at both; sizes or
 * dtypes that differ never share. */
static void test_inplace_every_tick(void **state)
{
    (void)state;
    mp_plan p = {0};
    mp_tensor *in = tensor(&p, 0, 1024), *out = tensor(&p, 1, 1024);
    live(&p, in, 1, 2);
    live(&p, out, 2, 3);
    mp_plan_inplace(&p, out, in, 2);
    live(&p, in, 10, 11); /* written again: a second span */
    mp_plan_read(&p, in, 13); /* read after the second in-place op */
    live(&p, out, 11, 12);
    mp_plan_inplace(&p, out, in, 11);
    assert_int_equal(p.buf[0].nspan, 2);
    mp_plan_place(&p);
    assert_int_not_equal(offset(&p, in), offset(&p, out));
    mp_plan_free(&p);

    mp_plan q = {0};
    in = tensor(&q, 0, 1024);
    out = tensor(&q, 1, 2048);
    live(&q, in, 1, 2);
    live(&q, out, 2, 3);
    mp_plan_inplace(&q, out, in, 2);
    mp_plan_place(&q);
    assert_int_equal(q.size, 3072);
    mp_plan_free(&q);
}

/* A pair whose lifetimes also meet away from its tick (the input written again while the output
 * still lives) does not share. */
static void test_inplace_meets_elsewhere(void **state)
{
    (void)state;
    mp_plan p = {0};
    mp_tensor *in = tensor(&p, 0, 1024), *out = tensor(&p, 1, 1024);
    live(&p, in, 1, 5);
    live(&p, out, 5, 10);
    live(&p, in, 20, 30);
    live(&p, out, 22, 25);
    mp_plan_inplace(&p, out, in, 5);
    mp_plan_place(&p);
    assert_int_not_equal(offset(&p, in), offset(&p, out));
    mp_plan_free(&p);
}

/* A tensor the walk never names is kept apart from every other. */
static void test_unnamed_kept_apart(void **state)
{
    (void)state;
    mp_plan p = {0};
    mp_tensor *a = tensor(&p, 0, 1024), *b = tensor(&p, 1, 1024);
    live(&p, a, 1, 2);
    (void)b;
    mp_plan_place(&p);
    assert_int_equal(p.size, 2048);
    mp_plan_free(&p);
}

/* A chain of in-place ops (BatchNorm's output under ReLU, a sum under its ReLU) is one buffer,
 * live from the first write to the last read. */
static void test_inplace_chain(void **state)
{
    (void)state;
    mp_plan p = {0};
    mp_tensor *a = tensor(&p, 0, 1024), *b = tensor(&p, 1, 1024), *c = tensor(&p, 2, 1024);
    mp_tensor *d = tensor(&p, 3, 1024);
    live(&p, a, 1, 2);
    live(&p, b, 2, 3);
    live(&p, c, 3, 9);
    mp_plan_inplace(&p, b, a, 2);
    mp_plan_inplace(&p, c, b, 3);
    live(&p, d, 8, 8); /* live with c's end: beside it */
    mp_plan_place(&p);
    assert_int_equal(offset(&p, a), offset(&p, b));
    assert_int_equal(offset(&p, b), offset(&p, c));
    assert_int_not_equal(offset(&p, c), offset(&p, d));
    assert_int_equal(p.size, 2048);
    mp_plan_free(&p);
}

static bool spans_meet(const mp_plan_buf *a, const mp_plan_buf *b)
{
    for (int i = 0; i < a->nspan; i++)
        for (int j = 0; j < b->nspan; j++)
            if (a->from[i] <= b->to[j] && b->from[j] <= a->to[i])
                return true;
    return false;
}

static void test_random_lifetimes(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 11, 12);
    for (int round = 0; round < 40; round++) {
        mp_plan p = {0};
        int n = 20 + (int)(mp_rng_uniform(&r) * 200);
        for (int i = 0; i < n; i++) {
            mp_tensor *t = tensor(&p, i, MP_PLAN_ALIGN * (1 + (int64_t)(mp_rng_uniform(&r) * 64)));
            int spans = 1 + (int)(mp_rng_uniform(&r) * 12); /* past MP_PLAN_SPANS too */
            int64_t at = 1 + (int64_t)(mp_rng_uniform(&r) * 50);
            for (int s = 0; s < spans; s++) {
                int64_t len = (int64_t)(mp_rng_uniform(&r) * 20);
                live(&p, t, at, at + len);
                at += len + 1 + (int64_t)(mp_rng_uniform(&r) * 10);
            }
            if (i > 0 && mp_rng_uniform(&r) < 0.3)
                mp_plan_inplace(&p, t, &tensors[i - 1], p.buf[i].from[0]);
        }
        mp_plan_place(&p);
        assert_true(p.size <= mp_plan_unshared(&p));
        for (int i = 0; i < n; i++) {
            const mp_plan_buf *a = &p.buf[i];
            assert_int_equal(a->offset % MP_PLAN_ALIGN, 0);
            assert_true(a->offset + a->bytes <= p.size);
            for (int j = i + 1; j < n; j++) {
                const mp_plan_buf *b = &p.buf[j];
                bool apart = a->offset + a->bytes <= b->offset || b->offset + b->bytes <= a->offset;
                if (spans_meet(a, b) && !apart && a->offset != b->offset)
                    fail_msg("round %d: buffers %d and %d are live together and overlap", round,
                             i, j);
                if (spans_meet(a, b) && a->offset == b->offset && !apart) {
                    /* only an in-place pair may: the same root */
                    int ra = i, rb = j;
                    while (p.buf[ra].root != ra)
                        ra = p.buf[ra].root;
                    while (p.buf[rb].root != rb)
                        rb = p.buf[rb].root;
                    if (ra != rb)
                        fail_msg("round %d: buffers %d and %d share bytes while live", round, i, j);
                }
            }
        }
        mp_plan_free(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disjoint_lifetimes_share),
        cmocka_unit_test(test_touching_lifetimes_do_not_share),
        cmocka_unit_test(test_inplace),
        cmocka_unit_test(test_inplace_every_tick),
        cmocka_unit_test(test_inplace_chain),
        cmocka_unit_test(test_inplace_meets_elsewhere),
        cmocka_unit_test(test_unnamed_kept_apart),
        cmocka_unit_test(test_random_lifetimes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
