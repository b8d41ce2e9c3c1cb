/* Helpers shared by the CMocka tests: tolerance checks, scratch directories and file writers.
 * Include after <cmocka.h>'s prerequisites (stdarg, stddef, stdint, setjmp). */
#ifndef MP_TEST_UTIL_H
#define MP_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "engine/tensor.h"
#include "engine/status.h"
#include "io/dataset.h"

/* Fails the test unless |a[i] - ref[i]| <= atol + rtol * |ref[i]| for every i (NaN fails);
 * the message names the first bad index and both values. */
void mp_assert_close_impl(const double *a, const double *ref, size_t n, double atol, double rtol,
                          const char *file, int line);
#define assert_close(a, ref, n, atol, rtol) \
    mp_assert_close_impl((a), (ref), (n), (atol), (rtol), __FILE__, __LINE__)

/* The unit roundoff of dt (2^-11 fp16, 2^-8 bf16, 2^-24 FP32, 2^-53 FP64): the base of the
 * tolerances of tests that compare a dtype's results with FP64. */
double mp_test_eps(mp_dtype dt);

/* A tensor of dtype dt (mp_tensor_alloc, workspace) filled with U(lo, hi) drawn from r, or
 * zeros when r is NULL; free with mp_tensor_free. */
mp_tensor mp_test_rand(mp_dtype dt, int ndim, const int64_t *shape, mp_rng *r, double lo,
                       double hi);

/* A fresh empty directory for this test: $MPDIST_TEST_TMP/<name>.<pid> (or under /tmp).
 * Returns a static buffer. */
const char *mp_test_dir(const char *name);

/* Writes len bytes to path (raw, or gzip-compressed when gz != 0); fails the test on error. */
void mp_test_write_file(const char *path, const void *data, size_t len, int gz);

/* A dataset loader's failure as the tests expect it: its status `got` is `code`, its message is
 * one line containing each non-NULL want[0..n), the dataset *d it filled is all zero, and the
 * MP_MEM_DATA bytes are back at mem_before. Fails the test otherwise. */
void mp_test_expect_load_fail(mp_status got, mp_status code, const mp_dataset *d,
                              int64_t mem_before, const char *const *want, int n);

/* Reads the losses of the "step" records of the metrics file at path into loss[0..n); fails the
 * test unless there are exactly n. */
void mp_test_read_losses(const char *path, double *loss, int n);

/* The largest |a[i] - b[i]| over i < n (0 for n 0). */
double mp_test_max_abs_diff(const double *a, const double *b, int64_t n);

/* Runs a shell command, captures its combined output (up to cap-1 bytes, NUL-terminated) into
 * out and returns its exit status (-1 if it did not exit normally). */
int mp_test_run(const char *cmd, char *out, size_t cap);

#endif
