/* Residual blocks (ResNet basic and bottleneck, ResNeXt, pre-activation Wide ResNet): a main
 * path and a shortcut, each a short sequence of layers, summed. Backward sends the gradient at
 * the sum down both paths and adds their input gradients. */
#include <stdlib.h>
#include <string.h>

#include "engine/seq.h"

static mp_status block_forward(mp_layer *l, const mp_tensor *x, mp_tensor *y, bool train)
{
    mp_block *b = l->block;
    mp_seq m = mp_block_child(b, 0), sc = mp_block_child(b, 1);
    mp_tensor main_out, sc_out = *x;
    MP_TRY(mp_seq_forward(&m, x, train, l->step, &main_out));
    if (sc.n > 0)
        MP_TRY(mp_seq_forward(&sc, x, train, l->step, &sc_out));
    if (b->fused_relu)
        return l->ops->add_relu(&main_out, &sc_out, y);
    MP_TRY(l->ops->add(&main_out, &sc_out, y));
    return b->post_relu ? l->ops->relu_forward(y, y) : MP_OK;
}

static mp_status block_backward(mp_layer *l, const mp_tensor *x, const mp_tensor *y,
                                const mp_tensor *dy, mp_tensor *dx)
{
    mp_block *b = l->block;
    int64_t n = x->shape[0];
    mp_tensor gsum = *dy;
    if (b->post_relu) {
        gsum = mp_tensor_batch(&b->out_tmp, n);
        MP_TRY(l->ops->relu_backward(y, dy, &gsum));
    }
    mp_seq m = mp_block_child(b, 0), sc = mp_block_child(b, 1);
    MP_TRY(mp_seq_backward(&m, x, &gsum, dx, b->gbuf, NULL));
    if (sc.n > 0) {
        mp_tensor gsc = mp_tensor_batch(&b->in_tmp, n);
        MP_TRY(mp_seq_backward(&sc, x, &gsum, dx ? &gsc : NULL, b->gbuf, NULL));
        return dx ? l->ops->add(dx, &gsc, dx) : MP_OK;
    }
    return dx ? l->ops->add(dx, &gsum, dx) : MP_OK;
}

static const mp_layer_class mp_residual_class = {
    .type = "residual", .forward = block_forward, .backward = block_backward};

/* Appends layers to child `child` of a block, each one's input shape the path's current
 * output. */
typedef struct path {
    mp_block *b;
    int child;
    const mp_ops *ops;
    const int64_t *shape;
} path;

static mp_status conv(path *p, const char *name, int64_t out, int k, int stride, int groups)
{
    mp_conv_desc d = {{stride, stride}, {k / 2, k / 2}, {1, 1}, groups};
    int kernel[2] = {k, k};
    mp_layer *l = mp_block_append(p->b, p->child);
    MP_TRY(mp_layer_conv2d_init(l, p->ops, name, p->shape, out, kernel, &d, false));
    p->shape = l->out_shape;
    return MP_OK;
}

static mp_status bn(path *p, const char *name)
{
    mp_layer *l = mp_block_append(p->b, p->child);
    MP_TRY(mp_layer_batchnorm_init(l, p->ops, name, p->shape, 1e-5, 0.1));
    p->shape = l->out_shape;
    return MP_OK;
}

static mp_status relu(path *p, const char *name)
{
    mp_layer *l = mp_block_append(p->b, p->child);
    MP_TRY(mp_layer_relu_init(l, p->ops, name, p->shape));
    p->shape = l->out_shape;
    return MP_OK;
}

static mp_status build_paths(mp_block *b, const mp_ops *ops, const int64_t in_shape[3],
                             const char *kind, int64_t out, int stride, int groups, int64_t width,
                             double p)
{
    path m = {b, 0, ops, in_shape};
    b->nchild = 2;
    b->sum_over_main = true; /* block_forward's add, element for element */
    if (strcmp(kind, "basic") == 0) {
        MP_TRY(conv(&m, "conv1", out, 3, stride, 1));
        MP_TRY(bn(&m, "bn1"));
        MP_TRY(relu(&m, "relu1"));
        MP_TRY(conv(&m, "conv2", out, 3, 1, 1));
        MP_TRY(bn(&m, "bn2"));
        b->post_relu = true;
    } else if (strcmp(kind, "bottleneck") == 0) {
        MP_TRY(conv(&m, "conv1", width, 1, 1, 1));
        MP_TRY(bn(&m, "bn1"));
        MP_TRY(relu(&m, "relu1"));
        MP_TRY(conv(&m, "conv2", width, 3, stride, groups));
        MP_TRY(bn(&m, "bn2"));
        MP_TRY(relu(&m, "relu2"));
        MP_TRY(conv(&m, "conv3", out, 1, 1, 1));
        MP_TRY(bn(&m, "bn3"));
        b->post_relu = true;
    } else if (strcmp(kind, "wide") == 0) {
        MP_TRY(bn(&m, "bn1"));
        MP_TRY(relu(&m, "relu1"));
        MP_TRY(conv(&m, "conv1", out, 3, stride, 1));
        MP_TRY(bn(&m, "bn2"));
        MP_TRY(relu(&m, "relu2"));
        if (p > 0) {
            mp_layer *l = mp_block_append(b, 0);
            MP_TRY(mp_layer_dropout_init(l, ops, "dropout", m.shape, p));
            m.shape = l->out_shape;
        }
        MP_TRY(conv(&m, "conv2", out, 3, 1, 1));
    } else {
        return mp_fail(MP_EUSAGE, "unknown residual block kind '%s'", kind);
    }
    if (stride != 1 || in_shape[2] != out) {
        path s = {b, 1, ops, in_shape};
        b->in_tmp_used = true;
        MP_TRY(conv(&s, "shortcut.conv", out, 1, stride, 1));
        MP_TRY(bn(&s, "shortcut.bn"));
    }
    return MP_OK;
}

mp_status mp_layer_residual_init(mp_layer *l, const mp_ops *ops, const char *name,
                                 const int64_t in_shape[3], const char *kind, int64_t out,
                                 int64_t stride, int64_t groups, int64_t width, double p)
{
    mp_layer_begin(l, &mp_residual_class, ops, name, in_shape, out);
    if (out < 1 || stride < 1 || groups < 1 || (strcmp(kind, "bottleneck") == 0 && width < 1))
        return mp_fail(MP_EUSAGE, "layer %s: a %s block needs out, stride, groups%s >= 1", name,
                       kind, strcmp(kind, "bottleneck") == 0 ? " and width" : "");
    l->block = calloc(1, sizeof *l->block);
    if (!l->block)
        return mp_fail(MP_EINTERNAL, "layer %s: out of memory", name);
    mp_status st = build_paths(l->block, ops, in_shape, kind, out, (int)stride, (int)groups,
                               width, p);
    if (st != MP_OK) {
        mp_status keep = mp_fail(st, "layer %s: %s", name, mp_error_message());
        free(l->block);
        l->block = NULL;
        return keep;
    }
    memcpy(l->out_shape, l->block->layers[0][l->block->n[0] - 1].out_shape, sizeof l->out_shape);
    return MP_OK;
}

mp_status mp_layer_residual_make(mp_layer *l, const mp_ops *ops, const char *name,
                                 const mp_layer_spec *s, const int64_t in_shape[3])
{
    return mp_layer_residual_init(l, ops, name, in_shape, s->type, s->out,
                                  s->stride ? s->stride : 1, s->groups > 1 ? s->groups : 1,
                                  s->width, s->p);
}
