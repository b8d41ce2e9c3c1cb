/* The op table's convolution, batch normalisation and pooling cases (op_table.h): conv2d forward,
 * backward-data, backward-filter and both gradients at once over strides, padding, dilation,
 * groups, 1x1, 3x3, 5x5 and non-square filters, a 1x1 image and an empty batch, in FP32, fp16,
 * bf16 and mixes (O1's half inputs with an FP32 weight gradient), and every case whose work
 * dtype is FP32 again in the CUDA backend's NCHW layout (copies around cuDNN's call) and again
 * with cuDNN's algorithms timed in both layouts (the faster run); batchnorm
 * training (y, saved and running statistics), evaluation (save_* left alone) and backward with
 * FP32 parameters and FP32 or half activations, and with half parameters (O3); max and average
 * pooling forward and backward with padding and overlap, global average pooling, and max
 * pooling's routing of ties to the first maximum. Shapes the ops do not allow (one value per
 * channel in training, an empty batch for pooling) must be refused by both backends. */
#include "tests/gpu/op_table.h"

#include <math.h>
#include <stdlib.h>

#define DTS mp_gpu_dtypes
#define NDT MP_GPU_NDTYPES

/* rtol of a convolution output of dtype `out` from inputs of dtypes in1 and in2: the CUDA
 * backend sums in FP32 but hands cuDNN one work dtype (the inputs' when they agree, else FP32;
 * conv2d.cu), so an output of another dtype is rounded to the work dtype first, as PyTorch's
 * autocast does (the O1 weight gradient: half sums widened to FP32), where the CPU rounds once. */
static double conv_rtol(mp_dtype out, mp_dtype in1, mp_dtype in2)
{
    mp_dtype work = in1 == in2 ? in1 : MP_F32;
    return mp_gpu_rtol(out) + (work != out ? mp_gpu_rtol(work) : 0);
}

/* The shapes of a convolution case: x (N, H, W, C), w (K, R, S, C / groups), y (N, P, Q, K). */
static void conv_shapes(const op_case *c, int64_t xs[4], int64_t ws[4], int64_t ys[4])
{
    const mp_conv_desc *d = &c->u.conv.d;
    int64_t n = c->shape[0], h = c->shape[1], w = c->shape[2], ch = c->shape[3];
    int64_t k = c->u.conv.k, r = c->u.conv.r, s = c->u.conv.s;
    int64_t p = (h + 2 * d->pad[0] - d->dilation[0] * (r - 1) - 1) / d->stride[0] + 1;
    int64_t q = (w + 2 * d->pad[1] - d->dilation[1] * (s - 1) - 1) / d->stride[1] + 1;
    const int64_t x4[4] = {n, h, w, ch}, w4[4] = {k, r, s, ch / d->groups}, y4[4] = {n, p, q, k};
    for (int i = 0; i < 4; i++)
        xs[i] = x4[i], ws[i] = w4[i], ys[i] = y4[i];
}

/* Each output is an FP32 sum (TF32 is off) of products of size <= 1, rounded to its dtype
 * (conv_rtol): y over the R S C/G taps, dx over at most R S K/G, dw over the N P Q positions.
 * dt = (x, w, y) forward, (dy, w, dx) backward-data, (x, dy, dw) backward-filter. */
static void run_conv(const op_case *c, int op)
{
    mp_rng r;
    mp_rng_seed(&r, 501, c->seed);
    const mp_conv_desc *d = &c->u.conv.d;
    int64_t xs[4], ws[4], ys[4];
    conv_shapes(c, xs, ws, ys);
    int64_t taps = c->u.conv.r * c->u.conv.s, terms;
    const int64_t *s1 = op == 1 ? ys : xs, *s2 = op == 2 ? ys : ws, *so = op == 0 ? ys
                                                                  : op == 1 ? xs : ws;
    mp_gpu_pair a = mp_gpu_random(c->dt[0], 4, s1, &r, -1, 1);
    mp_gpu_pair b = mp_gpu_random(c->dt[1], 4, s2, &r, -1, 1);
    mp_gpu_pair y = mp_gpu_poisoned(c->dt[2], 4, so);
    mp_gpu_conv_plans(c->u.conv.layout, c->u.conv.timed);
    if (op == 0) {
        OP_BOTH(c, conv2d_forward, d, OP_T(&a), OP_T(&b), OP_T(&y));
        terms = taps * xs[3] / d->groups;
    } else if (op == 1) {
        OP_BOTH(c, conv2d_backward_data, d, OP_T(&a), OP_T(&b), OP_T(&y));
        terms = taps * ys[3] / d->groups;
    } else {
        OP_BOTH(c, conv2d_backward_filter, d, OP_T(&a), OP_T(&b), OP_T(&y));
        terms = ys[0] * ys[1] * ys[2];
    }
    mp_gpu_check(&y, mp_gpu_atol(terms, 1), conv_rtol(c->dt[2], c->dt[0], c->dt[1]), "%s",
                 c->name);
    OP_FREE(&a, &b, &y);
}

/* Both gradients at once (conv2d_backward), dt = (x and dx, w and dw, dy): the same sums as the
 * single ops. */
static void run_conv_backward_both(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 503, c->seed);
    const mp_conv_desc *d = &c->u.conv.d;
    int64_t xs[4], ws[4], ys[4];
    conv_shapes(c, xs, ws, ys);
    mp_gpu_pair x = mp_gpu_random(c->dt[0], 4, xs, &r, -1, 1);
    mp_gpu_pair w = mp_gpu_random(c->dt[1], 4, ws, &r, -1, 1);
    mp_gpu_pair dy = mp_gpu_random(c->dt[2], 4, ys, &r, -1, 1);
    mp_gpu_pair dx = mp_gpu_poisoned(c->dt[0], 4, xs), dw = mp_gpu_poisoned(c->dt[1], 4, ws);
    mp_gpu_conv_plans(c->u.conv.layout, c->u.conv.timed);
    OP_BOTH(c, conv2d_backward, d, OP_T(&x), OP_T(&w), OP_T(&dy), OP_T(&dw), OP_T(&dx));
    mp_gpu_check(&dw, mp_gpu_atol(ys[0] * ys[1] * ys[2], 1),
                 conv_rtol(c->dt[1], c->dt[0], c->dt[2]), "%s dw", c->name);
    mp_gpu_check(&dx, mp_gpu_atol(c->u.conv.r * c->u.conv.s * ys[3] / d->groups, 1),
                 conv_rtol(c->dt[0], c->dt[2], c->dt[1]), "%s dx", c->name);
    OP_FREE(&x, &w, &dy, &dx, &dw);
}

static void run_conv_forward(const op_case *c) { run_conv(c, 0); }
static void run_conv_backward_data(const op_case *c) { run_conv(c, 1); }
static void run_conv_backward_filter(const op_case *c) { run_conv(c, 2); }

/* Batch normalisation of x (n, h, w, c) in dt[0] with gamma, beta and their gradients in dt[1]
 * and the statistics in FP32. x is U(-2, 2) plus a channel offset (c % 4) / 2, so |x| <= 4 and
 * the mean matters. Every backend adds the rows in engine/bn_rule.h's order and does the same
 * FP32 operations (no FMA contraction anywhere), so every output must be the reference's bits:
 * a row missed or counted twice, or any other change of the arithmetic, shows. */
typedef struct bn_set {
    mp_gpu_pair x, dy, g, b, rm, rv, sm, si, y, dx, dg, db;
} bn_set;

enum { BN_TRAIN, BN_EVAL, BN_BACKWARD };

static const mp_bn_args bn_args = {.eps = 1e-5, .momentum = 0.1};

static void run_bn(const op_case *c, int op)
{
    mp_bn_args args = bn_args;
    args.relu = c->bn_relu;
    const int64_t *shape = c->shape;
    int64_t C = shape[3], M = shape[0] * shape[1] * shape[2];
    mp_dtype xt = c->dt[0], pt = c->dt[1];
    mp_rng r;
    mp_rng_seed(&r, 502, c->seed);
    bn_set t;
    t.x = mp_gpu_random(xt, 4, shape, &r, -2, 2);
    t.dy = mp_gpu_random(xt, 4, shape, &r, -1, 1);
    for (int64_t i = 0; i < M * C; i++) { /* the offset, keeping x nonzero */
        double v = mp_load(t.x.host.data, xt, (size_t)i) + (double)(i % C % 4) / 2;
        mp_store(t.x.host.data, xt, (size_t)i, v != 0 ? v : 0.25);
    }
    mp_gpu_upload(&t.x);
    t.g = mp_gpu_random(pt, 1, &C, &r, 0.5, 1.5);
    t.b = mp_gpu_random(pt, 1, &C, &r, -1, 1);
    t.rm = mp_gpu_random(MP_F32, 1, &C, &r, -1, 1);
    t.rv = mp_gpu_random(MP_F32, 1, &C, &r, 0.5, 1.5);
    /* Evaluation must leave save_* alone: they hold values then, the poison otherwise. */
    t.sm = op == BN_EVAL ? mp_gpu_random(MP_F32, 1, &C, &r, -1, 1)
                         : mp_gpu_poisoned(MP_F32, 1, &C);
    t.si = op == BN_EVAL ? mp_gpu_random(MP_F32, 1, &C, &r, 0.5, 1.5)
                         : mp_gpu_poisoned(MP_F32, 1, &C);
    t.y = mp_gpu_poisoned(xt, 4, shape);
    t.dx = mp_gpu_poisoned(xt, 4, shape);
    t.dg = mp_gpu_poisoned(pt, 1, &C);
    t.db = mp_gpu_poisoned(pt, 1, &C);
    if (op == BN_BACKWARD) { /* from the reference's saved statistics on both sides */
        assert_int_equal(op_ref->batchnorm_forward(&args, true, &t.x.host, &t.g.host,
                                                   &t.b.host, &t.rm.host, &t.rv.host,
                                                   &t.sm.host, &t.si.host, &t.y.host),
                         MP_OK);
        mp_gpu_upload(&t.sm);
        mp_gpu_upload(&t.si);
        mp_gpu_upload(&t.y);
        mp_gpu_pair *dx = c->dx_over_dy ? &t.dy : &t.dx;
        OP_BOTH(c, batchnorm_backward, &args, OP_T(&t.x), c->bn_relu ? OP_T(&t.y) : NULL,
                OP_T(&t.dy), OP_T(&t.g),
                OP_T(&t.sm), OP_T(&t.si), c->u.no_dx ? NULL : OP_T(dx), OP_T(&t.dg),
                OP_T(&t.db));
        mp_gpu_check_bits(dx, "%s: dx%s", c->name, c->u.no_dx ? " (not written)" : "");
        mp_gpu_check_bits(&t.dg, "%s: dgamma", c->name);
        mp_gpu_check_bits(&t.db, "%s: dbeta", c->name);
    } else {
        OP_BOTH(c, batchnorm_forward, &args, op == BN_TRAIN, OP_T(&t.x), OP_T(&t.g),
                OP_T(&t.b), OP_T(&t.rm), OP_T(&t.rv), OP_T(&t.sm), OP_T(&t.si), OP_T(&t.y));
    }
    if (op == BN_TRAIN && !c->refused) {
        mp_gpu_check_bits(&t.y, "%s: y", c->name);
        mp_gpu_check_bits(&t.sm, "%s: save_mean", c->name);
        mp_gpu_check_bits(&t.si, "%s: save_invstd", c->name);
        mp_gpu_check_bits(&t.rm, "%s: running_mean", c->name);
        mp_gpu_check_bits(&t.rv, "%s: running_var", c->name);
    } else if (op == BN_EVAL) {
        mp_gpu_check_bits(&t.y, "%s: y", c->name);
        mp_gpu_check_bits(&t.rm, "%s: running_mean unchanged", c->name);
        mp_gpu_check_bits(&t.rv, "%s: running_var unchanged", c->name);
        mp_gpu_check_bits(&t.sm, "%s: save_mean unchanged", c->name);
        mp_gpu_check_bits(&t.si, "%s: save_invstd unchanged", c->name);
    }
    OP_FREE(&t.x, &t.dy, &t.g, &t.b, &t.rm, &t.rv, &t.sm, &t.si, &t.y, &t.dx, &t.dg, &t.db);
}

static void run_bn_train(const op_case *c) { run_bn(c, BN_TRAIN); }
static void run_bn_eval(const op_case *c) { run_bn(c, BN_EVAL); }
static void run_bn_backward(const op_case *c) { run_bn(c, BN_BACKWARD); }

/* x holds, in each (n, c) plane, a random permutation of (k - H W / 2 + 1/2) / 8, k < H W:
 * distinct, nonzero and exact in every dtype, so max pooling has no ties and is exact, and
 * window sums are exact in FP32; with `ties` every x is the same value. */
static void pool_input(const op_case *c, mp_gpu_pair *x, mp_rng *r)
{
    int64_t N = c->shape[0], hw = c->shape[1] * c->shape[2], C = c->shape[3];
    int64_t *perm = malloc((size_t)(hw + 1) * sizeof *perm);
    assert_non_null(perm);
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++) {
            for (int64_t i = 0; i < hw; i++)
                perm[i] = i;
            for (int64_t i = hw - 1; i > 0; i--) {
                int64_t j = (int64_t)mp_rng_below(r, (uint64_t)i + 1), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            for (int64_t i = 0; i < hw; i++)
                mp_store(x->host.data, c->dt[0], (size_t)((n * hw + i) * C + ch),
                         c->u.pool.ties ? 1.5 : ((double)perm[i] - (double)(hw / 2) + 0.5) / 8);
        }
    free(perm);
    mp_gpu_upload(x);
}

/* Forward: max is exact, an average an exact sum divided by the window's area, rounded.
 * Backward from the reference's y on both sides: dx sums, in FP32, one term per window holding
 * the element: dy (max) or dy / area. */
static void run_pool(const op_case *c, bool backward)
{
    const mp_pool_desc *d = &c->u.pool.d;
    mp_dtype dt = c->dt[0];
    int64_t p = (c->shape[1] + 2 * d->pad[0] - d->window[0]) / d->stride[0] + 1;
    int64_t q = (c->shape[2] + 2 * d->pad[1] - d->window[1]) / d->stride[1] + 1;
    int64_t ys[4] = {c->shape[0], p, q, c->shape[3]};
    mp_rng r;
    mp_rng_seed(&r, 503, c->seed);
    mp_gpu_pair x = mp_gpu_pair_alloc(dt, 4, c->shape), dy = mp_gpu_random(dt, 4, ys, &r, -1, 1);
    mp_gpu_pair y = mp_gpu_poisoned(dt, 4, ys), dx = mp_gpu_poisoned(dt, 4, c->shape);
    pool_input(c, &x, &r);
    if (!backward) {
        OP_BOTH(c, pool_forward, d, OP_T(&x), OP_T(&y));
        if (c->refused)
            ;
        else if (d->max)
            mp_gpu_check_bits(&y, "%s", c->name);
        else
            mp_gpu_check(&y, 0, mp_gpu_rtol(dt), "%s", c->name);
    } else {
        assert_int_equal(op_ref->pool_forward(d, &x.host, &y.host), MP_OK);
        mp_gpu_upload(&y);
        OP_BOTH(c, pool_backward, d, OP_T(&x), OP_T(&y), OP_T(&dy), OP_T(&dx));
        int64_t wins = ((d->window[0] + d->stride[0] - 1) / d->stride[0]) *
                       ((d->window[1] + d->stride[1] - 1) / d->stride[1]);
        double mag = d->max ? 1.0 : 1.0 / (double)(d->window[0] * d->window[1]);
        mp_gpu_check(&dx, mp_gpu_atol(wins, mag), mp_gpu_rtol(dt), "%s", c->name);
    }
    OP_FREE(&x, &dy, &y, &dx);
}

static void run_pool_forward(const op_case *c) { run_pool(c, false); }
static void run_pool_backward(const op_case *c) { run_pool(c, true); }

typedef struct conv_geom {
    int64_t n, h, w, c, k, r, s;
    mp_conv_desc d;
} conv_geom;

static const conv_geom conv_geoms[] = {
    {2, 9, 7, 3, 5, 3, 3, {{2, 2}, {1, 1}, {1, 1}, 1}},    /* stride 2, pad 1 */
    {2, 11, 9, 4, 6, 3, 3, {{1, 1}, {2, 2}, {2, 2}, 1}},   /* dilation 2 */
    {2, 7, 7, 6, 10, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 2}},   /* groups 2 */
    {2, 6, 6, 8, 8, 3, 3, {{2, 1}, {1, 1}, {1, 1}, 8}},    /* depthwise */
    {3, 6, 5, 5, 7, 1, 1, {{1, 1}, {0, 0}, {1, 1}, 1}},    /* 1x1 */
    {2, 5, 7, 6, 4, 1, 1, {{2, 2}, {0, 0}, {1, 1}, 2}},    /* 1x1, stride 2, groups 2 */
    {2, 9, 8, 3, 4, 5, 5, {{1, 1}, {2, 2}, {1, 1}, 1}},    /* 5x5 */
    {2, 7, 10, 4, 3, 3, 1, {{1, 2}, {1, 0}, {1, 1}, 1}},   /* 3x1, non-square stride */
    {1, 12, 9, 16, 24, 2, 3, {{2, 1}, {0, 1}, {1, 2}, 1}}, /* 2x3, dilated along W */
    {3, 1, 1, 3, 5, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},    /* a 1x1 image under a 3x3 filter */
    {0, 5, 5, 4, 6, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},    /* no images: dw = 0 */
};

typedef struct pool_geom_case {
    int64_t n, h, w, c;
    mp_pool_desc d;
} pool_geom_case;

static const pool_geom_case pool_geoms[] = {
    {2, 4, 4, 3, {{2, 2}, {2, 2}, {0, 0}, true}},
    {2, 5, 6, 2, {{3, 3}, {2, 2}, {1, 1}, true}}, /* overlapping windows, padding */
    {2, 5, 6, 2, {{3, 3}, {2, 2}, {1, 1}, false}},
    {2, 7, 5, 3, {{3, 2}, {1, 2}, {1, 0}, false}}, /* non-square window and stride */
    {2, 5, 5, 66, {{2, 2}, {2, 2}, {1, 1}, true}}, /* more channels than one block */
    {2, 6, 6, 4, {{3, 3}, {1, 1}, {1, 1}, false}}, /* each input in up to 9 windows */
    {2, 6, 6, 4, {{3, 3}, {1, 1}, {1, 1}, true}},
    {2, 7, 6, 66, {{7, 6}, {1, 1}, {0, 0}, false}}, /* global average */
};

void op_cases_dnn(void)
{
    static const char *const conv_ops[4] = {"conv2d_forward", "conv2d_backward_data",
                                            "conv2d_backward_filter", "conv2d_backward"};
    static const op_runner conv_runs[4] = {run_conv_forward, run_conv_backward_data,
                                           run_conv_backward_filter, run_conv_backward_both};
    /* (in1, in2, out) beyond one dtype for all three: O1's half inputs with an FP32 result,
     * and a free mix. */
    const mp_dtype mixes[3][3] = {
        {MP_F16, MP_F16, MP_F32}, {MP_BF16, MP_BF16, MP_F32}, {MP_BF16, MP_F32, MP_F16}};
    const int ngeoms = (int)(sizeof conv_geoms / sizeof conv_geoms[0]);
    for (int i = 0; i < ngeoms; i++)
        for (int op = 0; op < 4; op++)
            for (int k = 0; k < (op < 3 ? NDT + 3 : NDT); k++) /* both gradients: one dtype */
                for (int plans = 0; plans < 3; plans++) { /* cuDNN's heuristic; NCHW; timed */
                    const conv_geom *g = &conv_geoms[i];
                    op_case c = {.run = conv_runs[op], .shape = {g->n, g->h, g->w, g->c},
                                 .u.conv = {g->d, g->k, g->r, g->s,
                                            plans == 1 ? MP_CONV_LAYOUT_NCHW
                                                       : MP_CONV_LAYOUT_AUTO,
                                            plans == 2}};
                    for (int j = 0; j < 3; j++)
                        c.dt[j] = k < NDT ? DTS[k] : mixes[k - NDT][j];
                    /* NCHW and the timed trial of both layouts: where the work dtype is FP32
                     * (the inputs' when they agree) */
                    bool f32_work = c.dt[0] == MP_F32 || c.dt[0] != c.dt[1];
                    if ((g->n == 0 && k > 1) || (plans > 0 && !f32_work))
                        continue;
                    op_add(c, conv_ops[op], 3, 4,
                           "k %lld %lldx%lld stride %d %d pad %d %d dilation %d %d groups %d%s",
                           (long long)g->k, (long long)g->r, (long long)g->s, g->d.stride[0],
                           g->d.stride[1], g->d.pad[0], g->d.pad[1], g->d.dilation[0],
                           g->d.dilation[1], g->d.groups,
                           plans == 1 ? " NCHW" : plans == 2 ? " timed" : "");
                }

    static const char *const bn_ops[3] = {"batchnorm_forward train", "batchnorm_forward eval",
                                          "batchnorm_backward"};
    static const op_runner bn_runs[3] = {run_bn_train, run_bn_eval, run_bn_backward};
    /* {8, 16, 16, 67} and {40, 30, 30, 5} span several chunks of engine/bn_rule.h (and 3 tiles
     * of 32 channels on the GPU; the cap on the chunks, with a last chunk shorter than the
     * others). Channels that are a multiple of 8 take the GPU's vector kernels
     * (engine/backend_cuda/vec.cuh): 16 (two channel vectors, 4 chunks in one block), 24 (3
     * vectors, 4 chunks in a block that holds 10, the last chunk shorter), 264 (33 vectors: a
     * second block with one), and 40 over 508 chunks (8 tiles of the chunk sums, the last
     * shorter, in two blocks of channels). */
    const int64_t bn_shapes[][4] = {{4, 5, 3, 7},    {2, 3, 4, 70}, {16, 1, 1, 37},
                                    {8, 16, 16, 67}, {40, 30, 30, 5}, {4, 8, 8, 16},
                                    {3, 7, 11, 24},  {2, 3, 3, 264}, {40, 30, 30, 40}};
    for (int s = 0; s < (int)(sizeof bn_shapes / sizeof bn_shapes[0]); s++)
        for (int op = 0; op < 3; op++)
            for (int k = 0; k < NDT + 2; k++) { /* then half parameters: O3 */
                op_case c = {.run = bn_runs[op], .dt = {k < NDT ? DTS[k] : DTS[k - 2],
                                                        k < NDT ? MP_F32 : DTS[k - 2]},
                             .shape = {bn_shapes[s][0], bn_shapes[s][1], bn_shapes[s][2],
                                       bn_shapes[s][3]}};
                op_add(c, bn_ops[op], 2, 4, "%s", "");
            }
    for (int s = 0; s < (int)(sizeof bn_shapes / sizeof bn_shapes[0]); s++)
        for (int op = 0; op < 3; op++)
            for (int k = 0; k < NDT; k++) { /* BatchNorm + ReLU, fused */
                op_case c = {.run = bn_runs[op], .dt = {DTS[k], MP_F32},
                             .shape = {bn_shapes[s][0], bn_shapes[s][1], bn_shapes[s][2],
                                       bn_shapes[s][3]},
                             .bn_relu = true};
                op_add(c, bn_ops[op], 2, 4, "(relu)");
            }
    for (int k = 0; k < 2; k++)
        for (int relu = 0; relu < 2; relu++) {
            op_case c = {.run = run_bn_backward, .dt = {DTS[k], MP_F32}, .shape = {3, 5, 3, 9},
                         .u.no_dx = true, .bn_relu = relu};
            op_add(c, bn_ops[2], 2, 4, "(dx NULL%s)", relu ? ", relu" : "");
        }
    for (int s = 1; s < 8; s += 2) /* dx over dy (mp_seq_backward does it), 5 and 7 vectors */
        for (int k = 0; k < NDT; k++) {
            for (int relu = 0; relu < 2; relu++) {
                op_case c = {.run = run_bn_backward, .dt = {DTS[k], MP_F32},
                             .shape = {bn_shapes[s][0], bn_shapes[s][1], bn_shapes[s][2],
                                       bn_shapes[s][3]},
                             .dx_over_dy = true, .bn_relu = relu};
                op_add(c, bn_ops[2], 2, 4, "(in place: dx = dy%s)", relu ? ", relu" : "");
            }
        }
    op_case one = {.run = run_bn_eval, .dt = {MP_BF16, MP_F32}, .shape = {1, 1, 1, 5}};
    op_add(one, bn_ops[1], 2, 4, "(one value per channel)");
    one.run = run_bn_train;
    one.refused = true; /* no batch variance */
    op_add(one, bn_ops[0], 2, 4, "(one value per channel: refused)");

    const int npools = (int)(sizeof pool_geoms / sizeof pool_geoms[0]);
    for (int i = 0; i < npools; i++)
        for (int k = 0; k < NDT; k++)
            for (int ties = 0; ties < 1 + pool_geoms[i].d.max; ties++)
                for (int bwd = 0; bwd < 2; bwd++) {
                    const pool_geom_case *g = &pool_geoms[i];
                    op_case c = {.run = bwd ? run_pool_backward : run_pool_forward,
                                 .dt = {DTS[k]}, .shape = {g->n, g->h, g->w, g->c},
                                 .u.pool = {g->d, ties}};
                    op_add(c, bwd ? "pool_backward" : "pool_forward", 1, 4,
                           "%s window %d %d stride %d %d pad %d %d%s", g->d.max ? "max" : "avg",
                           g->d.window[0], g->d.window[1], g->d.stride[0], g->d.stride[1],
                           g->d.pad[0], g->d.pad[1], ties ? " (ties)" : "");
                }
    op_case empty = {.run = run_pool_forward, .dt = {MP_F16}, .shape = {0, 4, 4, 3},
                     .u.pool = {{{2, 2}, {2, 2}, {0, 0}, true}, false}, .refused = true};
    op_add(empty, "pool_forward", 1, 4, "max window 2 2 stride 2 2 (no images: refused)");
}
