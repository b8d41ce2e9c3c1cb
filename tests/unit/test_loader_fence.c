/* The loader's fences (io/loader.h): a slot is refilled only after the device has finished
 * reading it, and the time mp_loader_next spends waiting for that is the device's, counted by
 * mp_loader_device_wait_s, not the input's. Fake fences stand for a device that reads each
 * slot DEVICE_S after the consumer queued its copy: the consumer, running ahead, waits DEVICE_S
 * for every batch (fills in next itself: one slot) or every second one (a worker thread: two
 * slots), all of it on the device; with fences already passed, nothing is counted. (On an H200, 2026-11-30, such waits were reported as the
 * input's: 85% of a resnet20 step, while the GPU held it.) */
#include "tests/util/test_util.h"

#include <string.h>
#include <time.h>

#include "engine/alloc.h"
#include "engine/clock.h"
#include "io/loader.h"

enum { H = 4, W = 4, C = 1, COUNT = 64, BATCH = 4 };
#define DEVICE_S 0.02

static const double mean[C] = {0.5};
static const double stdv[C] = {0.25};

/* A fence the "device" passes at done_at (host clock). */
typedef struct fake_fence {
    double done_at;
} fake_fence;

static mp_status fake_wait(void *fence) /* from the consumer and a worker at once: reads only */
{
    const fake_fence *f = fence;
    double left = f->done_at - mp_now();
    if (left > 0) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
    return MP_OK;
}

/* One epoch of COUNT / BATCH batches, each slot's fence passed `device_s` after the batch was
 * taken; *total: the seconds spent in mp_loader_next, *stats: the loader's at the end. Returns
 * the device wait it counted. */
static double epoch(int threads, double device_s, double *total, mp_loader_stats *stats)
{
    mp_dataset d = {.count = COUNT, .h = H, .w = W, .c = C, .num_classes = 2};
    d.images = mp_alloc(COUNT * H * W * C, MP_MEM_DATA);
    d.labels = mp_alloc(COUNT * sizeof(int32_t), MP_MEM_DATA);
    memset(d.images, 7, COUNT * H * W * C);
    memset(d.labels, 0, COUNT * sizeof(int32_t));
    int64_t idx[COUNT];
    for (int i = 0; i < COUNT; i++)
        idx[i] = i;
    mp_loader_config c = {.data = &d, .threads = threads, .depth = 1, .batch = BATCH,
                          .dtype = MP_F32, .mean = mean, .std = stdv, .fence_wait = fake_wait};
    mp_loader *l = NULL;
    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    mp_loader_start_epoch(l, idx, COUNT, 0);
    fake_fence fences[COUNT / BATCH];
    *total = 0.0;
    for (int b = 0; b < COUNT / BATCH; b++) {
        const void *x;
        const int32_t *y;
        int64_t n;
        double t0 = mp_now();
        assert_int_equal(mp_loader_next(l, &x, &y, &n), MP_OK);
        *total += mp_now() - t0;
        assert_int_equal(n, BATCH);
        fences[b] = (fake_fence){.done_at = mp_now() + device_s};
        *mp_loader_fence(l) = &fences[b]; /* the copy out of the slot "queued" now */
    }
    double counted = mp_loader_device_wait_s(l);
    mp_loader_stats_get(l, stats);
    mp_loader_close(l);
    mp_free(d.images);
    mp_free(d.labels);
    return counted;
}

static void test_device_wait_counted(void **state)
{
    (void)state;
    for (int threads = 0; threads <= 2; threads += 2) {
        mp_loader_stats st;
        double total, dev = epoch(threads, DEVICE_S, &total, &st);
        /* with two slots batch b + 2 waits for the fence set at batch b, DEVICE_S later: at
         * least 7 waits in 16 batches (15 with one slot) */
        assert_true(dev >= 7 * DEVICE_S * 0.9);
        assert_true(dev <= total + 1e-6);
        assert_true(total - dev < 0.5 * dev); /* the fills themselves are quick */
        dev = epoch(threads, 0.0, &total, &st);
        assert_true(dev < 0.5 * DEVICE_S);
    }
}

/* mp_loader_stats: every batch built once, its fill timed apart from its fence wait, which a
 * worker does (the consumer waits on the same fence first when it fills a batch itself). */
static void test_stats(void **state)
{
    (void)state;
    for (int threads = 0; threads <= 2; threads += 2) {
        mp_loader_stats st;
        double total, dev = epoch(threads, DEVICE_S, &total, &st);
        assert_int_equal(st.fills, COUNT / BATCH);
        assert_true(st.fill_s > 0.0);
        assert_true(st.fill_s < 0.5 * dev); /* 16 fills of 64 bytes, the fence waits left out */
        if (threads > 0) /* a worker takes batch b + 2 once b is out: it waits as the consumer */
            assert_true(st.fence_s >= 7 * DEVICE_S * 0.9);
        else
            assert_true(st.fence_s < 0.5 * DEVICE_S);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_wait_counted),
        cmocka_unit_test(test_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
