/* A checkpoint-shaped HDF5 file with one bit flipped, at every byte of the file in turn: each
 * read is refused (MP_ECKPT) or returns exactly the values written, never other values and
 * never a crash or a hang (strings are fixed-length, under the object header's checksum). A
 * file of the older format (variable-length strings in an unchecksummed global heap) still
 * reads, and damage to its heap's layout is refused instead of crashing HDF5. */
#include "tests/util/test_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/h5_gheap.h"
#include "io/h5file.h"

#define STRINGS 12 /* more attributes than HDF5 keeps compact (8): dense storage too */

static char path[1024], flipped[1100];

static void string_value(int k, char *out, size_t size)
{
    size_t n = k == 3 ? 3000 : (size_t)(k * 7); /* one long (a config text), one empty */
    if (n >= size)
        n = size - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)('a' + (i * 7 + (size_t)k) % 26);
    out[n] = '\0';
}

static void write_sample(const char *p)
{
    mp_h5w *w;
    char name[32], value[4096];
    assert_int_equal(mp_h5w_open(&w, p, 0), MP_OK);
    for (int k = 0; k < STRINGS; k++) {
        snprintf(name, sizeof name, "s%d", k);
        string_value(k, value, sizeof value);
        assert_int_equal(mp_h5w_attr_string(w, "/meta", name, value), MP_OK);
    }
    assert_int_equal(mp_h5w_attr_int(w, "/meta", "step", 123456789), MP_OK);
    assert_int_equal(mp_h5w_attr_double(w, "/scaler", "scale", 32768.0), MP_OK);
    assert_int_equal(mp_h5w_attr_string(w, "/optim", "name", "sgd"), MP_OK);
    float a[6 * 5];
    for (int i = 0; i < 30; i++)
        a[i] = (float)i * 0.25f - 3.0f;
    int64_t sa[2] = {6, 5}, sb[1] = {3}, ints[3] = {7, -1, 1LL << 40};
    assert_int_equal(mp_h5w_array(w, "/params/fc.weight", MP_F32, 2, sa, a, MP_F32), MP_OK);
    assert_int_equal(mp_h5w_array(w, "/params/fc.bias", MP_F16, 1, sb, a, MP_F32), MP_OK);
    assert_int_equal(mp_h5w_array(w, "/rng/state", MP_H5_I64, 1, sb, ints, MP_H5_I64), MP_OK);
    assert_int_equal(mp_h5w_commit(w), MP_OK);
}

/* Reads everything write_sample wrote; MP_OK only when every value is the one written. A
 * different value is a test failure here, not a status. */
static mp_status read_sample(const char *p)
{
    mp_h5r *r;
    MP_TRY(mp_h5r_open(&r, p));
    char name[32], want[4096];
    mp_status st = MP_OK;
    for (int k = 0; k < STRINGS && st == MP_OK; k++) {
        char *got = NULL;
        snprintf(name, sizeof name, "s%d", k);
        string_value(k, want, sizeof want);
        st = mp_h5r_attr_string(r, "/meta", name, &got);
        if (st == MP_OK)
            assert_string_equal(got, want);
        free(got);
    }
    int64_t step = 0, ints[3] = {0};
    double scale = 0;
    float a[30], b[3];
    int64_t sa[2] = {6, 5}, sb[1] = {3};
    if (st == MP_OK && (st = mp_h5r_attr_int(r, "/meta", "step", &step)) == MP_OK)
        assert_int_equal(step, 123456789);
    if (st == MP_OK && (st = mp_h5r_attr_double(r, "/scaler", "scale", &scale)) == MP_OK)
        assert_true(scale == 32768.0);
    if (st == MP_OK && (st = mp_h5r_array(r, "/params/fc.weight", 2, sa, a, MP_F32)) == MP_OK)
        for (int i = 0; i < 30; i++)
            assert_true(a[i] == (float)i * 0.25f - 3.0f);
    if (st == MP_OK && (st = mp_h5r_array(r, "/params/fc.bias", 1, sb, b, MP_F32)) == MP_OK)
        for (int i = 0; i < 3; i++)
            assert_true(b[i] == (float)i * 0.25f - 3.0f);
    if (st == MP_OK && (st = mp_h5r_array(r, "/rng/state", 1, sb, ints, MP_H5_I64)) == MP_OK)
        assert_true(ints[0] == 7 && ints[1] == -1 && ints[2] == 1LL << 40);
    mp_h5r_close(r);
    return st;
}

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc(*n);
    assert_non_null(d);
    assert_int_equal(fread(d, 1, *n, f), *n);
    fclose(f);
    return d;
}

static void spit(const char *p, const unsigned char *d, size_t n)
{
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, 1, n, f), n);
    fclose(f);
}

static void test_every_byte(void **state)
{
    (void)state;
    const char *dir = mp_test_dir("h5_flips");
    snprintf(path, sizeof path, "%s/sample.h5", dir);
    snprintf(flipped, sizeof flipped, "%s/flipped.h5", dir);
    write_sample(path);
    assert_int_equal(read_sample(path), MP_OK);
    size_t n;
    unsigned char *d = slurp(path, &n);
    long refused = 0, same = 0;
    for (size_t i = 0; i < n; i++) {
        d[i] ^= (unsigned char)(1u << (i % 8));
        spit(flipped, d, n);
        d[i] ^= (unsigned char)(1u << (i % 8));
        alarm(20); /* a hang fails the test */
        mp_status st = read_sample(flipped);
        alarm(0);
        if (st == MP_OK)
            same++;
        else {
            assert_int_equal(st, MP_ECKPT);
            refused++;
        }
    }
    printf("h5 flips: %zu bytes flipped, %ld refused, %ld read back identical\n", n, refused,
           same);
    assert_true(refused > (long)n / 2);
    free(d);
}

/* The corpus's file of the older format, and its copy with a flipped heap object size (the
 * reproducer of a segfault in H5HG_read). */
static void test_older_format(void **state)
{
    (void)state;
    char old[1024], bad[1024];
    const char *src = getenv("MPDIST_SRC");
    assert_non_null(src);
    snprintf(old, sizeof old, "%s/tests/fuzz/corpus/checkpoint/legacy-vlen-mlp3.h5", src);
    snprintf(bad, sizeof bad, "%s/tests/fuzz/corpus/checkpoint/legacy-gcol-size-flip.h5", src);
    mp_h5r *r;
    char *s = NULL;
    assert_int_equal(mp_h5r_open(&r, old), MP_OK);
    assert_int_equal(mp_h5r_attr_string(r, "/meta", "opt_level", &s), MP_OK);
    assert_string_equal(s, "O0");
    free(s);
    assert_int_equal(mp_h5r_attr_string(r, "/optim", "name", &s), MP_OK);
    assert_string_equal(s, "sgd");
    free(s);
    mp_h5r_close(r);
    assert_int_equal(mp_h5_check_global_heaps(old), MP_OK);
    assert_int_equal(mp_h5r_open(&r, bad), MP_OK);
    assert_int_equal(mp_h5r_attr_string(r, "/meta", "opt_level", &s), MP_ECKPT);
    assert_null(s);
    assert_non_null(strstr(mp_error_message(), "global heap at byte 2048"));
    mp_h5r_close(r);
    /* every bit of the heap's header and first object header: refused or read as written */
    size_t n;
    unsigned char *d = slurp(old, &n);
    snprintf(flipped, sizeof flipped, "%s/old-flipped.h5", mp_test_dir("h5_flips_old"));
    for (size_t i = 2048; i < 2048 + 32; i++)
        for (int b = 0; b < 8; b++) {
            d[i] ^= (unsigned char)(1u << b);
            spit(flipped, d, n);
            d[i] ^= (unsigned char)(1u << b);
            alarm(20);
            assert_int_equal(mp_h5r_open(&r, flipped), MP_OK);
            mp_status st = mp_h5r_attr_string(r, "/meta", "opt_level", &s);
            alarm(0);
            if (st == MP_OK)
                free(s);
            else
                assert_int_equal(st, MP_ECKPT);
            mp_h5r_close(r);
        }
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte),
        cmocka_unit_test(test_older_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
