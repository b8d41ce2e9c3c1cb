/* The CUDA backend's fused optimizer step and loss-scaling ops against the CPU backend.
 * optim_step must be BITWISE equal to the CPU's (both run engine/optim_rule.h's operations in
 * the same order, without FMA contraction): SGD, SGD with momentum (its first step and later
 * ones), Nesterov, Adam and AdamW, on FP32 masters with an fp16 or bf16 gradient and model copy,
 * FP32 parameters with FP32 gradients, and half parameters (O3); with the host's step count
 * (st NULL) and with an mp_amp_state in device memory (loss scale, step count, clipping from
 * st->sumsq); a step whose st->found_inf is set leaves every device buffer bitwise unchanged.
 * amp_check agrees on found_inf exactly and on sumsq up to the FP64 summation order, for FP32,
 * fp16 and bf16 gradients with inf, NaN and FP32 overflow; amp_update gives bitwise the CPU's
 * state over a sequence of overflows that exercises hysteresis, backoff to the floor, growth
 * to the ceiling, the consecutive-skip count and the margin rule; amp_revert restores a skipped
 * step's buffers. Skipped (exit 77) without a usable GPU. */
#include "tests/util/test_gpu.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const mp_ops *gpu, *cpu;

#define NAME(dt) mp_dtype_name(dt)

static const char *const kind_names[] = {"sgd", "sgd momentum", "nesterov", "adam", "adamw"};
static const mp_optim_args kinds[] = {
    {.kind = MP_OPTIM_SGD, .lr = 0.1, .weight_decay = 0.01},
    {.kind = MP_OPTIM_SGD, .lr = 0.1, .weight_decay = 0.01, .momentum = 0.9, .dampening = 0.1},
    {.kind = MP_OPTIM_SGD, .lr = 0.1, .weight_decay = 0.01, .momentum = 0.9, .nesterov = true},
    {.kind = MP_OPTIM_ADAM, .lr = 1e-3, .weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999,
     .eps = 1e-8},
    {.kind = MP_OPTIM_ADAMW, .lr = 1e-3, .weight_decay = 0.1, .beta1 = 0.8, .beta2 = 0.99,
     .eps = 1e-6},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* Parameter storage: param's dtype, the model copy's (MP_F64: none) and the gradient's. */
typedef struct layout {
    mp_dtype param, copy, grad;
} layout;

static const layout layouts[] = {
    {MP_F32, MP_F16, MP_F16},   /* O2 fp16: FP32 masters */
    {MP_F32, MP_BF16, MP_BF16}, /* O2 bf16 */
    {MP_F32, MP_F64, MP_F32},   /* O0: FP32 parameters and gradients */
    {MP_F16, MP_F64, MP_F16},   /* O3: half parameters, FP32 arithmetic */
    {MP_BF16, MP_F64, MP_BF16},
};
#define NLAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

enum { N = 4099 }; /* more than one of the CPU's blocks, and no multiple of a warp */

/* One flat parameter group on both sides; absent tensors are cleared pairs. */
typedef struct group {
    mp_gpu_pair param, copy, grad, s1, s2;
} group;

static void group_init(group *g, const layout *l, const mp_optim_args *a, mp_rng *r)
{
    int64_t n = N;
    memset(g, 0, sizeof *g);
    g->param = mp_gpu_random(l->param, 1, &n, r, -1, 1);
    if (l->copy != MP_F64) {
        g->copy = mp_gpu_pair_alloc(l->copy, 1, &n);
        mp_convert(g->copy.host.data, l->copy, g->param.host.data, l->param, N);
        mp_gpu_upload(&g->copy);
    }
    g->grad = mp_gpu_random(l->grad, 1, &n, r, -1, 1);
    bool adam = a->kind != MP_OPTIM_SGD;
    if (adam) /* the moments start at zero, as the optimizer allocates them */
        g->s1 = mp_gpu_pair_alloc(MP_F32, 1, &n);
    else if (a->momentum != 0) /* not read at step 1: the buffer starts as the gradient */
        g->s1 = mp_gpu_poisoned(MP_F32, 1, &n);
    if (adam)
        g->s2 = mp_gpu_pair_alloc(MP_F32, 1, &n);
}

static void group_free(group *g)
{
    mp_gpu_pair *all[] = {&g->param, &g->copy, &g->grad, &g->s1, &g->s2};
    for (int i = 0; i < 5; i++)
        mp_gpu_pair_free(all[i]);
}

/* One step on both sides; hs is the host's state and ds its device copy (NULL: none). */
static void group_step(group *g, const mp_optim_args *a, const mp_amp_state *hs,
                       const mp_amp_state *ds)
{
    assert_int_equal(cpu->optim_step(a, hs, &g->param.host, mp_gpu_host(&g->copy), &g->grad.host,
                                     mp_gpu_host(&g->s1), mp_gpu_host(&g->s2)),
                     MP_OK);
    assert_int_equal(gpu->optim_step(a, ds, &g->param.dev, mp_gpu_dev(&g->copy), &g->grad.dev,
                                     mp_gpu_dev(&g->s1), mp_gpu_dev(&g->s2)),
                     MP_OK);
}

/* Every present buffer of the device equal to the CPU's, bit for bit. */
static void group_check(group *g, const char *what)
{
    const char *names[] = {"param", "copy", "slot1", "slot2"};
    mp_gpu_pair *all[] = {&g->param, &g->copy, &g->s1, &g->s2};
    for (int i = 0; i < 4; i++)
        if (all[i]->host.data)
            mp_gpu_check_bits(all[i], "%s: %s", what, names[i]);
}

/* Steps 1 to 4 with fresh gradients each time. With `amp` the state lives in device memory:
 * scale 1024, step count st->steps + 1 (args.step is set to a wrong 1000 that must be
 * ignored), clipping to max_norm from a given st->sumsq (norm 20 > 5 clips, 2 < 5 does not);
 * then a fifth step with st->found_inf set and inf and NaN in the gradient must change
 * nothing on the device. */
static void run(int kind, int lay, bool amp, double sumsq)
{
    mp_optim_args a = kinds[kind];
    const layout *l = &layouts[lay];
    mp_rng r;
    mp_rng_seed(&r, 301, (uint64_t)(kind * 64 + lay * 4 + amp * 2 + (sumsq > 100)));
    group g;
    group_init(&g, l, &a, &r);
    mp_amp_state hs = {.scaler = {.scale = 1024, .hysteresis_left = 1}, .sumsq = sumsq};
    mp_amp_state *ds = amp ? mp_gpu_alloc(sizeof hs) : NULL;
    a.grad_scale = amp ? 0.5 : 1.0 / 1024;
    a.max_norm = amp ? 5.0 : 0.0;
    char what[160];
    for (int t = 1; t <= 5; t++) {
        bool skip = t == 5;
        if (skip && !amp)
            break;
        snprintf(what, sizeof what, "optim_step %s param %s copy %s grad %s %s step %d%s",
                 kind_names[kind], NAME(l->param), l->copy == MP_F64 ? "none" : NAME(l->copy),
                 NAME(l->grad), amp ? (sumsq > 100 ? "amp clipped" : "amp") : "no amp", t,
                 skip ? " skipped" : "");
        if (t > 1) { /* fresh gradients; the step before left both sides equal */
            for (int64_t i = 0; i < N; i++)
                do
                    mp_store(g.grad.host.data, l->grad, (size_t)i, 2 * mp_rng_uniform(&r) - 1);
                while (mp_load(g.grad.host.data, l->grad, (size_t)i) == 0);
        }
        if (skip) {
            mp_store(g.grad.host.data, l->grad, 7, INFINITY);
            mp_store(g.grad.host.data, l->grad, N - 2, NAN);
        }
        mp_gpu_upload(&g.grad);
        hs.steps = t - 1;
        hs.found_inf = skip;
        a.step = amp ? 1000 : t;
        if (amp)
            mp_gpu_put(ds, &hs, sizeof hs);
        mp_gpu_pair *bufs[] = {&g.param, &g.copy, &g.s1, &g.s2};
        const char *names[] = {"param", "copy", "slot1", "slot2"};
        void *before[4] = {NULL, NULL, NULL, NULL};
        for (int i = 0; skip && i < 4; i++)
            if (bufs[i]->host.data)
                before[i] = mp_gpu_bytes(&bufs[i]->dev);
        group_step(&g, &a, amp ? &hs : NULL, ds);
        group_check(&g, what);
        for (int i = 0; i < 4; i++)
            if (before[i]) {
                mp_gpu_check_bytes(&bufs[i]->dev, before[i], "%s: %s unchanged", what,
                                   names[i]);
                free(before[i]);
            }
    }
    if (ds)
        gpu->mem_free(ds);
    group_free(&g);
}

static void test_optim_step(void **state)
{
    (void)state;
    for (int k = 0; k < NKINDS; k++)
        for (int l = 0; l < NLAYOUTS; l++) {
            run(k, l, false, 0);
            run(k, l, true, 4.0);   /* norm 2: no clipping */
            run(k, l, true, 400.0); /* norm 20: clipped to 5 */
        }
}

/* amp_check over three gradient buffers of one step (dt, FP32, dt) into one state: found_inf
 * must agree exactly and never be cleared by a later finite buffer; sumsq adds n terms
 * (g * mult / scale) ^ 2 whose FP32 products agree and whose squares are exact in FP64, so
 * the sums differ only by their order: n + 1 nonnegative terms, each side within n 2^-53
 * relative of exact. The scaler fields and steps stay as they are. */
static void test_amp_check(void **state)
{
    (void)state;
    const int64_t sizes[3] = {100003, 1031, 77};
    /* case 0: finite; 1: inf in the first buffer; 2: NaN in the last; 3: 1e38 * 8 overflows
     * FP32 in the middle (FP32) buffer. */
    for (int d = 0; d < MP_GPU_NDTYPES; d++)
        for (int k = 0; k < 4; k++) {
            mp_dtype dt = mp_gpu_dtypes[d];
            mp_rng r;
            mp_rng_seed(&r, 302, (uint64_t)(d * 4 + k));
            mp_gpu_pair gr[3];
            for (int i = 0; i < 3; i++)
                gr[i] = mp_gpu_random(i == 1 ? MP_F32 : dt, 1, &sizes[i], &r, -1, 1);
            if (k > 0) {
                int i = k == 1 ? 0 : k == 2 ? 2 : 1;
                mp_store(gr[i].host.data, gr[i].host.dtype, 5,
                         k == 1 ? INFINITY : k == 2 ? NAN : 1e38);
                mp_gpu_upload(&gr[i]);
            }
            mp_amp_state hs = {.scaler = {.scale = 256, .growth_tracker = 3,
                                          .hysteresis_left = 2, .skipped_steps = 4,
                                          .consecutive_skips = 1},
                               .sumsq = 1.5, .steps = 9};
            mp_amp_state init = hs, got;
            mp_amp_state *ds = mp_gpu_alloc(sizeof hs);
            mp_gpu_put(ds, &hs, sizeof hs);
            const double mults[3] = {0.5, 2048, 0.25}; /* 2048 / 256: g * 8 for the FP32 one */
            for (int i = 0; i < 3; i++) { /* the half buffers fill their type's range */
                double limit = i == 1 ? 0.0 : mp_dtype_max(gr[i].host.dtype);
                assert_int_equal(cpu->amp_check(&gr[i].host, mults[i], limit, &hs), MP_OK);
                assert_int_equal(gpu->amp_check(&gr[i].dev, mults[i], limit, ds), MP_OK);
            }
            mp_gpu_get(&got, ds, sizeof got);
            gpu->mem_free(ds);
            if ((got.found_inf != 0) != (k > 0) || (hs.found_inf != 0) != (k > 0))
                fail_msg("amp_check %s case %d: found_inf cpu %lld gpu %lld, want %d", NAME(dt),
                         k, (long long)hs.found_inf, (long long)got.found_inf, k > 0);
            if (k == 0) {
                double n = (double)(sizes[0] + sizes[1] + sizes[2]);
                assert_close(&got.sumsq, &hs.sumsq, 1, 0, 2 * n * 0x1p-53);
            }
            /* a maximum, exact; NaN ignored by both, inf kept */
            if (got.fill != hs.fill || !(hs.fill > 0.0) || (k == 1) != isinf(hs.fill))
                fail_msg("amp_check %s case %d: fill cpu %.17g gpu %.17g", NAME(dt), k, hs.fill,
                         got.fill);
            assert_memory_equal(&got.scaler, &init.scaler, sizeof init.scaler);
            assert_int_equal(got.steps, init.steps);
            for (int i = 0; i < 3; i++)
                mp_gpu_pair_free(&gr[i]);
        }
}

/* amp_update on the device state against the CPU's over a string of steps ('x' overflow),
 * setting only found_inf and sumsq on each side before each update: the whole state must be
 * bitwise the CPU's after every step, found_inf and sumsq cleared. */
static void test_amp_update(void **state)
{
    (void)state;
    const mp_scaler_config cfgs[2] = {
        {.dynamic = true, .init_scale = 65536, .growth_factor = 2, .backoff_factor = 0.5,
         .growth_interval = 3, .hysteresis = 2, .min_scale = 8192, .max_scale = 262144,
         .max_consecutive_skips = 4, .margin = 2},
        {.dynamic = false, .init_scale = 128, .growth_factor = 2, .backoff_factor = 0.5,
         .growth_interval = 2, .hysteresis = 1, .min_scale = 1, .max_scale = 1024,
         .max_consecutive_skips = 0},
    };
    /* Growth to the ceiling, hysteresis absorbing one overflow, backoffs to the floor, five
     * skips in a row (past max_consecutive_skips), growth again; small fills, but one good step
     * (index 8, at the ceiling) whose fill 0.9 halves the scale twice under margin 2. */
    const char *steps = "......x...xx.xxxxxx.......x.x......xxxxx...";
    mp_rng r;
    mp_rng_seed(&r, 303, 0);
    for (int c = 0; c < 2; c++) {
        mp_amp_state hs = {.scaler = mp_scaler_init(&cfgs[c])}, got;
        bool at_ceiling = false, at_floor = false, diverged = false;
        mp_amp_state *ds = mp_gpu_alloc(sizeof hs);
        mp_gpu_put(ds, &hs, sizeof hs);
        for (int i = 0; steps[i]; i++) {
            hs.found_inf = steps[i] == 'x';
            hs.sumsq = 1 + mp_rng_uniform(&r);
            hs.fill = i == 8 ? 0.9 : 0.01 * mp_rng_uniform(&r);
            double before = hs.scaler.scale;
            mp_gpu_put((char *)ds + offsetof(mp_amp_state, sumsq), &hs.sumsq, sizeof hs.sumsq);
            mp_gpu_put((char *)ds + offsetof(mp_amp_state, fill), &hs.fill, sizeof hs.fill);
            mp_gpu_put((char *)ds + offsetof(mp_amp_state, found_inf), &hs.found_inf,
                       sizeof hs.found_inf);
            assert_int_equal(cpu->amp_update(&cfgs[c], &hs), MP_OK);
            assert_int_equal(gpu->amp_update(&cfgs[c], ds), MP_OK);
            mp_gpu_get(&got, ds, sizeof got);
            if (memcmp(&got, &hs, sizeof hs) != 0)
                fail_msg("amp_update %s after step %d of \"%s\": gpu scale %g tracker %lld "
                         "hysteresis %lld skipped %lld consecutive %lld steps %lld found_inf "
                         "%lld sumsq %g; cpu scale %g tracker %lld hysteresis %lld skipped %lld "
                         "consecutive %lld steps %lld",
                         c ? "static" : "dynamic", i + 1, steps, got.scaler.scale,
                         (long long)got.scaler.growth_tracker,
                         (long long)got.scaler.hysteresis_left,
                         (long long)got.scaler.skipped_steps,
                         (long long)got.scaler.consecutive_skips, (long long)got.steps,
                         (long long)got.found_inf, got.sumsq, hs.scaler.scale,
                         (long long)hs.scaler.growth_tracker, (long long)hs.scaler.hysteresis_left,
                         (long long)hs.scaler.skipped_steps,
                         (long long)hs.scaler.consecutive_skips, (long long)hs.steps);
            assert_true(hs.found_inf == 0 && hs.sumsq == 0 && hs.fill == 0);
            assert_true(i != 8 || c == 1 || hs.scaler.scale == before / 4);
            at_ceiling = at_ceiling || hs.scaler.scale == cfgs[c].max_scale;
            at_floor = at_floor || hs.scaler.scale == cfgs[c].min_scale;
            diverged = diverged || hs.scaler.consecutive_skips >= cfgs[c].max_consecutive_skips;
        }
        assert_true(c == 1 || (at_ceiling && at_floor && diverged)); /* the string did its job */
        gpu->mem_free(ds);
    }
}

/* amp_revert puts the saved words back when found_inf is set in device state, else leaves
 * live as it is: bitwise the CPU's, for both flags. */
static void test_amp_revert(void **state)
{
    (void)state;
    const int64_t n = 1031;
    for (int flag = 0; flag < 2; flag++) {
        mp_rng r;
        mp_rng_seed(&r, 304, (uint64_t)flag);
        mp_gpu_pair saved = mp_gpu_random(MP_F32, 1, &n, &r, -1, 1);
        mp_gpu_pair live = mp_gpu_random(MP_F32, 1, &n, &r, 2, 3);
        mp_amp_state hs = {.found_inf = flag};
        mp_amp_state *ds = mp_gpu_alloc(sizeof hs);
        mp_gpu_put(ds, &hs, sizeof hs);
        assert_int_equal(cpu->amp_revert(&hs, &saved.host, &live.host), MP_OK);
        assert_int_equal(gpu->amp_revert(ds, &saved.dev, &live.dev), MP_OK);
        mp_gpu_check_bytes(&live.dev, live.host.data, "amp_revert found_inf %d", flag);
        assert_true((memcmp(live.host.data, saved.host.data, (size_t)n * 4) == 0) == flag);
        gpu->mem_free(ds);
        mp_gpu_pair_free(&saved);
        mp_gpu_pair_free(&live);
    }
}

/* The step as training runs it, never waiting for the host: amp_check, optim_step and
 * amp_update on the device state, against the same sequence on the CPU, Adam on FP32 masters
 * with an fp16 copy, an overflow at step 3 (skipped, the scale backs off). Without clipping the
 * parameters depend on the state only through the scale and the step count, both exact, so
 * they stay bitwise equal; the state is bitwise equal after each amp_update (sumsq cleared). */
static void test_step_sequence(void **state)
{
    (void)state;
    mp_rng r;
    mp_rng_seed(&r, 304, 0);
    mp_optim_args a = kinds[3];
    a.grad_scale = 0.5;
    group g;
    group_init(&g, &layouts[0], &a, &r);
    const mp_scaler_config c = {.dynamic = true, .init_scale = 1024, .growth_factor = 2,
                                .backoff_factor = 0.5, .growth_interval = 2, .hysteresis = 1,
                                .min_scale = 1, .max_scale = 65536};
    mp_amp_state hs = {.scaler = mp_scaler_init(&c)}, got;
    mp_amp_state *ds = mp_gpu_alloc(sizeof hs);
    mp_gpu_put(ds, &hs, sizeof hs);
    char what[64];
    for (int t = 1; t <= 6; t++) {
        for (int64_t i = 0; i < N; i++) { /* scaled gradients: 0.5 to 64 in size in fp16 */
            double v = 0.5 + 63.5 * mp_rng_uniform(&r);
            mp_store(g.grad.host.data, MP_F16, (size_t)i,
                     t == 3 && i == 100 ? 1e6 : mp_rng_next(&r) & 1 ? -v : v);
        }
        mp_gpu_upload(&g.grad);
        assert_int_equal(cpu->amp_check(&g.grad.host, a.grad_scale, 0.0, &hs), MP_OK);
        assert_int_equal(gpu->amp_check(&g.grad.dev, a.grad_scale, 0.0, ds), MP_OK);
        group_step(&g, &a, &hs, ds);
        snprintf(what, sizeof what, "step sequence step %d", t);
        group_check(&g, what);
        assert_int_equal(cpu->amp_update(&c, &hs), MP_OK);
        assert_int_equal(gpu->amp_update(&c, ds), MP_OK);
        mp_gpu_get(&got, ds, sizeof got);
        if (memcmp(&got, &hs, sizeof hs) != 0)
            fail_msg("%s: state differs: gpu scale %g steps %lld skipped %lld, cpu scale %g "
                     "steps %lld skipped %lld",
                     what, got.scaler.scale, (long long)got.steps,
                     (long long)got.scaler.skipped_steps, hs.scaler.scale, (long long)hs.steps,
                     (long long)hs.scaler.skipped_steps);
    }
    assert_int_equal(hs.steps, 5);
    assert_int_equal(hs.scaler.skipped_steps, 1);
    gpu->mem_free(ds);
    group_free(&g);
}

int main(void)
{
    gpu = mp_gpu_or_skip();
    cpu = mp_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optim_step),
        cmocka_unit_test(test_amp_check),
        cmocka_unit_test(test_amp_update),
        cmocka_unit_test(test_amp_revert),
        cmocka_unit_test(test_step_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
