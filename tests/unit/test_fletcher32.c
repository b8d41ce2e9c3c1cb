/* io/fletcher32 against HDF5's own H5_checksum_fletcher32 (exported by libhdf5, the function its
 * Fletcher32 filter calls): random bytes of every length from 0 to 600 and of lengths around the
 * block size, all-zero and all-0xff inputs (whose sums are multiples of 65535, where HDF5's
 * folding gives 65535 rather than 0), a stream fed in uneven pieces, and the copy it makes. */
#include "tests/util/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"
#include "io/fletcher32.h"

/* HDF5's checksum (H5checksum.c); not in its public headers, but an exported symbol. */
uint32_t H5_checksum_fletcher32(const void *data, size_t len);

#define MAXLEN 70000

static uint8_t *random_bytes(size_t n, uint64_t seed)
{
    uint8_t *x = malloc(n);
    assert_non_null(x);
    mp_rng r;
    mp_rng_seed(&r, seed, 3);
    for (size_t i = 0; i < n; i++)
        x[i] = (uint8_t)(mp_rng_uniform(&r) * 256.0);
    return x;
}

static uint32_t ours(const void *x, size_t n)
{
    mp_fletcher32 f;
    mp_fletcher32_init(&f);
    mp_fletcher32_update(&f, NULL, x, n);
    return mp_fletcher32_value(&f);
}

static void test_matches_hdf5(void **state)
{
    (void)state;
    uint8_t *x = random_bytes(MAXLEN, 11);
    for (size_t n = 0; n <= 600; n++)
        assert_int_equal(ours(x, n), H5_checksum_fletcher32(x, n));
    size_t block = 4096, lens[] = {block - 2, block, block + 2, block + 17, 3 * block + 14,
                                   MAXLEN - 1, MAXLEN};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        assert_int_equal(ours(x, lens[k]), H5_checksum_fletcher32(x, lens[k]));
        assert_int_equal(ours(x + 6, lens[k] - 6), H5_checksum_fletcher32(x + 6, lens[k] - 6));
    }
    for (int v = 0; v <= 0xff; v += 0xff) { /* residues 0: zeros give 0, 0xff.. gives 65535 */
        memset(x, v, MAXLEN);
        for (size_t n = 0; n < MAXLEN; n = n * 3 + 2)
            assert_int_equal(ours(x, n), H5_checksum_fletcher32(x, n));
    }
    x[MAXLEN - 1] = 1; /* zeros but one low byte in the last word */
    memset(x, 0, MAXLEN - 1);
    assert_int_equal(ours(x, MAXLEN), H5_checksum_fletcher32(x, MAXLEN));
    assert_int_not_equal(ours(x, MAXLEN), 0);
    free(x);
}

static void test_pieces_and_copy(void **state)
{
    (void)state;
    uint8_t *x = random_bytes(MAXLEN, 12), *copy = malloc(MAXLEN);
    assert_non_null(copy);
    memset(copy, 0xa5, MAXLEN);
    mp_fletcher32 f;
    mp_fletcher32_init(&f);
    size_t at = 0, piece = 2;
    while (at < MAXLEN) { /* even pieces of growing, uneven sizes: 2, 8, 26, ... */
        size_t take = piece < MAXLEN - at ? piece : MAXLEN - at;
        mp_fletcher32_update(&f, copy + at, x + at, take);
        at += take;
        piece = piece * 3 + 2;
    }
    assert_int_equal(mp_fletcher32_value(&f), H5_checksum_fletcher32(x, MAXLEN));
    assert_memory_equal(copy, x, MAXLEN);
    x[MAXLEN / 2] ^= 0x10; /* one flipped bit changes it */
    assert_int_not_equal(ours(x, MAXLEN), mp_fletcher32_value(&f));
    free(x);
    free(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_hdf5),
        cmocka_unit_test(test_pieces_and_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
