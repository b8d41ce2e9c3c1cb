/* Dropout: the kept fraction over a large tensor within 4 sigma of 1 - p, kept values scaled
 * exactly by 1 / (1 - p), the mask a pure function of (seed, offset + i) pinned to the hash
 * documented in engine/dropout_mask.h (which every backend uses), backward with
 * the forward's mask, p = 0 and evaluation as the identity, the layer's per-step offset, and
 * the FP64 finite-difference check of the layer in training mode. */
#include "tests/util/test_util.h"
#include "tests/util/test_fd.h"

#include <math.h>
#include <string.h>

#include "engine/layer.h"
#include "engine/rng.h"

#define EPS 1e-6
#define RTOL 1e-6
#define ATOL 1e-9

static const mp_ops *ops;

static mp_tensor alloc1(mp_dtype dt, int64_t n)
{
    return mp_tensor_alloc(dt, 1, &n, MP_MEM_WORKSPACE);
}

static void fill(mp_tensor *t, double v)
{
    for (int64_t i = 0; i < mp_tensor_numel(t); i++)
        mp_store(t->data, t->dtype, (size_t)i, v);
}

static double at(const mp_tensor *t, int64_t i) { return mp_load(t->data, t->dtype, (size_t)i); }

static void test_kept_fraction(void **state)
{
    (void)state;
    const int64_t n = 1 << 20;
    mp_tensor x = alloc1(MP_F32, n), y = alloc1(MP_F32, n);
    fill(&x, 1.0);
    const double ps[] = {0.1, 0.3, 0.5, 0.9};
    for (int k = 0; k < 4; k++) {
        double p = ps[k];
        assert_int_equal(ops->dropout_forward(p, 1234, 0, NULL, &x, &y), MP_OK);
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++)
            kept += at(&y, i) != 0;
        double sigma = sqrt((double)n * p * (1 - p));
        assert_true(fabs((double)kept - (double)n * (1 - p)) <= 4 * sigma);
    }
    mp_tensor_free(&x);
    mp_tensor_free(&y);
}

/* Every output is 0 or exactly x * (1 / (1 - p)) in the dtype's arithmetic, rounded once. */
static void test_kept_values_scaled_exactly(void **state)
{
    (void)state;
    const int64_t n = 4096;
    const mp_dtype dts[] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    for (int d = 0; d < 4; d++) {
        mp_dtype dt = dts[d];
        mp_rng r;
        mp_rng_seed(&r, 5, (uint64_t)d);
        mp_tensor x = alloc1(dt, n), y = alloc1(dt, n), want = alloc1(dt, n);
        for (int64_t i = 0; i < n; i++)
            mp_store(x.data, dt, (size_t)i, 4 * mp_rng_uniform(&r) - 2);
        const double p = 0.3, scale = 1.0 / (1.0 - p);
        assert_int_equal(ops->dropout_forward(p, 99, 17, NULL, &x, &y), MP_OK);
        int64_t kept = 0, dropped = 0;
        for (int64_t i = 0; i < n; i++) {
            double xi = at(&x, i);
            mp_store(want.data, dt, (size_t)i,
                     dt == MP_F64 ? xi * scale : (double)((float)xi * (float)scale));
            if (at(&y, i) == 0) {
                dropped++;
            } else {
                kept++;
                assert_true(at(&y, i) == at(&want, i));
            }
        }
        assert_true(kept > n / 2 && dropped > n / 5);
        /* p = 1/2 scales by 2: exact in every dtype. */
        assert_int_equal(ops->dropout_forward(0.5, 99, 17, NULL, &x, &y), MP_OK);
        for (int64_t i = 0; i < n; i++)
            assert_true(at(&y, i) == 0 || at(&y, i) == 2 * at(&x, i));
        mp_tensor_free(&x);
        mp_tensor_free(&y);
        mp_tensor_free(&want);
    }
}

/* The documented hash: key = mix64(seed + G), bits = mix64(key ^ (counter * G)), keep when
 * (bits >> 32) >= ceil(p 2^32), G = 0x9e3779b97f4a7c15, mix64 = splitmix64's finaliser. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool want_keep(double p, uint64_t seed, uint64_t counter)
{
    const uint64_t g = 0x9e3779b97f4a7c15ull;
    uint64_t bits = mix64(mix64(seed + g) ^ (counter * g));
    return (bits >> 32) >= (uint64_t)ceil(p * 4294967296.0);
}

static void test_mask_is_counter_hash(void **state)
{
    (void)state;
    const int64_t n = 2048;
    mp_tensor x = alloc1(MP_F64, n), y = alloc1(MP_F64, n), y2 = alloc1(MP_F64, n);
    fill(&x, 1.0);
    const uint64_t offsets[] = {0, 1, 1000, (uint64_t)7 << 32, UINT64_MAX - 100};
    for (int k = 0; k < 5; k++) {
        assert_int_equal(ops->dropout_forward(0.4, 42, offsets[k], NULL, &x, &y), MP_OK);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(at(&y, i) != 0, want_keep(0.4, 42, offsets[k] + (uint64_t)i));
    }
    /* Same (seed, offset): the same mask. Offset k shifts the mask by k elements. */
    assert_int_equal(ops->dropout_forward(0.4, 42, 1000, NULL, &x, &y), MP_OK);
    assert_int_equal(ops->dropout_forward(0.4, 42, 1000, NULL, &x, &y2), MP_OK);
    assert_memory_equal(y.data, y2.data, (size_t)n * sizeof(double));
    assert_int_equal(ops->dropout_forward(0.4, 42, 1010, NULL, &x, &y2), MP_OK);
    for (int64_t i = 0; i + 10 < n; i++)
        assert_true(at(&y2, i) == at(&y, i + 10));
    /* A different offset or seed: a different mask (about 2 p (1 - p) = 48% of elements). */
    int64_t differ_off = 0, differ_seed = 0;
    assert_int_equal(ops->dropout_forward(0.4, 42, 1000 + (uint64_t)n, NULL, &x, &y2), MP_OK);
    for (int64_t i = 0; i < n; i++)
        differ_off += at(&y, i) != at(&y2, i);
    assert_int_equal(ops->dropout_forward(0.4, 43, 1000, NULL, &x, &y2), MP_OK);
    for (int64_t i = 0; i < n; i++)
        differ_seed += at(&y, i) != at(&y2, i);
    assert_true(differ_off > n / 3 && differ_seed > n / 3);
    mp_tensor_free(&x);
    mp_tensor_free(&y);
    mp_tensor_free(&y2);
}

/* Backward recomputes the forward's mask: dx = dy * scale where y was kept, else 0. */
static void test_backward_uses_forward_mask(void **state)
{
    (void)state;
    const int64_t n = 1024;
    mp_tensor x = alloc1(MP_F32, n), y = alloc1(MP_F32, n);
    mp_tensor dy = alloc1(MP_F32, n), dx = alloc1(MP_F32, n);
    fill(&x, 1.0);
    for (int64_t i = 0; i < n; i++)
        mp_store(dy.data, MP_F32, (size_t)i, (double)(i % 7) - 3.5);
    assert_int_equal(ops->dropout_forward(0.5, 7, 300, NULL, &x, &y), MP_OK);
    assert_int_equal(ops->dropout_backward(0.5, 7, 300, NULL, &dy, &dx), MP_OK);
    for (int64_t i = 0; i < n; i++)
        assert_true(at(&dx, i) == (at(&y, i) != 0 ? 2 * at(&dy, i) : 0.0));
    mp_tensor_free(&x);
    mp_tensor_free(&y);
    mp_tensor_free(&dy);
    mp_tensor_free(&dx);
}

/* p = 0 copies every dtype bit for bit; inf and NaN propagate through dropped elements too
 * (x * 0), as in PyTorch, so an overflow reaches the loss scaler. */
static void test_identity_and_nonfinite(void **state)
{
    (void)state;
    const int64_t n = 512;
    const mp_dtype dts[] = {MP_F64, MP_F32, MP_F16, MP_BF16};
    for (int d = 0; d < 4; d++) {
        mp_rng r;
        mp_rng_seed(&r, 8, (uint64_t)d);
        mp_tensor x = alloc1(dts[d], n), y = alloc1(dts[d], n);
        for (int64_t i = 0; i < n; i++)
            mp_store(x.data, dts[d], (size_t)i, 2 * mp_rng_uniform(&r) - 1);
        assert_int_equal(ops->dropout_forward(0.0, 3, 0, NULL, &x, &y), MP_OK);
        assert_memory_equal(x.data, y.data, (size_t)mp_tensor_bytes(&x));
        fill(&x, NAN);
        assert_int_equal(ops->dropout_forward(0.5, 3, 0, NULL, &x, &y), MP_OK);
        for (int64_t i = 0; i < n; i++)
            assert_true(isnan(at(&y, i)));
        mp_tensor_free(&x);
        mp_tensor_free(&y);
    }
    double v = 1, w;
    int64_t one = 1;
    mp_tensor a = mp_tensor_view(&v, MP_F64, 1, &one), b = mp_tensor_view(&w, MP_F64, 1, &one);
    assert_int_equal(ops->dropout_forward(1.0, 3, 0, NULL, &a, &b), MP_EINTERNAL);
    assert_int_equal(ops->dropout_backward(-0.1, 3, 0, NULL, &a, &b), MP_EINTERNAL);
}

/* The layer: forward in training uses offset = step * 2^32, so each step has a fresh mask and a
 * step's mask does not depend on the batch size; evaluation is a copy; p outside [0, 1) is a
 * usage error naming the layer. */
static void test_layer_steps_and_eval(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {2, 4, 8};
    assert_int_equal(mp_layer_dropout_init(&l, ops, "drop1", in, 0.25), MP_OK);
    assert_string_equal(l.cls->type, "dropout");
    assert_memory_equal(l.out_shape, in, sizeof in);
    assert_int_equal(l.nparams, 0);
    l.seed = 77;
    int64_t s[4] = {3, 2, 4, 8}, n = 3 * 64;
    mp_tensor x = mp_tensor_alloc(MP_F32, 4, s, MP_MEM_WORKSPACE);
    mp_tensor y = mp_tensor_alloc(MP_F32, 4, s, MP_MEM_WORKSPACE);
    mp_tensor y1 = mp_tensor_alloc(MP_F32, 4, s, MP_MEM_WORKSPACE);
    mp_tensor ref = mp_tensor_alloc(MP_F32, 4, s, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < n; i++)
        mp_store(x.data, MP_F32, (size_t)i, 1.0 + (double)i / 256);
    l.step = 5;
    assert_int_equal(l.cls->forward(&l, &x, &y, true), MP_OK);
    assert_int_equal(ops->dropout_forward(0.25, 77, (uint64_t)5 << 32, NULL, &x, &ref), MP_OK);
    assert_memory_equal(y.data, ref.data, (size_t)mp_tensor_bytes(&y));
    l.step = 6;
    assert_int_equal(l.cls->forward(&l, &x, &y1, true), MP_OK);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++)
        differ += (at(&y, i) == 0) != (at(&y1, i) == 0);
    assert_true(differ > n / 8);
    /* A smaller batch at step 5 gets the first rows of the full batch's mask. */
    l.step = 5;
    mp_tensor x2 = mp_tensor_batch(&x, 2), y2 = mp_tensor_batch(&y1, 2);
    assert_int_equal(l.cls->forward(&l, &x2, &y2, true), MP_OK);
    assert_memory_equal(y2.data, y.data, (size_t)mp_tensor_bytes(&y2));
    /* Evaluation: the identity. */
    assert_int_equal(l.cls->forward(&l, &x, &y, false), MP_OK);
    assert_memory_equal(y.data, x.data, (size_t)mp_tensor_bytes(&x));
    mp_tensor *all[] = {&x, &y, &y1, &ref};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);

    assert_int_equal(mp_layer_dropout_init(&l, ops, "drop2", in, 1.0), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "drop2"));
    assert_int_equal(mp_layer_dropout_init(&l, ops, "drop3", in, -0.5), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "drop3"));
    assert_int_equal(mp_layer_dropout_init(&l, ops, "drop4", in, NAN), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "drop4"));
}

/* L = sum(r * dropout(x)) at a fixed step against central differences, in FP64. */
static void test_gradcheck(void **state)
{
    (void)state;
    mp_layer l;
    int64_t in[3] = {1, 3, 4};
    assert_int_equal(mp_layer_dropout_init(&l, ops, "drop", in, 0.4), MP_OK);
    l.seed = 2024;
    l.step = 3;
    int64_t s[4] = {4, 1, 3, 4};
    mp_tensor x = mp_tensor_alloc(MP_F64, 4, s, MP_MEM_WORKSPACE);
    mp_tensor y = mp_tensor_alloc(MP_F64, 4, s, MP_MEM_WORKSPACE);
    mp_tensor r = mp_tensor_alloc(MP_F64, 4, s, MP_MEM_WORKSPACE);
    mp_tensor dx = mp_tensor_alloc(MP_F64, 4, s, MP_MEM_WORKSPACE);
    mp_rng rng;
    mp_rng_seed(&rng, 9, 0);
    double *xv = x.data;
    for (int i = 0; i < 48; i++) {
        xv[i] = 2 * mp_rng_uniform(&rng) - 1;
        ((double *)r.data)[i] = 2 * mp_rng_uniform(&rng) - 1;
    }
    mp_test_layer_loss(&l, &x, &y, &r);
    assert_int_equal(l.cls->backward(&l, &x, &y, &r, &dx), MP_OK);
    mp_test_layer_fd_check(&l, &x, &y, &r, &x, &dx, EPS, ATOL, RTOL);
    int zeros = 0;
    for (int i = 0; i < 48; i++)
        zeros += ((double *)dx.data)[i] == 0;
    assert_true(zeros > 5 && zeros < 43); /* the mask really drops some and keeps some */
    mp_tensor *all[] = {&x, &y, &r, &dx};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_fraction),
        cmocka_unit_test(test_kept_values_scaled_exactly),
        cmocka_unit_test(test_mask_is_counter_hash),
        cmocka_unit_test(test_backward_uses_forward_mask),
        cmocka_unit_test(test_identity_and_nonfinite),
        cmocka_unit_test(test_layer_steps_and_eval),
        cmocka_unit_test(test_gradcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
