/* Implementation of the shared test helpers. */
#include "tests/util/test_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

void mp_assert_close_impl(const double *a, const double *ref, size_t n, double atol, double rtol,
                          const char *file, int line)
{
    for (size_t i = 0; i < n; i++) {
        double err = fabs(a[i] - ref[i]);
        if (!(err <= atol + rtol * fabs(ref[i]))) {
            fail_msg("%s:%d: element %zu: got %.10g, want %.10g (|diff| %.3g > atol %.3g + "
                     "rtol %.3g * |want|)",
                     file, line, i, a[i], ref[i], err, atol, rtol);
        }
    }
}

double mp_test_eps(mp_dtype dt)
{
    switch (dt) {
    case MP_F16: return 0x1p-11;
    case MP_BF16: return 0x1p-8;
    case MP_F32: return 0x1p-24;
    default: return 0x1p-53;
    }
}

const char *mp_test_dir(const char *name)
{
    static char path[1024];
    const char *base = getenv("MPDIST_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0755);
    snprintf(path, sizeof path, "%s/%s.%d", base, name, (int)getpid());
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0 || (mkdir(path, 0755) != 0 && errno != EEXIST))
        fail_msg("cannot create test directory %s", path);
    return path;
}

void mp_test_write_file(const char *path, const void *data, size_t len, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f || (len && gzwrite(f, data, (unsigned)len) != (int)len) || gzclose(f) != Z_OK)
            fail_msg("cannot write %s", path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        fail_msg("cannot write %s", path);
}

int mp_test_run(const char *cmd, char *out, size_t cap)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t used = 0;
    out[0] = '\0';
    size_t got;
    char buf[1024];
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
        size_t take = got < cap - 1 - used ? got : cap - 1 - used;
        memcpy(out + used, buf, take);
        used += take;
    }
    out[used] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

mp_tensor mp_test_rand(mp_dtype dt, int ndim, const int64_t *shape, mp_rng *r, double lo,
                       double hi)
{
    mp_tensor t = mp_tensor_alloc(dt, ndim, shape, MP_MEM_WORKSPACE);
    for (int64_t i = 0; r && i < mp_tensor_numel(&t); i++)
        mp_store(t.data, dt, (size_t)i, lo + (hi - lo) * mp_rng_uniform(r));
    return t;
}

double mp_test_max_abs_diff(const double *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

void mp_test_read_losses(const char *path, double *loss, int n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int k = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"type\":\"step\"")) {
            const char *p = strstr(line, "\"loss\":");
            assert_non_null(p);
            assert_true(k < n);
            loss[k++] = strtod(p + 7, NULL);
        }
    fclose(f);
    assert_int_equal(k, n);
}

void mp_test_expect_load_fail(mp_status got, mp_status code, const mp_dataset *d,
                              int64_t mem_before, const char *const *want, int n)
{
    assert_int_equal(got, code);
    const char *msg = mp_error_message();
    assert_null(strchr(msg, '\n'));
    for (int i = 0; i < n; i++)
        if (want[i] && !strstr(msg, want[i]))
            fail_msg("message \"%s\" lacks \"%s\"", msg, want[i]);
    mp_dataset zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(d, &zero, sizeof *d);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), mem_before);
}
