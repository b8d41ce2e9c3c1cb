/* Implementation of the GPU test helpers (test_gpu.h). */
#include "tests/util/test_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const mp_dtype mp_gpu_dtypes[MP_GPU_NDTYPES] = {MP_F32, MP_F16, MP_BF16};

static const mp_ops *gpu_table;
static const mp_ops *gpu_cuda; /* the CUDA table mp_gpu_or_skip opened, with gpu_options */
static mp_backend_options gpu_options;

const mp_ops *mp_gpu_or_skip(void)
{
    mp_backend_options o = {.device = 0, .allow_tf32 = false,
                            .conv_workspace_bytes = (int64_t)256 << 20};
    gpu_options = o;
    char why[512] = "";
    const mp_ops *ops = NULL;
    mp_status st = mp_backend_open("cuda", &o, &ops, why, sizeof why);
    const char *reason = mp_error_message()[0] ? mp_error_message() : why;
    if (st == MP_EUSAGE) {
        printf("skipped: %s\n", reason[0] ? reason : "no CUDA backend");
        exit(77);
    }
    if (st != MP_OK || !ops) {
        fprintf(stderr, "cannot open the CUDA backend (status %d): %s\n", (int)st, reason);
        exit(1);
    }
    gpu_table = gpu_cuda = ops;
    return ops;
}

void mp_gpu_use(const mp_ops *ops) { gpu_table = ops; }

void mp_gpu_conv_plans(mp_conv_layout layout, bool timed)
{
    if (!gpu_cuda || gpu_table != gpu_cuda)
        return;
    gpu_options.conv_layout = layout;
    gpu_options.conv_timed = timed;
    char why[512] = "";
    const mp_ops *ops = NULL;
    if (mp_backend_open("cuda", &gpu_options, &ops, why, sizeof why) != MP_OK || ops != gpu_cuda)
        fail_msg("reopening the CUDA backend with conv_layout %d, conv_timed %d: %s", (int)layout,
                 (int)timed,
                 mp_error_message()[0] ? mp_error_message() : why);
}

void *mp_gpu_alloc(size_t bytes)
{
    void *p = gpu_table->mem_alloc(bytes ? bytes : 1, MP_MEM_WORKSPACE);
    if (!p)
        fail_msg("device out of memory allocating %zu bytes", bytes);
    return p;
}

void mp_gpu_put(void *dev, const void *host, size_t bytes)
{
    if (gpu_table->copy_in(dev, host, bytes) != MP_OK)
        fail_msg("copy_in of %zu bytes failed: %s", bytes, mp_error_message());
}

void mp_gpu_get(void *host, const void *dev, size_t bytes)
{
    if (gpu_table->copy_out(host, dev, bytes) != MP_OK)
        fail_msg("copy_out of %zu bytes failed: %s", bytes, mp_error_message());
}

mp_gpu_pair mp_gpu_pair_alloc(mp_dtype dt, int ndim, const int64_t *shape)
{
    mp_gpu_pair p;
    p.host = mp_tensor_alloc(dt, ndim, shape, MP_MEM_WORKSPACE);
    size_t bytes = (size_t)mp_tensor_bytes(&p.host);
    p.dev = mp_tensor_view(mp_gpu_alloc(bytes + MP_GPU_GUARD), dt, ndim, shape);
    unsigned char guard[MP_GPU_GUARD];
    memset(guard, MP_GPU_GUARD_BYTE, sizeof guard);
    mp_gpu_put((char *)p.dev.data + bytes, guard, sizeof guard);
    return p;
}

mp_gpu_pair mp_gpu_random(mp_dtype dt, int ndim, const int64_t *shape, mp_rng *r, double lo,
                          double hi)
{
    mp_gpu_pair p = mp_gpu_pair_alloc(dt, ndim, shape);
    for (int64_t i = 0; i < mp_tensor_numel(&p.host); i++)
        do
            mp_store(p.host.data, dt, (size_t)i, lo + (hi - lo) * mp_rng_uniform(r));
        while (mp_load(p.host.data, dt, (size_t)i) == 0);
    mp_gpu_upload(&p);
    return p;
}

void mp_gpu_poison(mp_gpu_pair *p)
{
    memset(p->host.data, 0xff, (size_t)mp_tensor_bytes(&p->host));
    mp_gpu_upload(p);
}

mp_gpu_pair mp_gpu_poisoned(mp_dtype dt, int ndim, const int64_t *shape)
{
    mp_gpu_pair p = mp_gpu_pair_alloc(dt, ndim, shape);
    mp_gpu_poison(&p);
    return p;
}

void mp_gpu_upload(mp_gpu_pair *p)
{
    mp_gpu_put(p->dev.data, p->host.data, (size_t)mp_tensor_bytes(&p->host));
}

void mp_gpu_pair_free(mp_gpu_pair *p)
{
    if (p->host.data)
        mp_tensor_free(&p->host);
    if (p->dev.data)
        gpu_table->mem_free(p->dev.data);
    memset(p, 0, sizeof *p);
}

mp_tensor *mp_gpu_host(mp_gpu_pair *p) { return p->host.data ? &p->host : NULL; }

mp_tensor *mp_gpu_dev(mp_gpu_pair *p) { return p->dev.data ? &p->dev : NULL; }

void *mp_gpu_bytes(const mp_tensor *dev)
{
    size_t bytes = (size_t)mp_tensor_bytes(dev);
    void *b = malloc(bytes ? bytes : 1);
    assert_non_null(b);
    mp_gpu_get(b, dev->data, bytes);
    return b;
}

double *mp_gpu_values(const mp_tensor *dev)
{
    size_t n = (size_t)mp_tensor_numel(dev);
    void *b = mp_gpu_bytes(dev);
    double *v = malloc((n ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = mp_load(b, dev->dtype, i);
    free(b);
    return v;
}

/* Prints "file:line: <label>: element i ..." through cmocka before the failure it announces. */
__attribute__((format(printf, 5, 0))) static void print_label(const char *file, int line,
                                                               size_t i, size_t n,
                                                               const char *fmt, va_list ap)
{
    char label[512];
    vsnprintf(label, sizeof label, fmt, ap);
    print_error("%s:%d: %s: the device result differs from the reference at element %zu of "
                "%zu\n",
                file, line, label, i, n);
}

/* Fails the test, with the label, when a byte of the guard after p's device side changed. */
__attribute__((format(printf, 4, 0))) static void check_guard(const mp_gpu_pair *p,
                                                               const char *file, int line,
                                                               const char *fmt, va_list ap)
{
    size_t bytes = (size_t)mp_tensor_bytes(&p->dev);
    unsigned char guard[MP_GPU_GUARD];
    mp_gpu_get(guard, (const char *)p->dev.data + bytes, sizeof guard);
    for (size_t i = 0; i < sizeof guard; i++)
        if (guard[i] != MP_GPU_GUARD_BYTE) {
            char label[512];
            vsnprintf(label, sizeof label, fmt, ap);
            fail_msg("%s:%d: %s: byte %zu past the end of the device result (%zu bytes) was "
                     "written: 0x%02x",
                     file, line, label, i, bytes, guard[i]);
        }
}

/* The spacing of dt's subnormal numbers (its smallest positive value). */
static double subnormal_ulp(mp_dtype dt)
{
    switch (dt) {
    case MP_F16: return 0x1p-24;
    case MP_BF16: return 0x1p-133;
    case MP_F32: return 0x1p-149;
    case MP_F64: break;
    }
    return 0x1p-1074;
}

/* mp_gpu_check with atol_each[i] (or atol when atol_each is NULL) as element i's atol. A
 * rounding allowance (rtol > 0) also allows one ulp of dt's subnormals: two results rounded
 * there are an absolute subnormal_ulp apart, which rtol |host| does not cover. */
__attribute__((format(printf, 7, 0))) static void check_close(const mp_gpu_pair *p, double atol,
                                                               const double *atol_each,
                                                               double rtol, const char *file,
                                                               int line, const char *fmt,
                                                               va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    check_guard(p, file, line, fmt, ap2);
    va_end(ap2);
    size_t n = (size_t)mp_tensor_numel(&p->host), bad = n;
    assert_int_equal(p->dev.dtype, p->host.dtype);
    double *got = mp_gpu_values(&p->dev), g = 0, w = 0, a = atol;
    const double sub = rtol > 0 ? subnormal_ulp(p->dev.dtype) : 0;
    for (size_t i = 0; i < n && bad == n; i++) {
        w = mp_load(p->host.data, p->host.dtype, i);
        g = got[i];
        a = (atol_each ? atol_each[i] : atol) + sub;
        if (!(fabs(g - w) <= a + rtol * fabs(w)))
            bad = i;
    }
    free(got); /* before assert_close fails (cmocka leaves by longjmp) */
    if (bad == n)
        return;
    print_label(file, line, bad, n, fmt, ap);
    mp_assert_close_impl(&g, &w, 1, a, rtol, file, line);
}

void mp_gpu_check_impl(const mp_gpu_pair *p, double atol, double rtol, const char *file, int line,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_close(p, atol, NULL, rtol, file, line, fmt, ap);
    va_end(ap);
}

void mp_gpu_check_each_impl(const mp_gpu_pair *p, const double *atol, double rtol,
                            const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_close(p, 0, atol, rtol, file, line, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 5, 0))) static void check_bytes(const mp_tensor *dev,
                                                               const void *want,
                                                               const char *file, int line,
                                                               const char *fmt, va_list ap)
{
    size_t n = (size_t)mp_tensor_numel(dev), es = mp_dtype_size(dev->dtype);
    unsigned char *got = mp_gpu_bytes(dev);
    const unsigned char *w = want;
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++) {
        if (memcmp(got + i * es, w + i * es, es) == 0)
            continue;
        if (!(isnan(mp_load(got, dev->dtype, i)) && isnan(mp_load(want, dev->dtype, i))))
            bad = i;
    }
    double g = bad < n ? mp_load(got, dev->dtype, bad) : 0;
    double v = bad < n ? mp_load(want, dev->dtype, bad) : 0;
    free(got);
    if (bad == n)
        return;
    print_label(file, line, bad, n, fmt, ap);
    fail_msg("%s:%d: %s element: got %.10g, want %.10g (bitwise)", file, line,
             mp_dtype_name(dev->dtype), g, v);
}

void mp_gpu_check_bytes_impl(const mp_tensor *dev, const void *want, const char *file, int line,
                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_bytes(dev, want, file, line, fmt, ap);
    va_end(ap);
}

void mp_gpu_check_bits_impl(const mp_gpu_pair *p, const char *file, int line, const char *fmt,
                            ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_guard(p, file, line, fmt, ap);
    va_end(ap);
    va_start(ap, fmt);
    check_bytes(&p->dev, p->host.data, file, line, fmt, ap);
    va_end(ap);
}

double mp_gpu_rtol(mp_dtype dt) { return 2 * mp_test_eps(dt); }

double mp_gpu_atol(int64_t k, double mag) { return 2 * (double)k * 4 * 0x1p-24 * mag; }
