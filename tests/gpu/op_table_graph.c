/* The op table's cases of the graph ops (graph_begin, graph_end, graph_launch): on the backend
 * under test, a chain of a convolution (cuDNN on a GPU), BatchNorm + ReLU in training (running
 * statistics updated), the residual add + ReLU, a scale and a GEMM with its bias (cuBLASLt) runs
 * eagerly into one set of outputs and is captured into another; nothing runs at the capture,
 * the launch gives the eager outputs byte for byte, and after a new batch is uploaded into the
 * same input a second launch gives the eager outputs for it; in FP32 also with the convolution
 * in NCHW (the copies around cuDNN's call captured too). The reference backend is not
 * involved: the ops' own cases compare each op with it. */
#include "tests/gpu/op_table.h"

#include <stdlib.h>
#include <string.h>

typedef struct chain {
    mp_gpu_pair y1, y2, y3, rm, rv, sm, si, z;
} chain;

static const mp_conv_desc conv_d = {{1, 1}, {1, 1}, {1, 1}, 1};

static mp_status run_chain(const mp_gpu_pair *x, const mp_gpu_pair *w, const mp_gpu_pair *g,
                           const mp_gpu_pair *b, const mp_gpu_pair *fw, const mp_gpu_pair *fb,
                           chain *s)
{
    const mp_bn_args bn = {.eps = 1e-5, .momentum = 0.1, .relu = true};
    MP_TRY(op_uut->conv2d_forward(&conv_d, &x->dev, &w->dev, &s->y1.dev));
    MP_TRY(op_uut->batchnorm_forward(&bn, true, &s->y1.dev, &g->dev, &b->dev, &s->rm.dev,
                                     &s->rv.dev, &s->sm.dev, &s->si.dev, &s->y2.dev));
    MP_TRY(op_uut->add_relu(&s->y2.dev, &s->y1.dev, &s->y3.dev));
    MP_TRY(op_uut->scale(&s->y3.dev, 0.5));
    mp_tensor flat = s->y3.dev; /* (N, P Q K) */
    flat.ndim = 2;
    flat.shape[1] = mp_tensor_numel(&s->y3.dev) / flat.shape[0];
    return op_uut->gemm_bias(false, true, &flat, &fw->dev, &fb->dev, &s->z.dev);
}

static chain chain_new(mp_dtype dt, const int64_t ys[4], int64_t outs, mp_rng *r)
{
    int64_t k[1] = {ys[3]}, zs[2] = {ys[0], outs};
    chain s = {.y1 = mp_gpu_poisoned(dt, 4, ys), .y2 = mp_gpu_poisoned(dt, 4, ys),
               .y3 = mp_gpu_poisoned(dt, 4, ys), .rm = mp_gpu_random(MP_F32, 1, k, r, -1, 1),
               .rv = mp_gpu_random(MP_F32, 1, k, r, 0.5, 1.5), .sm = mp_gpu_poisoned(MP_F32, 1, k),
               .si = mp_gpu_poisoned(MP_F32, 1, k), .z = mp_gpu_poisoned(dt, 2, zs)};
    return s;
}

/* Fails unless the device sides of a and b hold the same bytes. */
static void same_dev(const mp_gpu_pair *a, const mp_gpu_pair *b, const char *what,
                     const op_case *c)
{
    void *x = mp_gpu_bytes(&a->dev), *y = mp_gpu_bytes(&b->dev);
    bool same = memcmp(x, y, (size_t)mp_tensor_bytes(&a->dev)) == 0;
    free(x);
    free(y);
    if (!same)
        fail_msg("%s: the launched graph's %s differs from the eager run's", c->name, what);
}

static void compare(const chain *e, const chain *g, const op_case *c)
{
    same_dev(&e->y2, &g->y2, "BatchNorm + ReLU output", c);
    same_dev(&e->y3, &g->y3, "add + ReLU output", c);
    same_dev(&e->z, &g->z, "GEMM output", c);
    same_dev(&e->rm, &g->rm, "running mean", c);
    same_dev(&e->rv, &g->rv, "running variance", c);
}

static void run_graph(const op_case *c)
{
    mp_rng r;
    mp_rng_seed(&r, 600, c->seed);
    const mp_dtype dt = c->dt[0];
    const int64_t *xs = c->shape, K = 12, outs = 10;
    mp_gpu_conv_plans(c->u.conv.layout, false);
    int64_t ws[4] = {K, 3, 3, xs[3]}, ys[4] = {xs[0], xs[1], xs[2], K}, ks[1] = {K};
    int64_t fws[2] = {outs, xs[1] * xs[2] * K}, fbs[1] = {outs};
    mp_gpu_pair x = mp_gpu_random(dt, 4, xs, &r, -1, 1), w = mp_gpu_random(dt, 4, ws, &r, -1, 1);
    mp_gpu_pair g = mp_gpu_random(MP_F32, 1, ks, &r, 0.5, 1.5);
    mp_gpu_pair b = mp_gpu_random(MP_F32, 1, ks, &r, -0.5, 0.5);
    mp_gpu_pair fw = mp_gpu_random(dt, 2, fws, &r, -0.1, 0.1);
    mp_gpu_pair fb = mp_gpu_random(dt, 1, fbs, &r, -0.1, 0.1);
    mp_rng same = r; /* the two chains' running statistics start equal */
    chain e = chain_new(dt, ys, outs, &r), gr = chain_new(dt, ys, outs, &same);
    assert_int_equal(run_chain(&x, &w, &g, &b, &fw, &fb, &e), MP_OK);
    assert_int_equal(op_uut->graph_begin(), MP_OK);
    mp_status st = run_chain(&x, &w, &g, &b, &fw, &fb, &gr);
    void *graph = NULL;
    mp_status end = op_uut->graph_end(&graph);
    if (st != MP_OK || end != MP_OK)
        fail_msg("%s: the capture failed: %s", c->name, mp_error_message());
    mp_gpu_pair poisoned = mp_gpu_poisoned(dt, 2, (int64_t[2]){xs[0], outs});
    same_dev(&gr.z, &poisoned, "output before any launch", c); /* nothing ran */
    for (int round = 0; round < 2; round++) {
        assert_int_equal(op_uut->graph_launch(graph), MP_OK);
        compare(&e, &gr, c);
        mp_gpu_pair next = mp_gpu_random(dt, 4, xs, &r, -2, 2); /* a new batch, same buffer */
        memcpy(x.host.data, next.host.data, (size_t)mp_tensor_bytes(&x.host));
        mp_gpu_upload(&x);
        mp_gpu_pair_free(&next);
        assert_int_equal(run_chain(&x, &w, &g, &b, &fw, &fb, &e), MP_OK);
    }
    op_uut->graph_free(graph);
    OP_FREE(&x, &w, &g, &b, &fw, &fb, &poisoned, &e.y1, &e.y2, &e.y3, &e.rm, &e.rv, &e.sm, &e.si,
            &e.z, &gr.y1, &gr.y2, &gr.y3, &gr.rm, &gr.rv, &gr.sm, &gr.si, &gr.z);
}

void op_cases_graph(void)
{
    const mp_dtype dts[4] = {MP_F32, MP_F16, MP_BF16, MP_F32};
    for (int k = 0; k < 4; k++) { /* the last: the FP32 convolution in NCHW, its copies too */
        op_case c = {.run = run_graph, .dt = {dts[k]}, .shape = {4, 7, 5, 3}};
        c.u.conv.layout = k == 3 ? MP_CONV_LAYOUT_NCHW : MP_CONV_LAYOUT_AUTO;
        op_add(c, "graph", 1, 4, "conv%s, BatchNorm + ReLU, add + ReLU, scale, GEMM + bias",
               k == 3 ? " (NCHW)" : "");
    }
}
