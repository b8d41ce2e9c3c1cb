/* Every op of the backend under test against the CPU reference, from one table of cases
 * (op_table.h: op_table_dense.c, op_table_norm.c, op_table_dnn.c, op_table_attn.c), one CMocka
 * test per case, after the backend's memory test. The backend under test is chosen at start:
 *   test_op_table [cuda]          CUDA (ctest test_op_table, label gpu; exit 77, skipped,
 *                                 without a usable GPU)
 *   test_op_table cpu-staged      the staged CPU backend (test_op_table_staged, label unit):
 *                                 host_memory false, so the table and its harness run through
 *                                 mem_alloc and the copies exactly as on a GPU, where no GPU is
 *   test_op_table cpu-staged --sabotage   (test_op_table_sabotage, label unit) the staged
 *                                 backend with four ops broken on purpose (a missing write, a
 *                                 write past the end, a wrong bit, tiled attention 1% off):
 *                                 passes only when the harness fails cases of each, so a
 *                                 harness (or a bound) that cannot fail is caught
 * Options: --list prints the cases; a last argument PATTERN runs only the tests whose names
 * match it (CMocka's filter: '*' and '?' wildcards). */
#include "tests/gpu/op_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const mp_ops *op_ref, *op_uut;
int op_side;

static op_case *table;
static int ncases, cap;

void op_add(op_case c, const char *op, int ndt, int ndim, const char *fmt, ...)
{
    if (ncases == cap) {
        cap = cap ? 2 * cap : 256;
        table = realloc(table, (size_t)cap * sizeof *table);
        if (!table)
            abort();
    }
    size_t len = (size_t)snprintf(c.name, sizeof c.name, "%s ", op);
    for (int i = 0; i < ndt && len < sizeof c.name; i++)
        len += (size_t)snprintf(c.name + len, sizeof c.name - len, "%s%s", i ? "." : "",
                                mp_dtype_name(c.dt[i]));
    for (int i = 0; i < ndim && len < sizeof c.name; i++)
        len += (size_t)snprintf(c.name + len, sizeof c.name - len, "%s%lld", i ? "x" : " ",
                                (long long)c.shape[i]);
    if (len + 1 < sizeof c.name) {
        c.name[len++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c.name + len, sizeof c.name - len, fmt, ap);
        va_end(ap);
    }
    len = strlen(c.name);
    while (len > 0 && c.name[len - 1] == ' ')
        c.name[--len] = '\0';
    c.seed = (uint64_t)ncases;
    table[ncases++] = c;
}

void op_status(const op_case *c, const char *fn, mp_status ref, mp_status uut)
{
    mp_status want = c->refused ? MP_EINTERNAL : MP_OK;
    if (ref != want || uut != want)
        fail_msg("%s: %s returned %d on the reference and %d on %s, want %d (%s)", c->name, fn,
                 (int)ref, (int)uut, op_uut->name, (int)want, mp_error_message());
    mp_error_clear();
}

void op_free(mp_gpu_pair *const *pairs, int n)
{
    for (int i = 0; i < n; i++)
        mp_gpu_pair_free(pairs[i]);
}

double op_hv(const mp_gpu_pair *p, int64_t i)
{
    return mp_load(p->host.data, p->host.dtype, (size_t)i);
}

double *op_zeros(int64_t n)
{
    double *a = calloc((size_t)n + 1, sizeof *a);
    assert_non_null(a);
    return a;
}

static void run_case(void **state)
{
    const op_case *c = *state;
    mp_gpu_conv_plans(MP_CONV_LAYOUT_AUTO, false); /* the default, whatever a failed case left */
    c->run(c);
}

/* The backend's memory: blocks come zeroed and counted under their category, exactly their
 * bytes, and are uncounted when freed, also across many allocations and frees that churn the
 * backend's pointer table; copy_in, copy within the backend at odd byte offsets and copy_out
 * move bytes unchanged and touch nothing else; host_alloc's blocks (pinned on CUDA) are zeroed,
 * counted and copied from. Out of memory is NULL on a device (the CPU, whose free memory is
 * unknown, aborts as mp_alloc does, so that part is the device's alone). */
static void test_memory(void **state)
{
    (void)state;
    const mp_ops *gpu = op_uut;
    assert_false(gpu->host_memory);
    const int64_t base = mp_mem_current(MP_MEM_DATA);
    const size_t sizes[3] = {0, 4099, (size_t)1 << 20};
    unsigned char *blk[3];
    for (int i = 0; i < 3; i++) {
        blk[i] = gpu->mem_alloc(sizes[i], MP_MEM_DATA);
        assert_non_null(blk[i]);
    }
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base + (int64_t)(sizes[1] + sizes[2]));
    size_t n = sizes[2], m = sizes[1];
    unsigned char *host = malloc(n), *back = malloc(n);
    assert_non_null(host);
    assert_non_null(back);
    memset(back, 0xab, n);
    mp_gpu_get(back, blk[2], n);
    for (size_t i = 0; i < n; i++)
        if (back[i] != 0)
            fail_msg("mem_alloc: byte %zu of a new block is %d, not 0", i, back[i]);
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned char)(i * 131 + 7);
    mp_gpu_put(blk[2], host, n);
    assert_int_equal(gpu->copy(blk[1], blk[2] + 3, m - 1), MP_OK);
    mp_gpu_get(back, blk[1], m);
    for (size_t i = 0; i + 1 < m; i++)
        if (back[i] != host[i + 3])
            fail_msg("copy: byte %zu is %d, want %d", i, back[i], host[i + 3]);
    assert_int_equal(back[m - 1], 0); /* past the copy: still the zero of mem_alloc */
    mp_gpu_get(back, blk[2], n);
    assert_memory_equal(back, host, n);
    free(host);
    free(back);
    for (int i = 0; i < 3; i++)
        gpu->mem_free(blk[i]);
    gpu->mem_free(NULL);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    if (gpu->mem_free_bytes() >= 0) { /* out of device memory: NULL, nothing counted, usable */
        assert_null(gpu->mem_alloc((size_t)1 << 50, MP_MEM_DATA));
        assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
        assert_int_equal(gpu->sync(), MP_OK);
    }
    enum { LIVE = 8, ROUNDS = 3000 };
    void *ring[LIVE] = {NULL};
    int64_t held = 0;
    for (int r = 0; r < ROUNDS; r++) {
        if (ring[r % LIVE]) {
            gpu->mem_free(ring[r % LIVE]);
            held -= 64 + (r - LIVE);
        }
        ring[r % LIVE] = gpu->mem_alloc((size_t)(64 + r), MP_MEM_DATA);
        assert_non_null(ring[r % LIVE]);
        held += 64 + r;
        assert_int_equal(mp_mem_current(MP_MEM_DATA), base + held);
    }
    for (int i = 0; i < LIVE; i++)
        gpu->mem_free(ring[i]);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    enum { PIN = 1 << 16 };
    unsigned char *pin = gpu->host_alloc(PIN, MP_MEM_DATA), *dev = gpu->mem_alloc(PIN, MP_MEM_DATA);
    unsigned char *out = malloc(PIN);
    assert_non_null(pin);
    assert_non_null(dev);
    assert_non_null(out);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base + 2 * PIN);
    for (size_t i = 0; i < PIN; i++)
        if (pin[i] != 0)
            fail_msg("host_alloc: byte %zu of a new pinned block is %d, not 0", i, pin[i]);
    for (size_t i = 0; i < PIN; i++)
        pin[i] = (unsigned char)(i * 29 + 3);
    assert_int_equal(gpu->copy_in(dev, pin, PIN), MP_OK);
    mp_gpu_get(out, dev, PIN);
    assert_memory_equal(out, pin, PIN);
    gpu->host_free(pin);
    gpu->mem_free(dev);
    free(out);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
}

/* The sabotaged backend (--sabotage): the staged CPU backend with four ops broken, one for
 * each kind of error the harness must see, and one for the tiled attention's bounds. */
static const mp_ops *intact;

static mp_status relu_missing_write(const mp_tensor *x, mp_tensor *y)
{
    int64_t n = mp_tensor_numel(x) - 1; /* the last element is not written */
    if (n < 0)
        return intact->relu_forward(x, y);
    mp_tensor xv = mp_tensor_view(x->data, x->dtype, 1, &n);
    mp_tensor yv = mp_tensor_view(y->data, y->dtype, 1, &n);
    return intact->relu_forward(&xv, &yv);
}

static mp_status fill_past_end(mp_tensor *x, double value)
{
    int64_t one = 1; /* and one element after the last */
    mp_tensor past = mp_tensor_view((char *)x->data + mp_tensor_bytes(x), x->dtype, 1, &one);
    MP_TRY(intact->fill(x, value));
    return intact->fill(&past, value);
}

static mp_status convert_wrong_bit(const mp_tensor *src, mp_tensor *dst)
{
    MP_TRY(intact->convert(src, dst));
    int64_t n = mp_tensor_numel(dst);
    if (n == 0)
        return MP_OK;
    unsigned char byte; /* the lowest bit of the middle element flipped */
    char *at = (char *)dst->data + (size_t)(n / 2) * mp_dtype_size(dst->dtype);
    MP_TRY(intact->copy_out(&byte, at, 1));
    byte ^= 1;
    return intact->copy_in(at, &byte, 1);
}

/* The tiled attention's middle output 1% off (what a lost rescale or a skipped key tile does to a
 * row): the bounds of op_table_attn.c must be tighter than that. */
static mp_status flash_one_percent(const mp_attn_desc *d, const mp_tensor *qkv, mp_tensor *stats,
                                   mp_tensor *out)
{
    MP_TRY(intact->attention_flash_forward(d, qkv, stats, out));
    int64_t n = mp_tensor_numel(out);
    if (n == 0)
        return MP_OK;
    double v;
    char *at = (char *)out->data + (size_t)(n / 2) * mp_dtype_size(out->dtype);
    MP_TRY(intact->copy_out(&v, at, mp_dtype_size(out->dtype)));
    mp_store(&v, out->dtype, 0, 1.01 * mp_load(&v, out->dtype, 0) + 0x1p-10);
    return intact->copy_in(at, &v, mp_dtype_size(out->dtype));
}

/* Runs the cases of each sabotaged op; returns 0 when every sabotage failed at least one. */
static int sabotage(const char *pattern)
{
    static mp_ops broken;
    intact = op_uut;
    broken = *intact;
    broken.name = "cpu-staged (sabotaged)";
    broken.relu_forward = relu_missing_write;
    broken.fill = fill_past_end;
    broken.convert = convert_wrong_bit;
    broken.attention_flash_forward = flash_one_percent;
    op_uut = &broken;
    if (pattern)
        cmocka_set_test_filter(pattern);
    static const char *const ops[4] = {"relu_forward ", "fill ", "convert ",
                                       "attention_flash_forward "};
    struct CMUnitTest *tests = calloc((size_t)ncases + 1, sizeof *tests);
    if (!tests)
        return 1;
    int missed = 0;
    for (int k = 0; k < 4; k++) {
        size_t n = 0;
        for (int i = 0; i < ncases; i++)
            if (strncmp(table[i].name, ops[k], strlen(ops[k])) == 0)
                tests[n++] = (struct CMUnitTest){table[i].name, run_case, NULL, NULL, &table[i]};
        int failed = _cmocka_run_group_tests(ops[k], tests, n, NULL, NULL);
        printf("sabotage: %d of %zu %scases failed%s\n", failed, n, ops[k],
               failed ? "" : ": the harness missed the broken op");
        missed += failed == 0;
    }
    free(tests);
    return missed ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *backend = "cuda", *pattern = NULL;
    bool list = false, sabotaged = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "cuda") == 0 || strcmp(argv[i], "cpu-staged") == 0)
            backend = argv[i];
        else if (strcmp(argv[i], "--list") == 0)
            list = true;
        else if (strcmp(argv[i], "--sabotage") == 0)
            sabotaged = true;
        else if (i == argc - 1 && argv[i][0] != '-')
            pattern = argv[i];
        else {
            fprintf(stderr, "usage: %s [cuda | cpu-staged] [--list] [--sabotage] [PATTERN]\n",
                    argv[0]);
            return 2;
        }
    }
    op_cases_dense();
    op_cases_norm();
    op_cases_dnn();
    op_cases_attn();
    op_cases_graph();
    if (list) {
        for (int i = 0; i < ncases; i++)
            printf("%s\n", table[i].name);
        printf("%d cases\n", ncases);
        return 0;
    }
    op_ref = mp_backend_cpu();
    if (strcmp(backend, "cuda") == 0) {
        op_uut = mp_gpu_or_skip();
    } else {
        op_uut = mp_backend_cpu_staged();
        mp_gpu_use(op_uut);
    }
    if (sabotaged) {
        if (strcmp(backend, "cpu-staged") != 0) {
            fprintf(stderr, "--sabotage breaks the staged CPU backend: use cpu-staged\n");
            return 2;
        }
        int rc = sabotage(pattern);
        free(table);
        return rc;
    }
    struct CMUnitTest *tests = calloc((size_t)ncases + 1, sizeof *tests);
    if (!tests)
        return 1;
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_memory);
    for (int i = 0; i < ncases; i++)
        tests[i + 1] = (struct CMUnitTest){table[i].name, run_case, NULL, NULL, &table[i]};
    if (pattern)
        cmocka_set_test_filter(pattern);
    printf("op table: %d cases on %s against %s\n", ncases, op_uut->name, op_ref->name);
    int rc = _cmocka_run_group_tests(op_uut->name, tests, (size_t)ncases + 1, NULL, NULL);
    free(tests);
    free(table);
    return rc;
}
