/* Gradient bucket planning (comm/buckets.c) on parameter tables like a model's: every group's
 * buffer is partitioned exactly by its buckets, each bucket holds whole parameters, the first
 * bucket of a group is capped by the small first size and the others close as soon as they reach
 * the bucket size, and the start order is reverse parameter order (backward's). */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <string.h>

#include "comm/buckets.h"

/* A table of n parameters: sizes from `sizes` (cycled), every third one a norm parameter. */
static void make_params(mp_params *p, int n, const int64_t *sizes, int nsizes)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%d", i);
        int64_t shape[1] = {sizes[i % nsizes]};
        assert_true(mp_params_add(p, name, i % 3 == 2 ? MP_GROUP_NORM : MP_GROUP_WEIGHTS, 1,
                                  shape) == i);
    }
}

/* Checks the invariants of a plan and returns the number of buckets. */
static int check_plan(const mp_params *p, const size_t wire[MP_NGROUPS], int64_t cap,
                      int64_t first_cap)
{
    mp_bucket b[MP_MAX_PARAMS + MP_NGROUPS];
    int n = mp_buckets_plan(p, wire, cap, first_cap, b);
    int64_t covered[MP_NGROUPS] = {0, 0};
    int seen[MP_MAX_PARAMS] = {0}, per_group[MP_NGROUPS] = {0, 0};
    for (int i = 0; i < n; i++) {
        if (i > 0)
            assert_true(b[i].first_param < b[i - 1].first_param); /* start order */
        int g = b[i].group;
        assert_true(b[i].lo < b[i].hi);
        covered[g] += b[i].hi - b[i].lo;
        int count = 0;
        for (int k = 0; k < p->count; k++) {
            const mp_param_view *v = &p->views[k];
            bool inside = v->group == g && v->offset >= b[i].lo && v->offset < b[i].hi;
            if (!inside)
                continue;
            assert_true(v->offset + v->numel <= b[i].hi); /* whole parameters only */
            assert_true(k >= b[i].first_param);
            seen[k]++;
            count++;
        }
        assert_int_equal(count, b[i].nparams);
        assert_int_equal(p->views[b[i].first_param].group, g);
        /* Closed because it reached its cap, unless it is the group's last (offset 0) bucket;
         * and without its lowest parameter it would not have reached the cap. */
        int64_t limit = per_group[g]++ ? cap : first_cap;
        int64_t bytes = (b[i].hi - b[i].lo) * (int64_t)wire[g];
        if (b[i].lo > 0)
            assert_true(bytes >= limit);
        if (b[i].lo > 0) { /* without its lowest parameter it was still under the cap */
            int64_t next = b[i].hi;
            for (int k = 0; k < p->count; k++)
                if (p->views[k].group == g && p->views[k].offset > b[i].lo &&
                    p->views[k].offset < next)
                    next = p->views[k].offset;
            assert_true((b[i].hi - next) * (int64_t)wire[g] < limit);
        }
    }
    for (int k = 0; k < p->count; k++)
        assert_int_equal(seen[k], 1);
    for (int g = 0; g < MP_NGROUPS; g++)
        assert_int_equal(covered[g], p->groups[g].total);
    return n;
}

static void test_partition_and_order(void **state)
{
    (void)state;
    const int64_t sizes[] = {16, 100, 3, 64, 1000, 48};
    const size_t wire[2][MP_NGROUPS] = {{4, 4}, {2, 4}};
    const int64_t caps[] = {1, 64, 200, 256, 448, 4000, 1 << 30};
    mp_params p;
    make_params(&p, 40, sizes, 6);
    for (int w = 0; w < 2; w++)
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++)
            for (size_t f = 0; f < sizeof caps / sizeof caps[0]; f++)
                check_plan(&p, wire[w], caps[c], caps[f]);
}

static void test_bucket_counts(void **state)
{
    (void)state;
    /* 12 parameters of 16 FP32 elements (64 bytes), one group: caps that divide the buffer and
     * caps that do not. */
    mp_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        int64_t shape[1] = {16};
        mp_params_add(&p, name, MP_GROUP_WEIGHTS, 1, shape);
    }
    const size_t wire[MP_NGROUPS] = {4, 4};
    assert_int_equal(check_plan(&p, wire, 256, 256), 3);    /* 4 + 4 + 4 */
    assert_int_equal(check_plan(&p, wire, 320, 320), 3);    /* 5 + 5 + 2: does not divide */
    assert_int_equal(check_plan(&p, wire, 256, 64), 4);     /* small first: 1 + 4 + 4 + 3 */
    assert_int_equal(check_plan(&p, wire, 1, 1), 12);       /* one parameter each */
    assert_int_equal(check_plan(&p, wire, 1 << 20, 1 << 20), 1);
    mp_bucket b[MP_MAX_PARAMS];
    mp_buckets_plan(&p, wire, 256, 64, b);
    assert_int_equal(b[0].first_param, 11); /* the last layer's parameter goes first */
    assert_int_equal(b[0].nparams, 1);
    assert_int_equal(b[3].lo, 0);
    assert_int_equal(b[3].nparams, 3);
}

static void test_empty_group(void **state)
{
    (void)state;
    mp_params p;
    memset(&p, 0, sizeof p);
    int64_t shape[1] = {10};
    mp_params_add(&p, "only", MP_GROUP_WEIGHTS, 1, shape);
    const size_t wire[MP_NGROUPS] = {2, 4};
    mp_bucket b[4];
    assert_int_equal(mp_buckets_plan(&p, wire, 100, 100, b), 1);
    assert_int_equal(b[0].group, MP_GROUP_WEIGHTS);
    assert_int_equal(b[0].hi, 16); /* the padding after the parameter belongs to it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_and_order),
        cmocka_unit_test(test_bucket_counts),
        cmocka_unit_test(test_empty_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
