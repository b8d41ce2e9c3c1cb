/* Helpers shared by the GPU tests (tests/gpu/, ctest label gpu): opening the CUDA backend or
 * reporting the test skipped, host/device tensor pairs that hold the same values for the CPU
 * reference and the CUDA op, poisoned outputs, comparisons of a device result with the CPU's
 * (within a tolerance, or bitwise) and the tolerances themselves. Every CUDA op is compared
 * with the CPU op on the same rounded inputs, so a tolerance covers only what the two backends
 * may legitimately do differently: the order of FP32 sums and where a value is rounded.
 * "Device" is the backend under test: CUDA (mp_gpu_or_skip), or the staged CPU backend
 * (mp_gpu_use), which keeps its tensors out of the host's reach as a GPU does, so a GPU test
 * and these helpers also run where no GPU is. Each device tensor of a pair is followed by a
 * guard of MP_GPU_GUARD bytes that the checks require unchanged (no write past the end).
 * Include it first: it pulls in <cmocka.h> with its prerequisites through test_util.h. */
#ifndef MP_TEST_GPU_H
#define MP_TEST_GPU_H

#include "tests/util/test_util.h"

#include <stdbool.h>

#include "engine/backends.h"
#include "engine/ops.h"
#include "engine/rng.h"

/* The dtypes the CUDA backend stores (FP64 is the CPU reference's alone). */
#define MP_GPU_NDTYPES 3
extern const mp_dtype mp_gpu_dtypes[MP_GPU_NDTYPES];

/* Opens the CUDA backend (device 0, TF32 off, 256 MiB convolution workspace) and returns its
 * table. When the binary has no CUDA or no GPU can be used (MP_EUSAGE) prints
 * "skipped: <reason>" and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE); any
 * other failure to open is an error (exit 1). Call it first in main, before cmocka runs. */
const mp_ops *mp_gpu_or_skip(void);

/* Makes `ops` the device (the backend under test) instead of CUDA: for the staged CPU backend
 * (mp_backend_cpu_staged). Call it first in main, in place of mp_gpu_or_skip. */
void mp_gpu_use(const mp_ops *ops);

/* How the CUDA backend opened by mp_gpu_or_skip makes convolution plans from now on: the layout
 * FP32 convolutions run in and whether algorithms are timed (the backend reopened with those
 * options changed; the test fails if that fails); nothing on another device. */
void mp_gpu_conv_plans(mp_conv_layout layout, bool timed);

/* Bytes after each device tensor of a pair that hold MP_GPU_GUARD_BYTE until something writes
 * past the tensor's end. */
#define MP_GPU_GUARD 64
#define MP_GPU_GUARD_BYTE 0xa5

/* Device memory: `bytes` from the device (the test fails when it is out of memory), and
 * copies in and out that fail the test unless they succeed. */
void *mp_gpu_alloc(size_t bytes);
void mp_gpu_put(void *dev, const void *host, size_t bytes);
void mp_gpu_get(void *host, const void *dev, size_t bytes);

/* A host tensor (CPU backend memory) and its device twin of the same dtype and shape. */
typedef struct mp_gpu_pair {
    mp_tensor host;
    mp_tensor dev;
} mp_gpu_pair;

/* Both sides zeroed; the device side's guard set. */
mp_gpu_pair mp_gpu_pair_alloc(mp_dtype dt, int ndim, const int64_t *shape);

/* Both sides holding the same values: uniform in [lo, hi) rounded to dt, redrawn when the
 * rounded value is 0 (inputs are never zero, so a missing write cannot pass by luck). */
mp_gpu_pair mp_gpu_random(mp_dtype dt, int ndim, const int64_t *shape, mp_rng *r, double lo,
                          double hi);

/* An output: every byte of both sides 0xFF, a NaN in FP32, fp16 and bf16 alike, so an element
 * an op does not write fails every comparison below. */
mp_gpu_pair mp_gpu_poisoned(mp_dtype dt, int ndim, const int64_t *shape);

/* Sets every byte of both sides to 0xFF (as mp_gpu_poisoned). */
void mp_gpu_poison(mp_gpu_pair *p);

/* Copies the host side to the device side (after a test changed host values). */
void mp_gpu_upload(mp_gpu_pair *p);

/* Frees both sides and clears p (a cleared pair is ignored). */
void mp_gpu_pair_free(mp_gpu_pair *p);

/* The pair's host side, or NULL for a cleared (absent) pair; likewise the device side. For
 * ops with optional tensors (optimizer slots, the half copy). */
mp_tensor *mp_gpu_host(mp_gpu_pair *p);
mp_tensor *mp_gpu_dev(mp_gpu_pair *p);

/* The elements of a device tensor as doubles (mp_load), and its raw bytes; malloc'd, the
 * caller frees. */
double *mp_gpu_values(const mp_tensor *dev);
void *mp_gpu_bytes(const mp_tensor *dev);

/* Fails the test unless the device side of p equals its host side (the CPU op's result)
 * within |dev - host| <= atol + rtol |host| element by element, through assert_close, and its
 * guard is intact; the printf-style label (op, dtypes, case) is printed first when not. When
 * rtol > 0 (an allowance for rounding to neighbours) one ulp of the dtype's subnormals is added
 * to atol: there neighbours are an absolute 2^-24 apart in fp16, not a relative one (so an
 * expected fp16 0 then also accepts +-2^-24). */
void mp_gpu_check_impl(const mp_gpu_pair *p, double atol, double rtol, const char *file, int line,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define mp_gpu_check(p, atol, rtol, ...) \
    mp_gpu_check_impl((p), (atol), (rtol), __FILE__, __LINE__, __VA_ARGS__)

/* mp_gpu_check with an atol per element: |dev[i] - host[i]| <= atol[i] + rtol |host[i]|. */
void mp_gpu_check_each_impl(const mp_gpu_pair *p, const double *atol, double rtol,
                            const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
#define mp_gpu_check_each(p, atol, rtol, ...) \
    mp_gpu_check_each_impl((p), (atol), (rtol), __FILE__, __LINE__, __VA_ARGS__)

/* Fails the test unless the device tensor holds exactly the bytes of `want` (same dtype and
 * numel), except that two NaNs match whatever their payloads (dtype.h leaves payloads open).
 * mp_gpu_check_bits compares a pair's device side with its host side, and checks its guard. */
void mp_gpu_check_bytes_impl(const mp_tensor *dev, const void *want, const char *file, int line,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define mp_gpu_check_bytes(dev, want, ...) \
    mp_gpu_check_bytes_impl((dev), (want), __FILE__, __LINE__, __VA_ARGS__)
void mp_gpu_check_bits_impl(const mp_gpu_pair *p, const char *file, int line, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));
#define mp_gpu_check_bits(p, ...) mp_gpu_check_bits_impl((p), __FILE__, __LINE__, __VA_ARGS__)

/* rtol between two results that each backend rounds once from FP32 to dt: two nearly equal
 * FP32 values may round to neighbours, one ulp (2 mp_test_eps(dt)) apart. */
double mp_gpu_rtol(mp_dtype dt);

/* atol between two FP32 sums of k terms of magnitude <= mag taken in different orders: each is
 * within k * 4 * 2^-24 * mag of the exact sum (the bound test_ops.c uses), so the two are
 * within twice that of each other. */
double mp_gpu_atol(int64_t k, double mag);

#endif
