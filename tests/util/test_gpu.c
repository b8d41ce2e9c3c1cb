/* Implementation of the GPU test helpers (test_gpu.h). */
#include "tests/util/test_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const mp_dtype mp_gpu_dtypes[MP_GPU_NDTYPES] = {MP_F32, MP_F16, MP_BF16};

static const mp_ops *gpu_table;

const mp_ops *mp_gpu_or_skip(void)
{
    mp_backend_options o = {.device = 0, .allow_tf32 = false,
                            .conv_workspace_bytes = (int64_t)256 << 20};
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
    gpu_table = ops;
    return ops;
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
    p.dev = mp_tensor_view(mp_gpu_alloc((size_t)mp_tensor_bytes(&p.host)), dt, ndim, shape);
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

void mp_gpu_check_impl(const mp_gpu_pair *p, double atol, double rtol, const char *file, int line,
                       const char *fmt, ...)
{
    size_t n = (size_t)mp_tensor_numel(&p->host), bad = n;
    assert_int_equal(p->dev.dtype, p->host.dtype);
    double *got = mp_gpu_values(&p->dev), g = 0, w = 0;
    for (size_t i = 0; i < n && bad == n; i++) {
        w = mp_load(p->host.data, p->host.dtype, i);
        g = got[i];
        if (!(fabs(g - w) <= atol + rtol * fabs(w)))
            bad = i;
    }
    free(got); /* before assert_close fails (cmocka leaves by longjmp) */
    if (bad == n)
        return;
    va_list ap;
    va_start(ap, fmt);
    print_label(file, line, bad, n, fmt, ap);
    va_end(ap);
    mp_assert_close_impl(&g, &w, 1, atol, rtol, file, line);
}

void mp_gpu_check_bytes_impl(const mp_tensor *dev, const void *want, const char *file, int line,
                             const char *fmt, ...)
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
    va_list ap;
    va_start(ap, fmt);
    print_label(file, line, bad, n, fmt, ap);
    va_end(ap);
    fail_msg("%s:%d: %s element: got %.10g, want %.10g (bitwise)", file, line,
             mp_dtype_name(dev->dtype), g, v);
}

double mp_gpu_rtol(mp_dtype dt) { return 2 * mp_test_eps(dt); }

double mp_gpu_atol(int64_t k, double mag) { return 2 * (double)k * 4 * 0x1p-24 * mag; }
