/* Token shards (data.format = "tokens", io/tokens.c): headerless uint16 and uint32 shards and
 * llm.c's header (versions 1 and 2); the split by name (*val* the validation split), shards in
 * name order, windows that never cross a shard's end (a shard too short for one contributes
 * none), window contents and next-token labels, the per-epoch offset of the training windows,
 * limits; the same batches as text data (io/text.c) on the same bytes, through the loader with
 * 0 and 3 threads; refusals, each one line with both datasets zeroed: bad arguments, a missing
 * directory, no shard of a split, a bad header version, a header count or size that disagrees
 * with the file, a mix of widths, a token >= the vocabulary (named with its position), a split
 * without a window; and a shard that shrinks after loading, refused by the batch (MP_EDATA
 * naming it) and by the loader's next, not read past its end, and one rewritten with a token
 * past the vocabulary, refused by the batch; headers before tokens, and a stop ending the check;
 * the check's pieces, as ranks share them. */
#include "tests/util/test_util.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "engine/stop.h"
#include "io/augment.h"
#include "io/dataset.h"
#include "io/loader.h"
#include "io/tokens.h"

#define T 8
#define VOCAB 70000 /* above uint16's range, so uint32 tokens can use it */

/* The token at position i of the corpus the tests write: neighbours differ, below vocab. */
static uint32_t tok_at(int64_t i, uint32_t vocab)
{
    return (uint32_t)((i * 7919 + 13) % vocab);
}

/* Writes n tokens tok_at(first..first + n) as dir/name, `width` bytes each, after llm.c's
 * header of `version` when version > 0 (count announced: n + extra). */
static void write_shard(const char *dir, const char *name, int64_t first, int64_t n, int width,
                        int version, int extra)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t head = version > 0 ? MP_TOKENS_HEADER_BYTES : 0;
    uint8_t *b = calloc(head + (size_t)n * (size_t)width + 1, 1);
    assert_non_null(b);
    if (version > 0) {
        int32_t h[3] = {MP_TOKENS_MAGIC, version, (int32_t)(n + extra)};
        memcpy(b, h, sizeof h);
    }
    uint32_t vocab = width == 2 ? 65536 : VOCAB;
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = tok_at(first + i, vocab);
        memcpy(b + head + (size_t)i * (size_t)width, &v, (size_t)width); /* little-endian */
    }
    mp_test_write_file(path, b, head + (size_t)n * (size_t)width, 0);
    free(b);
}

/* Window j's x and y from d at (seed, epoch), checked against the corpus: x's token k is
 * tok_at(base + k), y's the next. */
static void expect_window(const mp_dataset *d, int64_t j, int64_t epoch, int64_t base,
                          uint32_t vocab)
{
    float x[T];
    int32_t y[T];
    assert_int_equal(mp_tokens_batch(d, &j, 1, 42, epoch, MP_F32, x, y), MP_OK);
    for (int k = 0; k < T; k++) {
        assert_int_equal((uint32_t)x[k], tok_at(base + k, vocab));
        assert_int_equal((uint32_t)y[k], tok_at(base + k + 1, vocab));
    }
}

static void test_headerless_uint16(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("tokens-plain");
    write_shard(dir, "train.bin", 0, 100, 2, 0, 0);  /* 100 / 8 - 1 = 11 windows */
    write_shard(dir, "val.bin", 1000, 33, 2, 0, 0);  /* (33 - 1) / 8 = 4 windows */
    mp_dataset tr, te;
    assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, 65536, 0, 0), MP_OK);
    assert_int_equal(tr.count, 11);
    assert_int_equal(te.count, 4);
    assert_int_equal(tr.num_classes, 65536);
    assert_int_equal(tr.w, T);
    assert_int_equal(mp_dataset_label_len(&tr), T);
    assert_true(tr.text_shift);
    assert_false(te.text_shift);
    for (int64_t e = 0; e < 4; e++) {
        int64_t off = mp_text_offset(&tr, 42, e);
        assert_true(off >= 0 && off < T);
        expect_window(&tr, 0, e, off, 65536);
        expect_window(&tr, 10, e, 10 * T + off, 65536); /* the last: ends at token 95 + off */
    }
    expect_window(&te, 3, 5, 1000 + 3 * T, 65536);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, 65536, 5, 2), MP_OK); /* limits */
    assert_int_equal(tr.count, 5);
    assert_int_equal(te.count, 2);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
}

/* llm.c's shards: several training shards in name order (one too short for a window), windows
 * of each within it; version 2's uint32 tokens above uint16's range. */
static void test_llmc_shards(void **state)
{
    (void)state;
    for (int version = 1; version <= 2; version++) {
        const char *dir = mp_test_dir(version == 1 ? "tokens-llmc1" : "tokens-llmc2");
        int w = version == 1 ? 2 : 4;
        uint32_t vocab = w == 2 ? 65536 : VOCAB;
        write_shard(dir, "data_train_000002.bin", 5000, 40, w, version, 0); /* 4 windows */
        write_shard(dir, "data_train_000001.bin", 0, 30, w, version, 0);    /* 2 windows */
        write_shard(dir, "data_train_000003.bin", 9000, 15, w, version, 0); /* none */
        write_shard(dir, "data_val_000000.bin", 7000, 17, w, version, 0);   /* 2 windows */
        write_shard(dir, "notes.txt", 0, 3, 1, 0, 0);                       /* not a shard */
        mp_dataset tr, te;
        assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, vocab, 0, 0), MP_OK);
        assert_int_equal(tr.count, 6);
        assert_int_equal(te.count, 2);
        int64_t off = mp_text_offset(&tr, 42, 3);
        expect_window(&tr, 1, 3, T + off, vocab);            /* shard 000001's last */
        expect_window(&tr, 2, 3, 5000 + off, vocab);         /* shard 000002's first */
        expect_window(&tr, 5, 3, 5000 + 3 * T + off, vocab); /* and last */
        expect_window(&te, 1, 0, 7000 + T, vocab);
        if (version == 2) { /* a token above 65535 went through whole */
            bool big = false;
            for (int64_t i = 5000; i < 5040; i++)
                big = big || tok_at(i, vocab) > 65535;
            assert_true(big);
        }
        mp_dataset_free(&tr);
        mp_dataset_free(&te);
    }
}

/* Text data and token shards holding the same bytes give the same batches, directly and
 * through the loader with 0 and 3 threads. */
static void test_same_batches_as_text(void **state)
{
    (void)state;
    enum { LEN = 1000, VAL = 100, BATCH = 5 };
    const char *dir = mp_test_dir("tokens-text");
    uint8_t bytes[LEN];
    uint16_t toks[LEN];
    for (int i = 0; i < LEN; i++)
        toks[i] = bytes[i] = (uint8_t)((i * 37 + i / 256) % 256);
    char path[4096];
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    mp_test_write_file(path, bytes, LEN, 0);
    mp_dataset xtr, xte, ttr, tte;
    assert_int_equal(mp_text_load(&xtr, &xte, path, T, 0.1, 0, 0), MP_OK);
    const char *sdir = mp_test_dir("tokens-text-shards");
    snprintf(path, sizeof path, "%s/train.bin", sdir);
    mp_test_write_file(path, toks, (LEN - VAL) * sizeof *toks, 0);
    snprintf(path, sizeof path, "%s/val.bin", sdir);
    mp_test_write_file(path, toks + LEN - VAL, VAL * sizeof *toks, 0);
    assert_int_equal(mp_tokens_load(&ttr, &tte, sdir, T, 2, 256, 0, 0), MP_OK);
    assert_int_equal(ttr.count, xtr.count);
    assert_int_equal(tte.count, xte.count);
    int64_t idx[BATCH] = {0, 7, xtr.count - 1, 3, 50};
    const mp_dtype dts[3] = {MP_F32, MP_F16, MP_BF16};
    for (int k = 0; k < 3; k++) {
        double xa[BATCH * T], xb[BATCH * T];
        int32_t ya[BATCH * T], yb[BATCH * T];
        mp_text_batch(&xtr, idx, BATCH, 9, 4, dts[k], xa, ya);
        assert_int_equal(mp_tokens_batch(&ttr, idx, BATCH, 9, 4, dts[k], xb, yb), MP_OK);
        assert_memory_equal(xa, xb, BATCH * T * mp_dtype_size(dts[k]));
        assert_memory_equal(ya, yb, sizeof ya);
    }
    const double mean = 0, std = 1;
    for (int threads = 0; threads <= 3; threads += 3) {
        mp_loader_config c = {.data = &ttr, .threads = threads, .depth = 2, .batch = 4,
                              .dtype = MP_F32, .mean = &mean, .std = &std, .seed = 9};
        mp_loader *l;
        assert_int_equal(mp_loader_open(&l, &c), MP_OK);
        int64_t order[12];
        for (int i = 0; i < 12; i++)
            order[i] = (i * 5) % ttr.count;
        mp_loader_start_epoch(l, order, 12, 2);
        for (int b = 0; b < 3; b++) {
            const void *x;
            const int32_t *y;
            int64_t n;
            float want_x[4 * T];
            int32_t want_y[4 * T];
            assert_int_equal(mp_loader_next(l, &x, &y, &n), MP_OK);
            assert_int_equal(n, 4);
            mp_text_batch(&xtr, order + 4 * b, 4, 9, 2, MP_F32, want_x, want_y);
            assert_memory_equal(x, want_x, sizeof want_x);
            assert_memory_equal(y, want_y, sizeof want_y);
        }
        mp_loader_close(l);
    }
    mp_dataset *all[4] = {&xtr, &xte, &ttr, &tte};
    for (int i = 0; i < 4; i++)
        mp_dataset_free(all[i]);
}

/* Loads dir with (context, width, vocab) and expects the failure `code` with each of want. */
static void expect_refused(const char *dir, int context, int width, int64_t vocab,
                           mp_status code, const char *w1, const char *w2)
{
    mp_dataset tr, te;
    int64_t before = mp_mem_current(MP_MEM_DATA);
    mp_status st = mp_tokens_load(&tr, &te, dir, context, width, vocab, 0, 0);
    const char *want[2] = {w1, w2};
    mp_test_expect_load_fail(st, code, &tr, before, want, 2);
    mp_dataset zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&te, &zero, sizeof zero);
}

static void test_refusals(void **state)
{
    (void)state;
    const char *ok = mp_test_dir("tokens-ok");
    write_shard(ok, "train.bin", 0, 100, 2, 0, 0);
    write_shard(ok, "val.bin", 0, 20, 2, 0, 0);
    expect_refused(ok, 1, 2, 65536, MP_EUSAGE, "context 1", NULL);
    expect_refused(ok, T, 3, 65536, MP_EUSAGE, "3-byte tokens", NULL);
    expect_refused(ok, T, 2, 1, MP_EUSAGE, "vocabulary 1", NULL);
    expect_refused("/nonexistent/shards", T, 2, 65536, MP_EDATA, "/nonexistent/shards", NULL);
    expect_refused(ok, T, 2, 1000, MP_EDATA, "train.bin: token 1 is 7932", "data.num_classes");
    expect_refused(ok, 60, 2, 65536, MP_EDATA, "no whole window", "training");

    const char *noval = mp_test_dir("tokens-noval");
    write_shard(noval, "train.bin", 0, 100, 2, 0, 0);
    expect_refused(noval, T, 2, 65536, MP_EDATA, "no validation shard", noval);
    const char *notrain = mp_test_dir("tokens-notrain");
    write_shard(notrain, "val.bin", 0, 100, 2, 0, 0);
    expect_refused(notrain, T, 2, 65536, MP_EDATA, "no training shard", NULL);

    const char *odd = mp_test_dir("tokens-odd");
    write_shard(odd, "train.bin", 0, 101, 1, 0, 0); /* 101 bytes: not whole uint16 tokens */
    write_shard(odd, "val.bin", 0, 20, 2, 0, 0);
    expect_refused(odd, T, 2, 65536, MP_EDATA, "train.bin: 101 bytes", "2-byte tokens");

    const char *version = mp_test_dir("tokens-version");
    write_shard(version, "train.bin", 0, 600, 2, 3, 0);
    write_shard(version, "val.bin", 0, 20, 2, 0, 0);
    expect_refused(version, T, 2, 65536, MP_EDATA, "train.bin: llm.c header version 3", NULL);

    const char *count = mp_test_dir("tokens-count"); /* announces 5 tokens more than it holds */
    write_shard(count, "train.bin", 0, 600, 2, 1, 5);
    write_shard(count, "val.bin", 0, 20, 2, 0, 0);
    expect_refused(count, T, 2, 65536, MP_EDATA, "announces 605 tokens", "train.bin");

    const char *mixed = mp_test_dir("tokens-mixed");
    write_shard(mixed, "a_train.bin", 0, 600, 2, 1, 0);
    write_shard(mixed, "b_train.bin", 0, 600, 4, 2, 0);
    write_shard(mixed, "val.bin", 0, 20, 2, 0, 0);
    expect_refused(mixed, T, 2, VOCAB, MP_EDATA, "b_train.bin: 4-byte tokens", "2-byte");
}

/* A shard cut short after loading: the batch that reads past its new end fails naming it, and
 * so does the loader's next that hands out that batch. */
static void test_shard_shrinks(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("tokens-shrink");
    write_shard(dir, "train.bin", 0, 200, 2, 0, 0);
    write_shard(dir, "val.bin", 0, 20, 2, 0, 0);
    mp_dataset tr, te;
    assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, 65536, 0, 0), MP_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/train.bin", dir);
    assert_int_equal(truncate(path, 100 * 2), 0);
    float x[T];
    int32_t y[T];
    int64_t early = 0, late = tr.count - 1;
    assert_int_equal(mp_tokens_batch(&tr, &early, 1, 42, 0, MP_F32, x, y), MP_OK);
    assert_int_equal(mp_tokens_batch(&tr, &late, 1, 42, 0, MP_F32, x, y), MP_EDATA);
    assert_non_null(strstr(mp_error_message(), path));
    assert_non_null(strstr(mp_error_message(), "changed since it was opened"));
    /* the file's size now, not where the read stopped */
    assert_non_null(strstr(mp_error_message(), "holds 200 bytes now"));
    const double mean = 0, std = 1;
    mp_loader_config c = {.data = &tr, .threads = 2, .depth = 2, .batch = 1, .dtype = MP_F32,
                          .mean = &mean, .std = &std, .seed = 42};
    mp_loader *l;
    assert_int_equal(mp_loader_open(&l, &c), MP_OK);
    int64_t order[2] = {early, late};
    mp_loader_start_epoch(l, order, 2, 0);
    const void *bx;
    const int32_t *by;
    int64_t n;
    assert_int_equal(mp_loader_next(l, &bx, &by, &n), MP_OK);
    assert_int_equal(mp_loader_next(l, &bx, &by, &n), MP_EDATA);
    assert_non_null(strstr(mp_error_message(), path));
    mp_loader_close(l);
    /* The same size, a token past the vocabulary: refused at the batch, not by the model. */
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    write_shard(dir, "train.bin", 0, 200, 2, 0, 0);
    assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, 65535, 0, 0), MP_OK); /* < vocab */
    mp_dataset_free(&te);
    int64_t at = mp_text_offset(&tr, 42, 0) + 2; /* inside window 0 of epoch 0 */
    uint16_t big = 65535;
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 2 * at, SEEK_SET), 0);
    assert_int_equal(fwrite(&big, 2, 1, f), 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(mp_tokens_batch(&tr, &early, 1, 42, 0, MP_F32, x, y), MP_EDATA);
    char want[64];
    snprintf(want, sizeof want, "token %lld is 65535", (long long)at);
    assert_non_null(strstr(mp_error_message(), want));
    mp_dataset_free(&tr);
}

/* The token check: a token past the vocabulary in the second 1 MiB piece of a shard is named
 * with its position; every shard's header is read first (a validation shard that is cut is
 * said before the training shards' tokens are read). Then a stop request ends a load in its
 * check (MP_ESTOPPED naming the shard, both datasets zeroed): the request stays for the
 * process, so this test runs last. */
static void test_check_and_stop(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("tokens-check");
    const int64_t n = 3 * (1 << 19), bad = (1 << 19) + 1000; /* 3 pieces; one in the second */
    uint16_t *b = malloc((size_t)n * 2);
    assert_non_null(b);
    for (int64_t i = 0; i < n; i++)
        b[i] = (uint16_t)(i % 5);
    b[bad] = 9;
    char path[4096];
    snprintf(path, sizeof path, "%s/train.bin", dir);
    mp_test_write_file(path, b, (size_t)n * 2, 0);
    snprintf(path, sizeof path, "%s/val.bin", dir);
    mp_test_write_file(path, b, 200, 0);
    mp_dataset tr, te;
    char want[64];
    snprintf(want, sizeof want, "train.bin: token %lld is 9", (long long)bad);
    assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, 5, 0, 0), MP_EDATA);
    assert_non_null(strstr(mp_error_message(), want));
    mp_test_write_file(path, b, 201, 0); /* val.bin: an odd size, found before train.bin's 9 */
    assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, 5, 0, 0), MP_EDATA);
    assert_non_null(strstr(mp_error_message(), "val.bin: 201 bytes"));
    mp_test_write_file(path, b, 200, 0);
    free(b);
    mp_stop_request(SIGUSR1);
    int64_t before = mp_mem_current(MP_MEM_DATA);
    mp_status st = mp_tokens_load(&tr, &te, dir, T, 2, 5, 0, 0);
    const char *stopped[2] = {"stopped by SIGUSR1 while checking the tokens of", "train.bin"};
    mp_test_expect_load_fail(st, MP_ESTOPPED, &tr, before, stopped, 2);
}

/* The pieces of the check, numbered over the training shards, then the validation shards (an
 * empty shard holds none), each checked by the caller that takes it: a bad token in pieces 1
 * (a.bin), 3 (c.bin) and 5 (the validation shard's second) is found by a check of those pieces
 * only, each named in its shard's own positions, and not by one of the pieces 0, 2 and 4, as
 * rank 0 of 2 would check them. */
static void test_pieces(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("tokens-pieces");
    const int64_t piece = 1 << 19; /* uint16 tokens in 1 MiB */
    const int64_t sizes[4] = {3 * piece, 0, piece / 2, piece + piece / 2};
    const int64_t bad[4] = {piece + 7, -1, 5, piece + 3};
    const char *names[4] = {"a.bin", "b.bin", "c.bin", "val.bin"};
    for (int f = 0; f < 4; f++) {
        uint16_t *b = calloc((size_t)sizes[f] + 1, 2);
        assert_non_null(b);
        if (bad[f] >= 0)
            b[bad[f]] = 9;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        mp_test_write_file(path, b, (size_t)sizes[f] * 2, 0);
        free(b);
    }
    mp_dataset tr, te;
    assert_int_equal(mp_tokens_open(&tr, &te, dir, T, 2, 5, 0, 0), MP_OK);
    assert_int_equal(mp_tokens_pieces(&tr, &te), 6);
    int64_t at = 0;
    assert_int_equal(mp_tokens_check(&tr, &te, 0, 100, 2, &at), MP_OK);
    assert_int_equal(at, -1);
    assert_int_equal(mp_tokens_check(&tr, &te, 6, 100, 1, NULL), MP_OK); /* none past the last */
    assert_int_equal(mp_tokens_check(&tr, &te, 0, 100, 0, NULL), MP_EINTERNAL); /* stride 0 */
    const int64_t first[3] = {1, 3, 5};
    const char *want[3] = {"a.bin: token 524295 is 9", "c.bin: token 5 is 9",
                           "val.bin: token 524291 is 9"};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(mp_tokens_check(&tr, &te, first[k], 1, 1, &at), MP_EDATA);
        assert_non_null(strstr(mp_error_message(), want[k]));
        assert_int_equal(at, first[k]);
    }
    assert_int_equal(mp_tokens_check(&tr, &te, 1, 100, 2, &at), MP_EDATA); /* 1, 3, 5: the first */
    assert_non_null(strstr(mp_error_message(), want[0]));
    assert_int_equal(at, 1);
    mp_dataset_free(&tr);
    mp_dataset_free(&te);
    assert_int_equal(mp_tokens_load(&tr, &te, dir, T, 2, 5, 0, 0), MP_EDATA); /* all pieces */
    assert_non_null(strstr(mp_error_message(), want[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headerless_uint16),
        cmocka_unit_test(test_llmc_shards),
        cmocka_unit_test(test_same_batches_as_text),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_shard_shrinks),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_check_and_stop), /* last: it leaves a stop requested */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
