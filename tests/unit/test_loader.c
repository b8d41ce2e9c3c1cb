/* The prefetching loader: every batch (x bytes, y, n) of two augmented epochs matches
 * mp_dataset_batch_augmented bitwise for threads 0, 1, 3 and depth 1, 2, 4, including the
 * partial last batch, and a batch the consumer holds stays intact while workers run ahead; next
 * past the end fails; a new epoch started after two batches discards the prefetched ones;
 * closing mid-epoch with blocked workers, or before any epoch, returns and frees everything;
 * invalid configurations are refused; batch buffers larger than memory, or whose size
 * overflows, are refused with MP_EDATA and the numbers before anything is allocated (they used
 * to abort in mp_alloc); the worker runs `nice` above the consumer, the consumer stays where it
 * was; 200 tiny epochs with 3 threads and depth 1 shake out races. A watchdog alarm turns any
 * hang into a failure. */
#include "tests/util/test_util.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "engine/rng.h"
#include "engine/status.h"
#include "io/augment.h"
#include "io/dataset.h"
#include "io/loader.h"

#define COUNT 103
#define H 6
#define W 5
#define C 3
#define PER (H * W * C)
#define BATCH 8

static const double mean[C] = {0.4914, 0.4822, 0.4465};
static const double stdv[C] = {0.2470, 0.2435, 0.2616};

/* A dataset whose pixels are nonzero and distinct within each sample and differ between
 * samples, so any misplaced sample or pixel shows. Images and labels are counted MP_MEM_DATA. */
static mp_dataset make_dataset(int64_t count, int h, int w, int c)
{
    mp_dataset d = {.count = count, .h = h, .w = w, .c = c, .num_classes = 10};
    int per = h * w * c;
    d.images = mp_alloc((size_t)count * (size_t)per, MP_MEM_DATA);
    d.labels = mp_alloc((size_t)count * sizeof(int32_t), MP_MEM_DATA);
    for (int64_t i = 0; i < count; i++) {
        for (int k = 0; k < per; k++)
            d.images[i * per + k] = (uint8_t)(1 + (k + 41 * i) % 254);
        d.labels[i] = (int32_t)((i * 7) % 10);
    }
    return d;
}

static void free_dataset(mp_dataset *d)
{
    mp_free(d->images);
    mp_free(d->labels);
    memset(d, 0, sizeof *d);
}

/* A permutation of [0, n) drawn from `stream` (Fisher-Yates), in a fresh malloc'd array. */
static int64_t *permutation(int64_t n, uint64_t stream)
{
    int64_t *p = malloc((size_t)n * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = i;
    mp_rng r;
    mp_rng_seed(&r, 12345, stream);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)mp_rng_below(&r, (uint64_t)i + 1);
        int64_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

static mp_loader_config config(const mp_dataset *d, int threads, int depth, int64_t batch,
                               mp_dtype dt)
{
    mp_loader_config c = {.data = d, .threads = threads, .depth = depth, .batch = batch,
                          .dtype = dt, .mean = mean, .std = stdv, .pad = 2, .flip = true,
                          .seed = 0x9e3779b97f4a7c15ull};
    return c;
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* Compares a returned batch with the reference for batch b of (idx, count, epoch). */
static void check_batch(const mp_loader_config *c, const int64_t *idx, int64_t count,
                        int64_t epoch, int64_t b, const void *x, const int32_t *y, int64_t n)
{
    const mp_dataset *d = c->data;
    int64_t want_n = count - b * c->batch < c->batch ? count - b * c->batch : c->batch;
    assert_int_equal(n, want_n);
    size_t xb = (size_t)want_n * (size_t)(d->h * d->w * d->c) * mp_dtype_size(c->dtype);
    void *rx = malloc(xb);
    int32_t *ry = malloc((size_t)want_n * sizeof *ry);
    assert_non_null(rx);
    assert_non_null(ry);
    assert_int_equal(mp_dataset_batch_augmented(d, idx + b * c->batch, want_n, c->mean, c->std,
                                                c->seed, epoch, c->pad, c->flip, c->dtype, rx,
                                                ry),
                     MP_OK);
    assert_memory_equal(x, rx, xb);
    assert_memory_equal(y, ry, (size_t)want_n * sizeof *ry);
    free(rx);
    free(ry);
}

/* Takes `take` batches (all when take < 0) of the epoch just started and checks each; with
 * `linger`, every batch is checked again after giving the workers time to run ahead. Returns
 * the number of batches taken. */
static int64_t consume(mp_loader *l, const mp_loader_config *c, const int64_t *idx, int64_t count,
                       int64_t epoch, int64_t take, bool linger)
{
    int64_t nb = (count + c->batch - 1) / c->batch;
    if (take < 0 || take > nb)
        take = nb;
    for (int64_t b = 0; b < take; b++) {
        const void *x = NULL;
        const int32_t *y = NULL;
        int64_t n = -1;
        assert_int_equal(mp_loader_next(l, &x, &y, &n), MP_OK);
        check_batch(c, idx, count, epoch, b, x, y, n);
        if (linger) {
            pause_briefly();
            check_batch(c, idx, count, epoch, b, x, y, n);
        }
    }
    return take;
}

/* next past the end fails with the documented message and leaves the outputs alone. */
static void expect_end(mp_loader *l)
{
    const void *x = &x;
    const int32_t *y = (const int32_t *)&y;
    int64_t n = -7;
    mp_error_clear();
    assert_int_equal(mp_loader_next(l, &x, &y, &n), MP_EINTERNAL);
    assert_string_equal(mp_error_message(), "loader: no batch left in this epoch");
    assert_ptr_equal(x, &x);
    assert_ptr_equal(y, (const int32_t *)&y);
    assert_int_equal(n, -7);
}

static void test_matches_reference(void **state)
{
    (void)state;
    static const int threads[] = {0, 1, 3};
    static const int depths[] = {1, 2, 4};
    static const mp_dtype dts[] = {MP_F32, MP_F16, MP_BF16};
    mp_dataset d = make_dataset(COUNT, H, W, C);
    int64_t base = mp_mem_current(MP_MEM_DATA);
    int combo = 0;
    for (int ti = 0; ti < 3; ti++) {
        for (int di = 0; di < 3; di++, combo++) {
            mp_loader_config c = config(&d, threads[ti], depths[di], BATCH, dts[combo % 3]);
            mp_loader *l = NULL;
            assert_int_equal(mp_loader_open(&l, &c), MP_OK);
            assert_non_null(l);
            int64_t *p0 = permutation(COUNT, 1);
            int64_t *p1 = permutation(COUNT, 2);
            assert_memory_not_equal(p0, p1, COUNT * sizeof *p0);

            mp_loader_start_epoch(l, p0, COUNT, 0);
            assert_int_equal(consume(l, &c, p0, COUNT, 0, -1, threads[ti] > 0), 13);
            expect_end(l);
            expect_end(l);

            /* Epoch 1 over only the first 97 indices of another permutation: last batch of 1. */
            mp_loader_start_epoch(l, p1, 97, 1);
            assert_int_equal(consume(l, &c, p1, 97, 1, -1, false), 13);
            expect_end(l);

            mp_loader_close(l);
            free(p0);
            free(p1);
            assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
        }
    }
    free_dataset(&d);
}

/* The last batch of an epoch is the remainder, and its samples are the tail of idx. */
static void test_partial_last_batch(void **state)
{
    (void)state;
    mp_dataset d = make_dataset(COUNT, H, W, C);
    mp_loader_config c = config(&d, 3, 2, BATCH, MP_F32);
    mp_loader *l = NULL;
    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    int64_t *p = permutation(COUNT, 3);
    mp_loader_start_epoch(l, p, COUNT, 4);
    const void *x = NULL;
    const int32_t *y = NULL;
    int64_t n = 0, total = 0, batches = 0;
    while (mp_loader_next(l, &x, &y, &n) == MP_OK) {
        assert_true(n == BATCH || total + n == COUNT);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(y[i], d.labels[p[total + i]]);
        total += n;
        batches++;
    }
    assert_int_equal(batches, 13);
    assert_int_equal(total, COUNT);
    assert_int_equal(n, COUNT % BATCH);
    check_batch(&c, p, COUNT, 4, 12, x, y, n);
    mp_loader_close(l);
    free(p);
    free_dataset(&d);
}

/* After two batches a new epoch starts: the prefetched batches of the old epoch are discarded
 * and the old index array, freed right away, is never read again (ASan would say so). */
static void test_restart_mid_epoch(void **state)
{
    (void)state;
    mp_dataset d = make_dataset(COUNT, H, W, C);
    for (int t = 0; t <= 3; t += 3) {
        for (int depth = 1; depth <= 4; depth *= 2) {
            mp_loader_config c = config(&d, t, depth, BATCH, MP_F16);
            mp_loader *l = NULL;
            assert_int_equal(mp_loader_open(&l, &c), MP_OK);
            int64_t *p0 = permutation(COUNT, 5);
            mp_loader_start_epoch(l, p0, COUNT, 0);
            assert_int_equal(consume(l, &c, p0, COUNT, 0, 2, false), 2);
            pause_briefly(); /* let the workers fill the ring with epoch 0 */

            int64_t *p1 = permutation(COUNT, 6);
            mp_loader_start_epoch(l, p1, COUNT, 1);
            memset(p0, 0xff, COUNT * sizeof *p0);
            free(p0);
            assert_int_equal(consume(l, &c, p1, COUNT, 1, -1, false), 13);
            expect_end(l);

            /* Restart again at once, before anything was taken, with the same indices. */
            mp_loader_start_epoch(l, p1, COUNT, 2);
            mp_loader_start_epoch(l, p1, COUNT, 3);
            assert_int_equal(consume(l, &c, p1, COUNT, 3, -1, false), 13);
            mp_loader_close(l);
            free(p1);
        }
    }
    free_dataset(&d);
}

/* Close while every worker waits for a free slot, while fills may run, and before any epoch;
 * next before any epoch and on an empty epoch fail. Everything comes back. */
static void test_close_paths(void **state)
{
    (void)state;
    mp_dataset d = make_dataset(COUNT, H, W, C);
    int64_t base = mp_mem_current(MP_MEM_DATA);
    int64_t *p = permutation(COUNT, 7);

    mp_loader_config c = config(&d, 3, 1, BATCH, MP_F32);
    mp_loader *l = NULL;
    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    assert_true(mp_mem_current(MP_MEM_DATA) > base);
    mp_loader_start_epoch(l, p, COUNT, 0);
    assert_int_equal(consume(l, &c, p, COUNT, 0, 1, false), 1);
    pause_briefly(); /* the ring is full: the workers block on `work` */
    mp_loader_close(l);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);

    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    mp_loader_start_epoch(l, p, COUNT, 0);
    mp_loader_close(l); /* fills likely in flight */
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);

    for (int t = 0; t <= 3; t += 3) {
        c.threads = t;
        assert_int_equal(mp_loader_open(&l, &c), MP_OK);
        expect_end(l);
        mp_loader_start_epoch(l, p, 0, 0);
        expect_end(l);
        mp_loader_close(l);
        assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    }
    mp_loader_close(NULL);
    free(p);
    free_dataset(&d);
}

static void test_invalid_config(void **state)
{
    (void)state;
    mp_dataset d = make_dataset(4, 2, 2, 1);
    int64_t base = mp_mem_current(MP_MEM_DATA);
    mp_loader_config good = config(&d, 1, 1, 2, MP_F32);
    mp_loader_config bad[8];
    for (int i = 0; i < 8; i++)
        bad[i] = good;
    bad[0].data = NULL;
    bad[1].threads = -1;
    bad[2].depth = 0;
    bad[3].batch = 0;
    bad[4].pad = -1;
    bad[5].mean = NULL;
    bad[6].nice = -1;
    bad[7].nice = 20;
    for (int i = 0; i < 8; i++) {
        mp_loader *l = (mp_loader *)&d;
        mp_error_clear();
        assert_int_equal(mp_loader_open(&l, &bad[i]), MP_EINTERNAL);
        assert_null(l);
        assert_non_null(strstr(mp_error_message(), "loader: "));
        assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    }
    free_dataset(&d);
}

/* Prefetch buffers that cannot fit: depth + 1 slots of a batch of 100000 samples of 4096x4096x3
 * FP32 (about 60 TB) are refused with MP_EDATA naming the sizes, as is a batch whose byte count
 * overflows 64 bits; nothing is allocated (the open never touches the images). */
static void test_too_big(void **state)
{
    (void)state;
    mp_dataset d = {.count = 1, .h = 4096, .w = 4096, .c = 3, .num_classes = 10};
    int64_t base = mp_mem_current(MP_MEM_DATA);
    mp_loader_config c = config(&d, 1, 2, 100000, MP_F32);
    mp_loader *l = (mp_loader *)&d;
    mp_error_clear();
    assert_int_equal(mp_loader_open(&l, &c), MP_EDATA);
    assert_null(l);
    const char *msg = mp_error_message();
    assert_null(strchr(msg, '\n'));
    assert_non_null(strstr(msg, "data loader: 3 prefetch buffers of a batch of 100000 samples "
                                "of 4096x4096x3 fp32"));
    assert_non_null(strstr(msg, "needs 3 x 100000 x 201326596 = 60397978800000 bytes"));
    assert_non_null(strstr(msg, "this process may use"));
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    c.batch = INT64_MAX / 2;
    l = (mp_loader *)&d;
    assert_int_equal(mp_loader_open(&l, &c), MP_EDATA);
    assert_null(l);
    assert_non_null(strstr(mp_error_message(), "overflows"));
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
}

/* A host allocator that counts its live blocks and fails after `budget` allocations. */
static int host_live, host_budget;
static void *host_alloc_counted(size_t bytes, mp_mem_cat cat)
{
    if (host_budget-- <= 0)
        return NULL;
    host_live++;
    return mp_alloc(bytes, cat);
}
static void host_free_counted(void *p)
{
    if (p)
        host_live--;
    mp_free(p);
}

/* The x and y buffers come from the configured host allocator (a backend's pinned memory) and go back
 * to it; batches are the same as with mp_alloc; an allocator that runs out fails the open
 * cleanly. */
static void test_host_allocator(void **state)
{
    (void)state;
    mp_dataset d = make_dataset(COUNT, H, W, C);
    int64_t base = mp_mem_current(MP_MEM_DATA);
    mp_loader_config c = config(&d, 2, 3, BATCH, MP_F16);
    c.host_alloc = host_alloc_counted;
    c.host_free = host_free_counted;
    host_budget = 100;
    mp_loader *l = NULL;
    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    assert_int_equal(host_live, 8); /* x and y of depth + 1 slots */
    int64_t *p0 = permutation(COUNT, 3);
    mp_loader_start_epoch(l, p0, COUNT, 0);
    assert_int_equal(consume(l, &c, p0, COUNT, 0, -1, true), 13);
    mp_loader_close(l);
    assert_int_equal(host_live, 0);
    host_budget = 2;
    assert_int_equal(mp_loader_open(&l, &c), MP_EINTERNAL);
    assert_null(l);
    assert_int_equal(host_live, 0);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    free(p0);
    free_dataset(&d);
}

/* mean and std are copied: changing the caller's arrays after open changes nothing. */
static void test_copies_normalisation(void **state)
{
    (void)state;
    mp_dataset d = make_dataset(COUNT, H, W, C);
    double m[C] = {0.4914, 0.4822, 0.4465}, s[C] = {0.2470, 0.2435, 0.2616};
    mp_loader_config c = config(&d, 1, 2, BATCH, MP_F32);
    c.mean = m;
    c.std = s;
    mp_loader *l = NULL;
    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    m[0] = 0.0;
    s[2] = 1.0;
    mp_loader_config ref = c;
    ref.mean = mean;
    ref.std = stdv;
    int64_t *p = permutation(COUNT, 8);
    mp_loader_start_epoch(l, p, COUNT, 0);
    assert_int_equal(consume(l, &ref, p, COUNT, 0, -1, false), 13);
    mp_loader_close(l);
    free(p);
    free_dataset(&d);
}

/* This process's threads (Linux's /proc/self/task) and the nice value of each (field 19 of its
 * stat, the 17th after the command's closing parenthesis), into tid and v; returns how many (at
 * most cap). */
static int thread_nices(int *tid, int *v, int cap)
{
    DIR *dir = opendir("/proc/self/task");
    assert_non_null(dir);
    int n = 0;
    for (struct dirent *e; n < cap && (e = readdir(dir));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], line[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* a thread that just ended */
        size_t got = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[got] = 0;
        char *p = strrchr(line, ')');
        assert_non_null(p);
        for (int field = 2; field < 19 && p; field++)
            p = strchr(p + 1, ' ');
        assert_non_null(p);
        tid[n] = atoi(e->d_name);
        v[n++] = atoi(p + 1);
    }
    closedir(dir);
    return n;
}

/* With nice 0 the loader's one worker (the thread that was not there before the open) keeps the
 * caller's nice value, with nice 7 it runs 7 above it (once it has filled a batch it has surely
 * started); the threads that were there keep theirs. */
static void test_worker_nice(void **state)
{
    (void)state;
    enum { CAP = 64 };
    int tid0[CAP], v0[CAP];
    int n0 = thread_nices(tid0, v0, CAP), self = 0;
    for (int i = 0; i < n0; i++)
        if (tid0[i] == getpid())
            self = v0[i];
    if (self > 19 - 7)
        skip(); /* already near the bottom: a raise of 7 would not show */
    mp_dataset d = make_dataset(COUNT, H, W, C);
    int64_t *p = permutation(COUNT, 9);
    for (int nice = 0; nice <= 7; nice += 7) {
        mp_loader_config c = config(&d, 1, 2, BATCH, MP_F32);
        c.nice = nice;
        mp_loader *l = NULL;
        assert_int_equal(mp_loader_open(&l, &c), MP_OK);
        mp_loader_start_epoch(l, p, COUNT, 0);
        assert_int_equal(consume(l, &c, p, COUNT, 0, 2, false), 2);
        int tid[CAP], v[CAP], added = 0;
        int n = thread_nices(tid, v, CAP);
        for (int i = 0; i < n; i++) {
            int k = 0;
            while (k < n0 && tid0[k] != tid[i])
                k++;
            if (k < n0) {
                assert_int_equal(v[i], v0[k]);
            } else {
                assert_int_equal(v[i], self + nice);
                added++;
            }
        }
        assert_int_equal(added, 1);
        mp_loader_close(l);
    }
    free(p);
    free_dataset(&d);
}

/* 200 epochs of a tiny dataset, 3 threads, depth 1: full epochs of 5 to 7 indices (batches of 2,
 * so the last is sometimes partial), epochs abandoned after 0 to 2 batches, and every old index
 * array freed as soon as the next epoch has started (ASan catches a straggling reader). */
static void test_stress(void **state)
{
    (void)state;
    enum { TINY = 7 };
    mp_dataset d = make_dataset(TINY, 2, 3, 3);
    int64_t base = mp_mem_current(MP_MEM_DATA);
    mp_loader_config c = config(&d, 3, 1, 2, MP_BF16);
    c.pad = 1;
    mp_loader *l = NULL;
    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    int64_t *prev = NULL;
    for (int64_t e = 0; e < 200; e++) {
        int64_t count = TINY - e % 3;
        int64_t *p = permutation(TINY, 100 + (uint64_t)e);
        mp_loader_start_epoch(l, p, count, e);
        free(prev);
        prev = p;
        int64_t take = e % 4 == 3 ? e % 3 : -1;
        int64_t got = consume(l, &c, p, count, e, take, false);
        if (take < 0) {
            assert_int_equal(got, (count + 1) / 2);
            expect_end(l);
        } else {
            assert_int_equal(got, take);
        }
    }
    mp_loader_close(l);
    free(prev);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    free_dataset(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_host_allocator),
        cmocka_unit_test(test_partial_last_batch),
        cmocka_unit_test(test_restart_mid_epoch),
        cmocka_unit_test(test_close_paths),
        cmocka_unit_test(test_invalid_config),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_copies_normalisation),
        cmocka_unit_test(test_worker_nice),
        cmocka_unit_test(test_stress),
    };
    alarm(120); /* watchdog: a hung loader kills the test instead of stalling the suite */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
