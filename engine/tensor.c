/* Tensor views and shapes. */
#include "engine/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops.h"

mp_tensor mp_tensor_view(void *data, mp_dtype dt, int ndim, const int64_t *shape)
{
    mp_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    return t;
}

int64_t mp_tensor_numel(const mp_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int64_t mp_tensor_bytes(const mp_tensor *t)
{
    return mp_tensor_numel(t) * (int64_t)mp_dtype_size(t->dtype);
}

int64_t mp_tensor_row(const mp_tensor *t)
{
    return t->shape[0] ? mp_tensor_numel(t) / t->shape[0] : 0;
}

mp_tensor mp_tensor_alloc(mp_dtype dt, int ndim, const int64_t *shape, mp_mem_cat cat)
{
    mp_tensor t = mp_tensor_view(NULL, dt, ndim, shape);
    t.data = mp_alloc((size_t)mp_tensor_bytes(&t), cat);
    return t;
}

void mp_tensor_free(mp_tensor *t)
{
    mp_free(t->data);
    memset(t, 0, sizeof *t);
}

mp_tensor mp_tensor_new(const mp_ops *ops, mp_dtype dt, int ndim, const int64_t *shape,
                        mp_mem_cat cat)
{
    mp_tensor t = mp_tensor_view(NULL, dt, ndim, shape);
    t.data = ops->mem_alloc((size_t)mp_tensor_bytes(&t), cat);
    if (!t.data) {
        fprintf(stderr, "mpdist: %s\n", mp_error_message());
        abort();
    }
    return t;
}

void mp_tensor_delete(const mp_ops *ops, mp_tensor *t)
{
    if (t->data)
        ops->mem_free(t->data);
    memset(t, 0, sizeof *t);
}

mp_tensor mp_tensor_batch(const mp_tensor *t, int64_t n)
{
    mp_tensor v = *t;
    v.shape[0] = n;
    return v;
}

mp_tensor mp_tensor_rows(const mp_tensor *t, int64_t n0, int64_t n)
{
    mp_tensor v = mp_tensor_batch(t, n);
    v.data = (char *)t->data + (size_t)(mp_tensor_row(t) * n0) * mp_dtype_size(t->dtype);
    return v;
}
