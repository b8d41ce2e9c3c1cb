/* DistributedSampler semantics, with world = 1..5 ranks simulated in one process: identical
 * permutations across ranks, exact coverage, wrap-around padding, drop_last, per-epoch
 * reshuffling, reproducibility, the unshuffled order and argument checks. */
#include "tests/util/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/rng.h"
#include "io/sampler.h"

#define MAXW 5

/* Builds samplers for every rank of `world`, all set to `epoch`. */
static void make_all(mp_sampler *s, int64_t n, int world, uint64_t seed, bool shuffle,
                     bool drop_last, int64_t epoch)
{
    for (int r = 0; r < world; r++) {
        assert_int_equal(mp_sampler_init(&s[r], n, world, r, seed, shuffle, drop_last), 0);
        mp_sampler_set_epoch(&s[r], epoch);
    }
}

static void free_all(mp_sampler *s, int world)
{
    for (int r = 0; r < world; r++)
        mp_sampler_free(&s[r]);
}

/* Checks that perm is a permutation of [0, n). */
static void check_permutation(const int64_t *perm, int64_t n)
{
    char *seen = calloc((size_t)n + 1, 1);
    assert_non_null(seen);
    for (int64_t i = 0; i < n; i++) {
        assert_in_range(perm[i], 0, n - 1);
        assert_int_equal(seen[perm[i]], 0);
        seen[perm[i]] = 1;
    }
    free(seen);
}

static void test_same_perm_and_exact_cover(void **state)
{
    (void)state;
    const int64_t n = 60; /* divisible by 1..5 */
    for (int world = 1; world <= MAXW; world++) {
        mp_sampler s[MAXW];
        make_all(s, n, world, 1234, true, false, 3);
        check_permutation(s[0].perm, n);
        int count[60] = {0};
        for (int r = 0; r < world; r++) {
            assert_memory_equal(s[r].perm, s[0].perm, (size_t)n * sizeof(int64_t));
            assert_int_equal(s[r].num_local, n / world);
            for (int64_t k = 0; k < s[r].num_local; k++) {
                assert_int_equal(s[r].local[k], s[0].perm[r + k * world]);
                count[s[r].local[k]]++;
            }
        }
        for (int i = 0; i < n; i++)
            assert_int_equal(count[i], 1);
        free_all(s, world);
    }
    assert_int_equal(mp_mem_current(MP_MEM_DATA), 0);
}

static void test_padding(void **state)
{
    (void)state;
    const int64_t sizes[] = {7, 11, 13, 3, 2, 1};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int64_t n = sizes[t];
        for (int world = 1; world <= MAXW; world++) {
            mp_sampler s[MAXW];
            make_all(s, n, world, 99, true, false, 0);
            int64_t per = (n + world - 1) / world;
            int count[16] = {0};
            for (int r = 0; r < world; r++) {
                assert_int_equal(s[r].num_local, per);
                for (int64_t k = 0; k < per; k++) {
                    int64_t pos = r + k * world;
                    /* Position p of the padded order is perm[p % n]: padding repeats the
                     * permutation's first indices, wrapping again when n < world. */
                    assert_int_equal(s[r].local[k], s[r].perm[pos % n]);
                    count[s[r].local[k]]++;
                }
            }
            /* Every index at least once; the first (per * world - n) of the permutation get
             * the extra copies (more than one when n < world). */
            int64_t total = per * world;
            for (int64_t p = 0; p < n; p++) {
                int64_t want = total / n + (p < total % n ? 1 : 0);
                assert_int_equal(count[s[0].perm[p]], want);
            }
            free_all(s, world);
        }
    }
    /* A concrete case: n = 2, world = 5 unshuffled gives 0 1 0 1 0. */
    mp_sampler s[MAXW];
    make_all(s, 2, 5, 0, false, false, 0);
    const int64_t want[5] = {0, 1, 0, 1, 0};
    for (int r = 0; r < 5; r++) {
        assert_int_equal(s[r].num_local, 1);
        assert_int_equal(s[r].local[0], want[r]);
    }
    free_all(s, 5);
}

static void test_drop_last(void **state)
{
    (void)state;
    const int64_t n = 23;
    for (int world = 1; world <= MAXW; world++) {
        mp_sampler s[MAXW];
        make_all(s, n, world, 7, true, true, 2);
        int64_t per = n / world;
        int count[23] = {0};
        for (int r = 0; r < world; r++) {
            assert_int_equal(s[r].num_local, per);
            for (int64_t k = 0; k < per; k++) {
                assert_int_equal(s[r].local[k], s[r].perm[r + k * world]);
                count[s[r].local[k]]++;
            }
        }
        /* Exactly the first per * world entries of the permutation, once each. */
        for (int64_t p = 0; p < n; p++)
            assert_int_equal(count[s[0].perm[p]], p < per * world ? 1 : 0);
        free_all(s, world);
    }
}

static void test_epochs_and_reproducibility(void **state)
{
    (void)state;
    const int64_t n = 1000;
    mp_sampler a, b;
    assert_int_equal(mp_sampler_init(&a, n, 3, 1, 42, true, false), 0);
    assert_int_equal(mp_sampler_init(&b, n, 3, 1, 42, true, false), 0);
    int64_t *e0 = malloc((size_t)n * sizeof(int64_t));
    assert_non_null(e0);
    mp_sampler_set_epoch(&a, 0);
    memcpy(e0, a.perm, (size_t)n * sizeof(int64_t));
    mp_sampler_set_epoch(&a, 1);
    check_permutation(a.perm, n);
    assert_memory_not_equal(a.perm, e0, (size_t)n * sizeof(int64_t));
    /* The same (seed, epoch) again, on another sampler and after other epochs. */
    mp_sampler_set_epoch(&b, 1);
    assert_memory_equal(a.perm, b.perm, (size_t)n * sizeof(int64_t));
    assert_memory_equal(a.local, b.local, (size_t)a.num_local * sizeof(int64_t));
    mp_sampler_set_epoch(&b, 0);
    assert_memory_equal(b.perm, e0, (size_t)n * sizeof(int64_t));
    /* The order is Fisher-Yates from the last position down, drawing from mp_rng seeded with
     * (seed, epoch): a resumed run must see exactly this sequence. */
    mp_rng r;
    mp_rng_seed(&r, 42, 0);
    int64_t *ref = malloc((size_t)n * sizeof(int64_t));
    assert_non_null(ref);
    for (int64_t i = 0; i < n; i++)
        ref[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)mp_rng_below(&r, (uint64_t)i + 1), t = ref[i];
        ref[i] = ref[j];
        ref[j] = t;
    }
    assert_memory_equal(e0, ref, (size_t)n * sizeof(int64_t));
    for (int64_t k = 0; k < b.num_local; k++)
        assert_int_equal(b.local[k], ref[(1 + 3 * k) % n]);
    free(ref);
    /* Shuffled means not the identity, and another seed gives another order. */
    int moved = 0;
    for (int64_t i = 0; i < n; i++)
        moved += e0[i] != i;
    assert_true(moved > n / 2);
    mp_sampler c;
    assert_int_equal(mp_sampler_init(&c, n, 3, 1, 43, true, false), 0);
    mp_sampler_set_epoch(&c, 0);
    assert_memory_not_equal(c.perm, e0, (size_t)n * sizeof(int64_t));
    mp_sampler_free(&c);
    free(e0);
    mp_sampler_free(&a);
    mp_sampler_free(&b);
    assert_null(a.perm);
    assert_null(a.local);
}

static void test_no_shuffle(void **state)
{
    (void)state;
    for (int world = 1; world <= MAXW; world++) {
        mp_sampler s[MAXW];
        make_all(s, 20, world, 5, false, false, 7);
        for (int r = 0; r < world; r++)
            for (int64_t k = 0; k < s[r].num_local; k++)
                assert_int_equal(s[r].local[k], (r + k * world) % 20);
        free_all(s, world);
    }
}

static void test_invalid(void **state)
{
    (void)state;
    mp_sampler s;
    memset(&s, 0x5a, sizeof s);
    assert_int_equal(mp_sampler_init(&s, 10, 0, 0, 1, true, false), -1);
    assert_null(s.local);
    assert_null(s.perm);
    assert_int_equal(mp_sampler_init(&s, 10, 2, 2, 1, true, false), -1);
    assert_int_equal(mp_sampler_init(&s, 10, 2, -1, 1, true, false), -1);
    assert_int_equal(mp_sampler_init(&s, -1, 2, 0, 1, true, false), -1);
    assert_int_equal(mp_sampler_init(&s, 3, 4, 0, 1, true, true), -1);
    assert_int_equal(mp_sampler_init(NULL, 10, 1, 0, 1, true, false), -1);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), 0);
    /* n < world is allowed without drop_last, and n == world with it. */
    assert_int_equal(mp_sampler_init(&s, 3, 4, 3, 1, true, false), 0);
    mp_sampler_free(&s);
    assert_int_equal(mp_sampler_init(&s, 4, 4, 3, 1, true, true), 0);
    mp_sampler_set_epoch(&s, 0);
    assert_int_equal(s.num_local, 1);
    mp_sampler_free(&s);
}

/* A resumed epoch: with the same world size each rank continues its own list exactly where it
 * stopped; with another world size the ranks share exactly the positions not yet consumed. */
static void test_resume_position(void **state)
{
    (void)state;
    const int64_t n = 103;
    for (int drop = 0; drop <= 1; drop++) {
        mp_sampler a, b;
        for (int r = 0; r < 4; r++) { /* same world: a suffix of the whole-epoch list */
            assert_int_equal(mp_sampler_init(&a, n, 4, r, 9, true, drop), 0);
            assert_int_equal(mp_sampler_init(&b, n, 4, r, 9, true, drop), 0);
            mp_sampler_set_epoch(&a, 3);
            assert_int_equal(a.count, a.num_local);
            int64_t start = 3 * 4 * 5; /* 3 batches of 5 on 4 ranks */
            mp_sampler_set_epoch_at(&b, 3, start);
            assert_int_equal(b.count, a.num_local - 15);
            assert_memory_equal(b.local, a.local + 15, (size_t)b.count * sizeof(int64_t));
            mp_sampler_free(&a);
            mp_sampler_free(&b);
        }
        int seen[103] = {0};
        int64_t start = 40, total = 0; /* n - start divisible by 3: no padding, nothing cut */
        assert_int_equal(mp_sampler_init(&a, n, 1, 0, 9, true, false), 0);
        mp_sampler_set_epoch(&a, 3); /* the epoch's permutation, in order */
        for (int r = 0; r < 3; r++) { /* 2 ranks consumed 40, 3 take the rest */
            assert_int_equal(mp_sampler_init(&b, n, 3, r, 9, true, drop), 0);
            mp_sampler_set_epoch_at(&b, 3, start);
            assert_int_equal(b.count, drop ? (n - start) / 3 : (n - start + 2) / 3);
            for (int64_t k = 0; k < b.count; k++)
                seen[b.local[k]]++;
            total += b.count;
            mp_sampler_free(&b);
        }
        for (int64_t p = 0; p < n; p++) {
            int64_t idx = a.local[p];
            assert_int_equal(seen[idx], p < start ? 0 : 1); /* 63 left: 3 ranks x 21 */
        }
        assert_int_equal(total, n - start);
        mp_sampler_free(&a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_perm_and_exact_cover),
        cmocka_unit_test(test_padding),
        cmocka_unit_test(test_drop_last),
        cmocka_unit_test(test_epochs_and_reproducibility),
        cmocka_unit_test(test_no_shuffle),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_resume_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
