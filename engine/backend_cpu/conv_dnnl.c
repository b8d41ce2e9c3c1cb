/* Convolutions through oneDNN (what PyTorch runs on CPUs): FP32, and half tensors as they are where
 * oneDNN has fast kernels for them (bf16 on CPUs with AVX512-BF16 or AMX: exact products summed in
 * FP32, each result rounded once, the CPU reference's rule, except that these instructions flush
 * bf16 subnormals to zero). Forward, backward data and backward weights of NHWC tensors with KRSC
 * filters (oneDNN's nhwc and ohwi, or gohwi with groups), direct algorithm (no Winograd: the
 * arithmetic stays a sum of products in FP32), on the OpenMP threads mp_backend_cpu_threads sets.
 * oneDNN's fast kernels want the filter in their own blocked layout: the primitive chooses it, and
 * a reorder copies the KRSC filter in (forward, backward data) or the filter gradient out (backward
 * weights). A primitive is made once per kind, dtype, geometry and thread count and kept in
 * engine/backend_cpu/dnnl_cache.h's per-thread table; its scratchpad and the reordered filter come
 * from the CPU workspace (counted, grow-only), so steady-state steps allocate nothing. A geometry
 * for which oneDNN offers only its reference kernels ("ref:", far slower than im2col) is left to
 * im2col. oneDNN fixes the summation order for a shape and thread count, so results repeat bit for
 * bit; they differ from im2col's in the last bits (another order of the same FP32 sums). Without
 * oneDNN at build time, with MPDIST_CPU_CONV=im2col in the environment, or when oneDNN has no
 * implementation for a geometry, mp_cpu_dnnl_conv returns false and the caller runs im2col. */
#include "engine/backend_cpu/conv_dnnl.h"

#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/env_choice.h"

#ifdef MPDIST_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <pthread.h>

#include "engine/backend_cpu/dnnl_cache.h"

/* oneDNN fixes a primitive's thread count when it is made: the count is part of the key. */
typedef struct dnnl_key {
    int kind, dtype;
    mp_conv_geom g;
    int stride[2], pad[2], dilation[2];
    int threads, unused;
} dnnl_key;
_Static_assert(sizeof(dnnl_key) == MP_DNNL_KEY_BYTES,
               "dnnl_key has no padding: keys are compared with memcmp");

static bool mp_dnnl_on;

static void dnnl_open(void)
{
    if (mp_env_choice(MP_ENV_CPU_CONV) == 0) /* "im2col" */
        return;
    mp_dnnl_on = mp_dnnl_engine() != NULL;
}

/* The memory descriptor of tensor `which` (0: image side, 1: filter, 2: output side) of key k;
 * the filter in format `any` when `any`, else KRSC. */
static dnnl_status_t tensor_md(const dnnl_key *k, int which, bool any, dnnl_memory_desc_t *md)
{
    const mp_conv_geom *g = &k->g;
    dnnl_data_type_t t = k->dtype == MP_F16 ? dnnl_f16 : k->dtype == MP_BF16 ? dnnl_bf16 : dnnl_f32;
    if (which == 0) {
        dnnl_dims_t d = {g->n, g->c, g->h, g->w};
        return dnnl_memory_desc_init_by_tag(md, 4, d, t, dnnl_nhwc);
    }
    if (which == 2) {
        dnnl_dims_t d = {g->n, g->k, g->p, g->q};
        return dnnl_memory_desc_init_by_tag(md, 4, d, t, dnnl_nhwc);
    }
    if (g->groups == 1) {
        dnnl_dims_t d = {g->k, g->c, g->r, g->s};
        return dnnl_memory_desc_init_by_tag(md, 4, d, t, any ? dnnl_format_tag_any : dnnl_ohwi);
    }
    dnnl_dims_t d = {g->groups, g->kg, g->cg, g->r, g->s};
    return dnnl_memory_desc_init_by_tag(md, 5, d, t, any ? dnnl_format_tag_any : dnnl_gohwi);
}

/* The primitive descriptor of key k (hint: the forward one, for the backward kinds). */
static dnnl_status_t make_pd(const dnnl_key *k, dnnl_primitive_attr_t attr,
                             const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd,
                             int kind)
{
    const mp_conv_geom *g = &k->g;
    dnnl_memory_desc_t x, w, y;
    dnnl_status_t s;
    if ((s = tensor_md(k, 0, false, &x)) != dnnl_success ||
        (s = tensor_md(k, 1, true, &w)) != dnnl_success ||
        (s = tensor_md(k, 2, false, &y)) != dnnl_success)
        return s;
    dnnl_dims_t strides = {k->stride[0], k->stride[1]};
    dnnl_dims_t dil = {k->dilation[0] - 1, k->dilation[1] - 1};
    dnnl_dims_t pl = {k->pad[0], k->pad[1]};
    /* the right padding that gives P: it is negative where the last rows are never reached */
    dnnl_dims_t pr = {(g->p - 1) * k->stride[0] + (g->r - 1) * k->dilation[0] + 1 - g->h - k->pad[0],
                      (g->q - 1) * k->stride[1] + (g->s - 1) * k->dilation[1] + 1 - g->w - k->pad[1]};
    dnnl_convolution_desc_t cd;
    if (kind == MP_DNNL_FWD)
        s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training,
                                                       dnnl_convolution_direct, &x, &w, NULL, &y,
                                                       strides, dil, pl, pr);
    else if (kind == MP_DNNL_BWD_DATA)
        s = dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &x, &w,
                                                             &y, strides, dil, pl, pr);
    else
        s = dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &x,
                                                                &w, NULL, &y, strides, dil, pl, pr);
    if (s != dnnl_success)
        return s;
    return dnnl_primitive_desc_create(pd, &cd, attr, mp_dnnl_engine(), hint);
}

/* When the primitive pd wants the filter in another layout than KRSC (user), the memory for it
 * and the reorder between the two: KRSC into it (forward, backward data) or out of it (backward
 * weights). */
static bool make_reorder(mp_dnnl_entry *e, const void *key, const_dnnl_primitive_desc_t pd,
                         const dnnl_memory_desc_t *user)
{
    bool grad = ((const dnnl_key *)key)->kind == MP_DNNL_BWD_WEIGHTS;
    const dnnl_memory_desc_t *want =
        dnnl_primitive_desc_query_md(pd, grad ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    if (!want)
        return false;
    if (dnnl_memory_desc_equal(want, user))
        return true;
    e->wbytes = dnnl_memory_desc_get_size(want);
    dnnl_primitive_desc_t rpd = NULL;
    bool ok = dnnl_memory_create(&e->wmem, want, mp_dnnl_engine(), DNNL_MEMORY_NONE) ==
                  dnnl_success &&
              dnnl_reorder_primitive_desc_create(&rpd, grad ? want : user, mp_dnnl_engine(),
                                                 grad ? user : want, mp_dnnl_engine(), NULL) ==
                  dnnl_success &&
              dnnl_primitive_create(&e->reorder, rpd) == dnnl_success;
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    return ok;
}

/* Fills entry e for key k: its primitive (left NULL where oneDNN has no fast one) and memories. */
static void make_entry(const void *key, mp_dnnl_entry *e)
{
    const dnnl_key *k = key;
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
        return;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    bool ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                  dnnl_success &&
              make_pd(k, attr, NULL, &fwd, MP_DNNL_FWD) == dnnl_success;
    if (ok && k->kind != MP_DNNL_FWD)
        ok = make_pd(k, attr, fwd, &pd, k->kind) == dnnl_success;
    else if (ok)
        pd = fwd, fwd = NULL;
    dnnl_primitive_attr_destroy(attr);
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    dnnl_memory_desc_t md[3];
    for (int i = 0; i < 3; i++)
        ok = ok && tensor_md(k, i, false, &md[i]) == dnnl_success;
    if (ok && !make_reorder(e, key, pd, &md[1]))
        ok = false;
    if (!ok) {
        if (pd)
            dnnl_primitive_desc_destroy(pd);
        mp_dnnl_entry_free(e);
        return;
    }
    mp_dnnl_entry_finish(e, pd, md);
}

bool mp_cpu_dnnl_conv(mp_dnnl_kind kind, mp_dtype dt, const mp_conv_desc *d,
                      const mp_conv_geom *g, const void *a, const void *b, void *out)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, dnnl_open);
    if (!mp_dnnl_on || g->n == 0)
        return false;
#if DNNL_VERSION_MAJOR < 3
    if (dt == MP_F16)
        return false; /* 2.x has reference fp16 convolutions only: no table slots spent on them */
#endif
    if (!mp_dnnl_stream())
        return false;
    dnnl_key k;
    memset(&k, 0, sizeof k); /* padding bytes too: keys are compared with memcmp */
    k.kind = (int)kind;
    k.dtype = (int)dt;
    k.threads = omp_get_max_threads();
    k.g = *g;
    for (int i = 0; i < 2; i++) {
        k.stride[i] = d->stride[i];
        k.pad[i] = d->pad[i];
        k.dilation[i] = d->dilation[i];
    }
    mp_dnnl_entry *e = mp_dnnl_entry_for(&k, sizeof k, make_entry);
    if (!e->prim)
        return false;
    /* the memories in tensor order (image side, filter, output side) and each one's role */
    void *in[3];
    int roles[3];
    if (kind == MP_DNNL_FWD) {
        in[0] = (void *)a, in[1] = (void *)b, in[2] = out;
        roles[0] = DNNL_ARG_SRC, roles[1] = DNNL_ARG_WEIGHTS, roles[2] = DNNL_ARG_DST;
    } else if (kind == MP_DNNL_BWD_DATA) {
        in[0] = out, in[1] = (void *)b, in[2] = (void *)a;
        roles[0] = DNNL_ARG_DIFF_SRC, roles[1] = DNNL_ARG_WEIGHTS, roles[2] = DNNL_ARG_DIFF_DST;
    } else {
        in[0] = (void *)a, in[1] = out, in[2] = (void *)b;
        roles[0] = DNNL_ARG_SRC, roles[1] = DNNL_ARG_DIFF_WEIGHTS, roles[2] = DNNL_ARG_DIFF_DST;
    }
    /* one workspace block: the filter in the primitive's layout, then the scratchpad */
    size_t wbytes = (e->wbytes + 63) & ~(size_t)63;
    char *ws = mp_cpu_workspace(MP_CPU_WS_DNNL, wbytes + e->scratch_bytes + 64);
    dnnl_exec_arg_t args[3];
    if (!mp_dnnl_bind(e, in, roles, args))
        return false;
    dnnl_stream_t st = mp_dnnl_stream();
    if (e->reorder) { /* the primitive sees the filter in its own layout */
        if (dnnl_memory_set_data_handle_v2(e->wmem, ws, st) != dnnl_success)
            return false;
        args[1].memory = e->wmem;
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, e->mem[1]}, {DNNL_ARG_TO, e->wmem}};
        if (kind != MP_DNNL_BWD_WEIGHTS &&
            dnnl_primitive_execute(e->reorder, st, 2, r) != dnnl_success)
            return false;
    }
    if (!mp_dnnl_execute(e, args, 3, ws + wbytes))
        return false;
    if (e->reorder && kind == MP_DNNL_BWD_WEIGHTS) {
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, e->wmem}, {DNNL_ARG_TO, e->mem[1]}};
        if (dnnl_primitive_execute(e->reorder, st, 2, r) != dnnl_success)
            return false;
    }
    return dnnl_stream_wait(st) == dnnl_success;
}

#else

bool mp_cpu_dnnl_conv(mp_dnnl_kind kind, mp_dtype dt, const mp_conv_desc *d,
                      const mp_conv_geom *g, const void *a, const void *b, void *out)
{
    (void)kind, (void)dt, (void)d, (void)g, (void)a, (void)b, (void)out;
    return false;
}

#endif
