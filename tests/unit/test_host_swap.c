/* engine/host_swap.h on the staged CPU backend (memory declared not the host's): tensors point
 * at host copies between begin and end (downloaded or zeroed), two tensors with one storage
 * share one copy, a tensor listed twice or empty is handled, upload writes back and no upload
 * leaves the backend memory alone, sizes that disagree on shared storage are refused, and with
 * host memory (the plain CPU backend) nothing moves. */
#include "tests/util/test_util.h"

#include <string.h>

#include "engine/host_swap.h"

enum { N = 100 };

static mp_tensor filled(const mp_ops *ops, float base)
{
    int64_t shape[1] = {N};
    mp_tensor t = mp_tensor_new(ops, MP_F32, 1, shape, MP_MEM_WORKSPACE);
    for (int i = 0; i < N; i++)
        ((float *)t.data)[i] = base + (float)i;
    return t;
}

static void test_copies_and_write_back(void **unused)
{
    (void)unused;
    const mp_ops *ops = mp_backend_cpu_staged();
    assert_false(ops->host_memory);
    mp_tensor a = filled(ops, 1.0f), b = filled(ops, 500.0f), alias = a, empty;
    memset(&empty, 0, sizeof empty);
    void *dev_a = a.data, *dev_b = b.data;
    mp_tensor *ts[] = {&a, &alias, &empty, &b, &a};
    mp_host_swap hs;
    assert_int_equal(mp_host_begin(&hs, ops, ts, 5, true), MP_OK);
    assert_ptr_not_equal(a.data, dev_a);
    assert_ptr_equal(alias.data, a.data); /* one copy for one storage */
    assert_null(empty.data);
    assert_true(((float *)a.data)[7] == 8.0f && ((float *)b.data)[7] == 507.0f);
    ((float *)alias.data)[3] = -1.0f;
    ((float *)b.data)[3] = -2.0f;
    assert_int_equal(mp_host_end(&hs, true), MP_OK);
    assert_ptr_equal(a.data, dev_a);
    assert_ptr_equal(alias.data, dev_a);
    assert_ptr_equal(b.data, dev_b);
    assert_true(((float *)dev_a)[3] == -1.0f && ((float *)dev_b)[3] == -2.0f);
    /* No download: zeroed copies; no upload: the backend memory keeps its values. */
    mp_tensor *one[] = {&b};
    assert_int_equal(mp_host_begin(&hs, ops, one, 1, false), MP_OK);
    assert_true(((float *)b.data)[7] == 0.0f);
    ((float *)b.data)[7] = 42.0f;
    assert_int_equal(mp_host_end(&hs, false), MP_OK);
    assert_true(((float *)dev_b)[7] == 507.0f);
    /* Shared storage with two sizes is refused, and everything points back. */
    mp_tensor shorter = a;
    shorter.shape[0] = N / 2;
    mp_tensor *bad[] = {&a, &shorter};
    assert_int_equal(mp_host_begin(&hs, ops, bad, 2, true), MP_EINTERNAL);
    assert_ptr_equal(a.data, dev_a);
    assert_ptr_equal(shorter.data, dev_a);
    mp_tensor_delete(ops, &a);
    mp_tensor_delete(ops, &b);
}

static void test_host_memory_is_left_alone(void **unused)
{
    (void)unused;
    const mp_ops *ops = mp_backend_cpu();
    mp_tensor a = filled(ops, 1.0f);
    void *dev = a.data;
    mp_tensor *ts[] = {&a};
    mp_host_swap hs;
    assert_int_equal(mp_host_begin(&hs, ops, ts, 1, true), MP_OK);
    assert_ptr_equal(a.data, dev);
    assert_int_equal(mp_host_end(&hs, true), MP_OK);
    assert_ptr_equal(a.data, dev);
    mp_tensor_delete(ops, &a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_and_write_back),
        cmocka_unit_test(test_host_memory_is_left_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
