/* The CPU backend's parallel loops (engine/backend_cpu/parallel.h) give the bits of one thread:
 * ReLU forward and backward, add, bias add, dropout, max pooling (windows that tile the input,
 * overlapping windows with padding, and NaN in the input), average pooling, BatchNorm forward
 * (training and evaluation, channel counts that cut into uneven stripes) and backward, and the
 * optimizer step (Adam with a half copy, SGD with momentum), in every dtype, on tensors large
 * enough to be split, computed with 1 and with 3 threads and compared byte for byte. Whole-tensor
 * dtype conversions (the convert op; convolutions, GEMMs and attention widen and round through
 * the same split) give mp_convert's bits for every pair of dtypes. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/tensor.h"

enum { N = 4, H = 16, W = 16, NOUT = 48 };

static const mp_ops *ops;

/* The results of one pass over every op: tensors compared afterwards, in a fixed order. */
typedef struct outputs {
    mp_tensor t[NOUT];
    int n;
} outputs;

static mp_tensor *keep(outputs *o, mp_tensor t)
{
    assert_true(o->n < NOUT);
    o->t[o->n] = t;
    return &o->t[o->n++];
}

static mp_pool_desc pool(int k, int s, int pad, bool max)
{
    mp_pool_desc d;
    memset(&d, 0, sizeof d);
    d.window[0] = d.window[1] = k;
    d.stride[0] = d.stride[1] = s;
    d.pad[0] = d.pad[1] = pad;
    d.max = max;
    return d;
}

static void element_wise(mp_dtype dt, int64_t C, mp_rng *r, outputs *o)
{
    int64_t s[4] = {N, H, W, C};
    mp_tensor x = mp_test_rand(dt, 4, s, r, -2, 2), b = mp_test_rand(dt, 4, s, r, -2, 2);
    mp_tensor dy = mp_test_rand(dt, 4, s, r, -1, 1);
    mp_tensor *y = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->relu_forward(&x, y), MP_OK);
    mp_tensor *dx = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->relu_backward(y, &dy, dx), MP_OK);
    mp_tensor *sum = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->add(&x, &b, sum), MP_OK);
    assert_int_equal(ops->add(sum, &dy, sum), MP_OK); /* in place */
    mp_tensor *d = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->dropout_forward(0.3, 77, 5, &x, d), MP_OK);
    int64_t rows[2] = {N * H * W, C}, bs[1] = {C};
    mp_tensor bias = mp_test_rand(dt, 1, bs, r, -1, 1);
    mp_tensor *yb = keep(o, mp_test_rand(dt, 2, rows, r, -2, 2));
    assert_int_equal(ops->bias_add(yb, &bias), MP_OK);
    mp_tensor *all[] = {&x, &b, &dy, &bias};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

static void pooling(mp_dtype dt, int64_t C, mp_rng *r, outputs *o)
{
    int64_t s[4] = {N, H, W, C};
    mp_tensor x = mp_test_rand(dt, 4, s, r, -2, 2);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i += 997) /* NaN in some windows */
        mp_store(x.data, dt, (size_t)i, NAN);
    mp_pool_desc ds[3] = {pool(2, 2, 0, true), pool(3, 2, 1, true), pool(3, 2, 1, false)};
    for (int k = 0; k < 3; k++) {
        int64_t P = (H + 2 * ds[k].pad[0] - ds[k].window[0]) / ds[k].stride[0] + 1;
        int64_t ys[4] = {N, P, P, C};
        mp_tensor *y = keep(o, mp_test_rand(dt, 4, ys, NULL, 0, 0));
        assert_int_equal(ops->pool_forward(&ds[k], &x, y), MP_OK);
        mp_tensor dy = mp_test_rand(dt, 4, ys, r, -1, 1);
        mp_tensor *dx = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
        assert_int_equal(ops->pool_backward(&ds[k], &x, y, &dy, dx), MP_OK);
        mp_tensor_free(&dy);
    }
    mp_tensor_free(&x);
}

static void batchnorm(mp_dtype dt, int64_t C, mp_rng *r, outputs *o)
{
    mp_dtype pt = dt == MP_F64 ? MP_F64 : MP_F32;
    int64_t s[4] = {N, H, W, C}, cs[1] = {C};
    mp_bn_args a = {.eps = 1e-5, .momentum = 0.1};
    mp_tensor x = mp_test_rand(dt, 4, s, r, -2, 3), dy = mp_test_rand(dt, 4, s, r, -1, 1);
    mp_tensor g = mp_test_rand(pt, 1, cs, r, 0.5, 1.5), b = mp_test_rand(pt, 1, cs, r, -1, 1);
    mp_tensor *rm = keep(o, mp_test_rand(pt, 1, cs, r, -0.1, 0.1));
    mp_tensor *rv = keep(o, mp_test_rand(pt, 1, cs, r, 0.9, 1.1));
    mp_tensor *sm = keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *si = keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *y = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_forward(&a, true, &x, &g, &b, rm, rv, sm, si, y), MP_OK);
    mp_tensor *dx = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    mp_tensor *dg = keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    mp_tensor *db = keep(o, mp_test_rand(pt, 1, cs, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_backward(&a, &x, &dy, &g, sm, si, dx, dg, db), MP_OK);
    mp_tensor *ye = keep(o, mp_test_rand(dt, 4, s, NULL, 0, 0));
    assert_int_equal(ops->batchnorm_forward(&a, false, &x, &g, &b, rm, rv, NULL, NULL, ye),
                     MP_OK);
    mp_tensor *all[] = {&x, &dy, &g, &b};
    for (int i = 0; i < 4; i++)
        mp_tensor_free(all[i]);
}

static void optimizer(mp_dtype dt, mp_rng *r, outputs *o)
{
    mp_dtype pt = dt == MP_F64 ? MP_F64 : MP_F32;
    int64_t n[1] = {100003};
    mp_tensor gr = mp_test_rand(dt, 1, n, r, -1, 1);
    for (int k = 0; k < 2; k++) {
        mp_optim_args a = {.kind = k ? MP_OPTIM_SGD : MP_OPTIM_ADAM, .lr = 0.01,
                           .weight_decay = 1e-4, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.999,
                           .eps = 1e-8, .step = 3, .grad_scale = 0.5};
        mp_tensor *w = keep(o, mp_test_rand(pt, 1, n, r, -1, 1));
        mp_tensor *copy = dt == pt ? NULL : keep(o, mp_test_rand(dt, 1, n, NULL, 0, 0));
        mp_tensor *m1 = keep(o, mp_test_rand(pt, 1, n, r, -0.1, 0.1));
        mp_tensor m2 = mp_test_rand(pt, 1, n, r, 0, 0.01);
        assert_int_equal(ops->optim_step(&a, NULL, w, copy, &gr, m1, k ? NULL : &m2), MP_OK);
        mp_tensor_free(&m2);
    }
    mp_tensor_free(&gr);
}

/* Every op on the same inputs (drawn from one seed) with `threads` threads. */
static void run_all(mp_dtype dt, int threads, outputs *o)
{
    mp_backend_cpu_threads(threads);
#ifdef _OPENMP
    assert_int_equal(omp_get_max_threads(), threads);
#endif
    mp_rng r;
    mp_rng_seed(&r, 2026, 0);
    memset(o, 0, sizeof *o);
    const int64_t channels[2] = {48, 100}; /* BatchNorm's N H W rows: 16 chunks of bn_rule.h */
    element_wise(dt, channels[0], &r, o);
    pooling(dt, channels[0], &r, o);
    for (int k = 0; k < 2; k++)
        batchnorm(dt, channels[k], &r, o);
    optimizer(dt, &r, o);
}

static void test_threads_give_one_threads_bits(void **state)
{
    (void)state;
#ifndef _OPENMP
    skip(); /* built without OpenMP: every loop runs on one thread */
#endif
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    for (int k = 0; k < 4; k++) {
        outputs one, many;
        run_all(dts[k], 1, &one);
        run_all(dts[k], 3, &many);
        assert_int_equal(one.n, many.n);
        for (int i = 0; i < one.n; i++) {
            assert_int_equal(mp_tensor_bytes(&one.t[i]), mp_tensor_bytes(&many.t[i]));
            if (memcmp(one.t[i].data, many.t[i].data, (size_t)mp_tensor_bytes(&one.t[i])) != 0)
                fail_msg("%s: output %d differs between 1 and 3 threads", mp_dtype_name(dts[k]),
                         i);
            mp_tensor_free(&one.t[i]);
            mp_tensor_free(&many.t[i]);
        }
    }
    mp_backend_cpu_threads(1);
}

/* The convert op splits a tensor into one piece per thread: with 3 threads, every pair of
 * dtypes and lengths around the pieces' edges (and below the grain, where it does not split),
 * on random bit patterns (NaNs with payloads, infinities, subnormals), it gives mp_convert's
 * bytes, and writes nothing past the end. */
static void test_convert_bulk_is_mp_convert(void **state)
{
    (void)state;
    mp_backend_cpu_threads(3);
#ifdef _OPENMP
    assert_int_equal(omp_get_max_threads(), 3); /* so the long ones are cut in 3 */
#endif
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const int64_t lens[5] = {5, 32768 * 3 - 1, 32768 * 3, 32768 * 3 + 77, 32768 * 5 + 64};
    mp_rng r;
    mp_rng_seed(&r, 2026, 1);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int k = 0; k < 5; k++) {
                int64_t n = lens[k];
                int64_t padded = n + 64; /* a guard tail that must stay untouched */
                mp_tensor src = mp_tensor_alloc(dts[a], 1, &n, MP_MEM_ACTIVATIONS);
                mp_tensor got = mp_tensor_alloc(dts[b], 1, &padded, MP_MEM_ACTIVATIONS);
                mp_tensor want = mp_tensor_alloc(dts[b], 1, &padded, MP_MEM_ACTIVATIONS);
                unsigned char *bytes = src.data;
                for (int64_t i = 0; i < mp_tensor_bytes(&src); i++)
                    bytes[i] = (unsigned char)mp_rng_next(&r);
                memset(got.data, 0xa5, (size_t)mp_tensor_bytes(&got));
                memset(want.data, 0xa5, (size_t)mp_tensor_bytes(&want));
                mp_convert(want.data, dts[b], src.data, dts[a], (size_t)n);
                mp_tensor view = got;
                view.shape[0] = n;
                assert_int_equal(ops->convert(&src, &view), MP_OK);
                if (memcmp(got.data, want.data, (size_t)mp_tensor_bytes(&got)) != 0)
                    fail_msg("convert %s -> %s of %lld elements differs from mp_convert",
                             mp_dtype_name(dts[a]), mp_dtype_name(dts[b]), (long long)n);
                mp_tensor_free(&src);
                mp_tensor_free(&got);
                mp_tensor_free(&want);
            }
    mp_backend_cpu_threads(1);
}

int main(void)
{
    ops = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_give_one_threads_bits),
        cmocka_unit_test(test_convert_bulk_is_mp_convert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
