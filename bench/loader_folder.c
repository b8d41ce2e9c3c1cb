/* bench_loader (issue 50): decode + augment throughput of mpdist's input pipeline on an image
 * folder, the loader alone (no model): mp_loader with THREADS worker threads over the training
 * split of ROOT (io/folder.h: JPEG and PNG decoded with libjpeg-turbo and libpng), samples
 * SIZE x SIZE with CHANNELS channels, the training transform (random resized crop and flip) and
 * ImageNet's normalisation into FP32, batches of 128 in a shuffled order. One warm-up epoch of
 * 2 batches, then EPOCHS epochs over the first LIMIT files (0: all), timed with mp_now; prints
 * one line: "loader threads=T images=N seconds=S images_per_s=R".
 * ROOT "synthetic": the synthetic dataset instead (io/synthetic.c, SIZE x SIZE x CHANNELS, 50000
 * samples, or LIMIT), CIFAR's augmentation (random crop after padding by 4, flip) into fp16, as
 * the GPU step benchmark's O2 runs read it: the gather and normalisation alone, nothing decoded.
 * Usage: bench_loader ROOT SIZE CHANNELS THREADS [EPOCHS (1)] [LIMIT (0)]. A bad argument or any
 * failure prints one line on stderr and exits 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "engine/clock.h"
#include "engine/rng.h"
#include "io/folder.h"
#include "io/loader.h"

static void check(mp_status s, const char *what)
{
    if (s != MP_OK) {
        fprintf(stderr, "bench_loader: %s: %s\n", what, mp_error_message());
        exit(2);
    }
}

/* One epoch of `count` samples of order through l: the images handed out. */
static int64_t epoch(mp_loader *l, const int64_t *order, int64_t count, int64_t e)
{
    mp_loader_start_epoch(l, order, count, e);
    int64_t seen = 0;
    for (int64_t b = 0; b * 128 < count; b++) {
        const void *x;
        const int32_t *y;
        int64_t n;
        check(mp_loader_next(l, &x, &y, &n), "a batch");
        seen += n;
    }
    return seen;
}

int main(int argc, char **argv)
{
    int size = mp_bench_count_arg(argc, argv, 2, -1), ch = mp_bench_count_arg(argc, argv, 3, -1);
    int threads = mp_bench_count_arg(argc, argv, 4, -1);
    int epochs = mp_bench_count_arg(argc, argv, 5, 1);
    char *end = NULL;
    long long limit = argc > 6 ? strtoll(argv[6], &end, 10) : 0;
    if (argc > 6 && (end == argv[6] || *end != '\0'))
        limit = -1;
    if (argc < 5 || argc > 7 || size < 0 || ch < 0 || threads < 0 || epochs < 0 || limit < 0) {
        fprintf(stderr, "usage: bench_loader ROOT SIZE CHANNELS THREADS [EPOCHS] [LIMIT]\n");
        return 2;
    }
    mp_dataset tr, te = {0};
    const bool synthetic = strcmp(argv[1], "synthetic") == 0;
    if (synthetic && ch != 1 && ch != 3) {
        fprintf(stderr, "bench_loader: synthetic: CHANNELS must be 1 or 3 (got %d)\n", ch);
        return 2;
    }
    if (synthetic)
        check(mp_synthetic_make(&tr, "train", size, size, ch, limit ? limit : 50000, 10, 1),
              "the synthetic data");
    else
        check(mp_folder_load(&tr, &te, argv[1], size, ch, 0, 1000, limit, 1), argv[1]);
    const double mean3[3] = MP_FOLDER_MEAN, std3[3] = MP_FOLDER_STD;
    const double mean1[1] = {0.2860}, std1[1] = {0.3530};
    mp_loader_config c = {.data = &tr, .threads = threads, .depth = 2, .batch = 128,
                          .dtype = synthetic ? MP_F16 : MP_F32, .mean = ch == 3 ? mean3 : mean1,
                          .std = ch == 3 ? std3 : std1, .pad = synthetic ? 4 : 0, .flip = true,
                          .seed = 1};
    mp_loader *l;
    check(mp_loader_open(&l, &c), "the loader");
    int64_t *order = malloc((size_t)tr.count * sizeof *order);
    mp_rng r;
    mp_rng_seed(&r, 7, 0);
    for (int64_t i = 0; i < tr.count; i++)
        order[i] = i;
    for (int64_t i = tr.count - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)mp_rng_below(&r, (uint64_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    epoch(l, order, tr.count < 256 ? tr.count : 256, 0);
    double t0 = mp_now();
    int64_t seen = 0;
    for (int e = 1; e <= epochs; e++)
        seen += epoch(l, order, tr.count, e);
    double s = mp_now() - t0;
    printf("loader threads=%d images=%lld seconds=%.3f images_per_s=%.1f\n", threads,
           (long long)seen, s, (double)seen / s);
    mp_loader_close(l);
    free(order);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    return 0;
}
