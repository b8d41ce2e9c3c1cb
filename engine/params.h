/* Flat parameter storage (DESIGN §4): every parameter is a named view (name, shape, offset)
 * into one flat FP32 buffer, and its gradient the view at the same offset in one flat gradient
 * buffer. Offsets are aligned to 16 elements (64 bytes); the padding stays zero. */
#ifndef MP_PARAMS_H
#define MP_PARAMS_H

#include <stdint.h>

#include "engine/tensor.h"

#define MP_MAX_PARAMS 256

typedef struct mp_param_view {
    char name[96]; /* e.g. "fc1.weight" */
    int ndim;
    int64_t shape[MP_MAX_DIMS];
    int64_t offset; /* in elements, into data and grad */
    int64_t numel;
} mp_param_view;

typedef struct mp_params {
    int count;
    mp_param_view views[MP_MAX_PARAMS];
    int64_t total;  /* elements of the flat buffers, padding included */
    mp_tensor data; /* (total) FP32, MP_MEM_WEIGHTS; allocated by mp_params_alloc */
    mp_tensor grad; /* (total) FP32, MP_MEM_GRADS */
} mp_params;

/* Declares a parameter before mp_params_alloc; returns its index, or -1 when the table is full
 * or the name is taken. */
int mp_params_add(mp_params *p, const char *name, int ndim, const int64_t *shape);

/* Allocates the flat buffers for every declared parameter (zeroed). */
void mp_params_alloc(mp_params *p);

/* The parameter (or its gradient) at index i as a tensor of its own shape. */
mp_tensor mp_params_value(const mp_params *p, int i);
mp_tensor mp_params_grad(const mp_params *p, int i);

/* The index of the parameter called `name`, or -1. */
int mp_params_find(const mp_params *p, const char *name);

/* Number of parameter elements, padding excluded. */
int64_t mp_params_numel(const mp_params *p);

/* Frees the flat buffers. */
void mp_params_free(mp_params *p);

#endif
