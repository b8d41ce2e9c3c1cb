/* Tensors: a typed, shaped view of memory the tensor does not own. Layout is row-major with
 * the batch first (N, ..., C): NHWC for images, (N, features) for linear layers. */
#ifndef MP_TENSOR_H
#define MP_TENSOR_H

#include <stdint.h>

#include "engine/alloc.h"
#include "engine/dtype.h"

#define MP_MAX_DIMS 4

typedef struct mp_tensor {
    void *data;
    mp_dtype dtype;
    int ndim;
    int64_t shape[MP_MAX_DIMS];
} mp_tensor;

/* A view of `data` with the given dtype and shape (ndim <= MP_MAX_DIMS). */
mp_tensor mp_tensor_view(void *data, mp_dtype dt, int ndim, const int64_t *shape);

/* A tensor with freshly allocated zeroed storage counted under `cat`; free with mp_tensor_free. */
mp_tensor mp_tensor_alloc(mp_dtype dt, int ndim, const int64_t *shape, mp_mem_cat cat);

struct mp_ops;

/* A tensor with zeroed storage in the memory of backend `ops` (ops->mem_alloc) counted under
 * `cat`. Running out of device memory prints a message and aborts, as mp_alloc does for host
 * memory. Free with mp_tensor_delete and the same ops. */
mp_tensor mp_tensor_new(const struct mp_ops *ops, mp_dtype dt, int ndim, const int64_t *shape,
                        mp_mem_cat cat);

/* Frees storage from mp_tensor_new (none is fine) and clears t. */
void mp_tensor_delete(const struct mp_ops *ops, mp_tensor *t);

/* Frees storage from mp_tensor_alloc and clears t. */
void mp_tensor_free(mp_tensor *t);

/* Number of elements (product of the shape). */
int64_t mp_tensor_numel(const mp_tensor *t);

/* Bytes of the elements. */
int64_t mp_tensor_bytes(const mp_tensor *t);

/* Elements per batch row: numel / shape[0]. */
int64_t mp_tensor_row(const mp_tensor *t);

/* The same storage with the first dimension set to n (n <= shape[0] for an in-bounds view). */
mp_tensor mp_tensor_batch(const mp_tensor *t, int64_t n);

/* Rows n0 .. n0 + n - 1 of t's first dimension, a view of the same storage (n0 + n <=
 * shape[0] for an in-bounds view). */
mp_tensor mp_tensor_rows(const mp_tensor *t, int64_t n0, int64_t n);

#endif
