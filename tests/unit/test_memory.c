/* Byte accounting: the allocator's own counters for the cnn_bn preset (28x28x1 inputs, batch 64,
 * SGD with momentum) match the sizes the architecture implies, computed here by hand, at O0 and
 * O2; and O2 needs at most 0.55x O0's activation + weight + gradient bytes; peaks can be reset;
 * each block is counted at its place (the backend's memory as device, the rest as host); the
 * CPU backend's clock marks measure the time between them. */
#include "tests/util/test_util.h"

#include <string.h>
#include <time.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/optim.h"
#include "engine/presets.h"

#define BATCH 64

/* Parameters padded to 16 elements each, as the flat buffers lay them out. */
static int64_t padded(const int64_t *numel, int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += (numel[i] + 15) / 16 * 16;
    return s;
}

typedef struct usage {
    int64_t bytes[MP_MEM_NCAT];
} usage;

static usage build(mp_opt_level level, mp_model *m, mp_optimizer *o)
{
    usage before, after;
    for (int k = 0; k < MP_MEM_NCAT; k++)
        before.bytes[k] = mp_mem_current((mp_mem_cat)k);
    mp_layer_spec specs[MP_MAX_LAYERS];
    mp_preset_args pa = {0};
    int n = mp_preset_specs("cnn_bn", &pa, 10, specs);
    int64_t in[3] = {28, 28, 1};
    mp_amp_defaults d = mp_amp_level_defaults(level, MP_F16);
    mp_amp_policy amp = mp_amp_resolve(level, MP_F16, d.keep_batchnorm_fp32, d.master_weights,
                                       d.loss_scale, false);
    assert_int_equal(mp_model_build(m, mp_backend_cpu(), specs, n, in, 10, BATCH, &amp), MP_OK);
    mp_optim_args h = {.kind = MP_OPTIM_SGD, .momentum = 0.9};
    mp_optimizer_init(o, mp_backend_cpu(), &m->params, &h);
    for (int k = 0; k < MP_MEM_NCAT; k++)
        after.bytes[k] = mp_mem_current((mp_mem_cat)k) - before.bytes[k];
    return after;
}

static void test_counters_match_the_architecture(void **state)
{
    (void)state;
    /* conv1 32x3x3x1, conv2 64x3x3x32, fc1 3136x128 + 128, fc2 128x10 + 10 (convs have no bias);
     * bn1 32 + 32, bn2 64 + 64; BN buffers: 4 per channel (running mean/var, saved mean/invstd;
     * the copy of the running statistics a skipped step restores is workspace). */
    const int64_t weights[] = {288, 18432, 401408, 128, 1280, 10}, norm[] = {32, 32, 64, 64};
    int64_t wp = padded(weights, 6), np = padded(norm, 4), buffers = 4 * (32 + 64) * 4;
    /* Activations per sample: conv1, bn1, relu1 28x28x32; pool1 14x14x32; conv2, bn2, relu2
     * 14x14x64; pool2, flatten 7x7x64; fc1, relu3, dropout 128; fc2 10. */
    int64_t acts = 3 * 25088 + 6272 + 3 * 12544 + 2 * 3136 + 3 * 128 + 10;
    int64_t dbuf = 2 * 25088; /* two activation-gradient buffers of the widest activation */
    /* The planned arena (engine/plan.h): each ReLU writes over its input (bn1, bn2 and fc1's
     * outputs, which no backward reads), and the logits, read last by the loss, share bytes
     * with the gradient buffers, which backward writes first; everything else is live at
     * backward's first op. */
    int64_t planned = acts - 25088 - 12544 - 128 - 10 + dbuf;

    mp_model m;
    mp_optimizer o;
    usage u0 = build(MP_O0, &m, &o);
    assert_int_equal(u0.bytes[MP_MEM_WEIGHTS], (wp + np) * 4 + buffers);
    assert_int_equal(u0.bytes[MP_MEM_MASTER], 0);
    assert_int_equal(u0.bytes[MP_MEM_GRADS], (wp + np) * 4);
    assert_int_equal(u0.bytes[MP_MEM_OPTIM], (wp + np) * 4);
    assert_int_equal(u0.bytes[MP_MEM_ACTIVATIONS], planned * BATCH * 4);
    mp_optimizer_free(&o);
    mp_model_free(&m);

    usage u2 = build(MP_O2, &m, &o);
    assert_int_equal(u2.bytes[MP_MEM_WEIGHTS], wp * 2 + np * 4 + buffers); /* BN params FP32 */
    assert_int_equal(u2.bytes[MP_MEM_MASTER], wp * 4);
    assert_int_equal(u2.bytes[MP_MEM_GRADS], wp * 2 + np * 4);
    assert_int_equal(u2.bytes[MP_MEM_OPTIM], (wp + np) * 4);
    assert_int_equal(u2.bytes[MP_MEM_ACTIVATIONS], planned * BATCH * 2);
    mp_optimizer_free(&o);
    mp_model_free(&m);

    double awg0 = (double)(u0.bytes[MP_MEM_ACTIVATIONS] + u0.bytes[MP_MEM_WEIGHTS] +
                           u0.bytes[MP_MEM_GRADS]);
    double awg2 = (double)(u2.bytes[MP_MEM_ACTIVATIONS] + u2.bytes[MP_MEM_WEIGHTS] +
                           u2.bytes[MP_MEM_GRADS]);
    if (awg2 > 0.55 * awg0)
        fail_msg("O2 uses %.3f of O0's activation + weight + gradient bytes", awg2 / awg0);
    /* Everything was given back. */
    assert_int_equal(mp_mem_current(MP_MEM_ACTIVATIONS), 0);
    assert_int_equal(mp_mem_current(MP_MEM_WEIGHTS), 0);
}

/* mp_mem_reset_peaks starts every peak again from what is held: a block freed before it no
 * longer counts, one allocated after it does. */
static void test_reset_peaks(void **state)
{
    (void)state;
    int64_t held = mp_mem_current(MP_MEM_WORKSPACE);
    void *big = mp_alloc(1 << 20, MP_MEM_WORKSPACE);
    assert_true(mp_mem_peak(MP_MEM_WORKSPACE) >= held + (1 << 20));
    mp_free(big);
    mp_mem_reset_peaks();
    assert_int_equal(mp_mem_peak(MP_MEM_WORKSPACE), held);
    assert_int_equal(mp_mem_peak_total(), mp_mem_current(MP_MEM_WEIGHTS) +
                                              mp_mem_current(MP_MEM_MASTER) +
                                              mp_mem_current(MP_MEM_GRADS) +
                                              mp_mem_current(MP_MEM_OPTIM) +
                                              mp_mem_current(MP_MEM_ACTIVATIONS) +
                                              mp_mem_current(MP_MEM_DATA) + held);
    void *small = mp_alloc(4096, MP_MEM_WORKSPACE);
    assert_int_equal(mp_mem_peak(MP_MEM_WORKSPACE), held + 4096);
    mp_free(small);
    assert_int_equal(mp_mem_peak(MP_MEM_WORKSPACE), held + 4096);
}

static int64_t held_in_categories(void)
{
    int64_t s = 0;
    for (int c = 0; c < MP_MEM_NCAT; c++)
        s += mp_mem_current((mp_mem_cat)c);
    return s;
}

/* The backend's mem_alloc and its workspaces count as device memory, host_alloc and mp_alloc as
 * host memory (what a GPU would hold in each); the places add up to the categories; each place
 * has its own peak, which mp_mem_reset_peaks restarts. */
static void test_places(void **state)
{
    (void)state;
    const mp_ops *ops = mp_backend_cpu();
    int64_t dev = mp_mem_current_at(MP_MEM_DEVICE), host = mp_mem_current_at(MP_MEM_HOST);
    assert_int_equal(dev + host, held_in_categories());
    void *d = ops->mem_alloc(1 << 20, MP_MEM_ACTIVATIONS);
    void *h = ops->host_alloc(3 << 10, MP_MEM_DATA);
    void *p = mp_alloc(5 << 10, MP_MEM_WORKSPACE);
    assert_int_equal(mp_mem_current_at(MP_MEM_DEVICE), dev + (1 << 20));
    assert_int_equal(mp_mem_current_at(MP_MEM_HOST), host + (3 << 10) + (5 << 10));
    assert_int_equal(mp_mem_current_at(MP_MEM_DEVICE) + mp_mem_current_at(MP_MEM_HOST),
                     held_in_categories());
    assert_true(mp_mem_peak_at(MP_MEM_DEVICE) >= dev + (1 << 20));
    int64_t ws = mp_mem_current_at(MP_MEM_DEVICE);
    void *w = mp_cpu_workspace(MP_CPU_WS_N - 1, 7 << 10);
    assert_true(mp_mem_current_at(MP_MEM_DEVICE) >= ws + (7 << 10));
    ops->mem_free(d);
    ops->host_free(h);
    mp_free(p);
    (void)w;
    assert_int_equal(mp_mem_current_at(MP_MEM_HOST), host);
    mp_mem_reset_peaks();
    assert_int_equal(mp_mem_peak_at(MP_MEM_HOST), host);
    assert_int_equal(mp_mem_peak_at(MP_MEM_DEVICE), mp_mem_current_at(MP_MEM_DEVICE));
    assert_int_equal(mp_mem_peak_total(), held_in_categories());
}

/* Clock marks on the CPU: the time between two marks is the host's, at least the 20 ms slept
 * between them; a mark recorded again moves; an unrecorded mark is refused; waits are counted. */
static void test_marks(void **state)
{
    (void)state;
    const mp_ops *ops = mp_backend_cpu();
    void *a = NULL, *b = NULL;
    mp_ops_counters before, after;
    ops->counters(&before);
    assert_int_equal(ops->mark_record(&a), MP_OK);
    assert_non_null(a);
    nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    assert_int_equal(ops->mark_record(&b), MP_OK);
    double ms = -1.0;
    assert_int_equal(ops->mark_elapsed(a, b, &ms), MP_OK);
    assert_true(ms >= 20.0 && ms < 2000.0);
    void *kept = b;
    assert_int_equal(ops->mark_record(&b), MP_OK);
    assert_ptr_equal(b, kept);
    double later = -1.0;
    assert_int_equal(ops->mark_elapsed(a, b, &later), MP_OK);
    assert_true(later >= ms);
    ops->counters(&after);
    assert_int_equal(after.fence_waits - before.fence_waits, 2);
    assert_int_equal(ops->mark_elapsed(a, NULL, &ms), MP_EINTERNAL);
    assert_int_equal(ops->mem_used_bytes(), -1);
    ops->mark_free(a);
    ops->mark_free(b);
    ops->mark_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_counters_match_the_architecture),
                                       cmocka_unit_test(test_reset_peaks),
                                       cmocka_unit_test(test_places), cmocka_unit_test(test_marks)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
