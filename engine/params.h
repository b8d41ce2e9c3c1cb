/* Flat parameter storage (docs/ARCHITECTURE.md §4): every parameter is a named view (name, shape,
 * offset) into the flat buffers of its group, and its gradient the view at the same offset in the
 * group's flat gradient buffer. Two groups: the weights, and the normalisation parameters (which
 * keep_batchnorm_fp32 keeps in FP32). Per group:
 *   model  what layers read, in the group's dtype;
 *   grad   the gradients, in the group's gradient dtype;
 *   master FP32 values the optimizer updates, a separate buffer when the model is half and
 *          master weights are on, the model buffer itself when the model is FP32, and absent
 *          (empty) for a half model without masters (O3), where the optimizer updates the model.
 * Offsets are aligned to 16 elements; the padding stays zero. Sharded (ZeRO-1, mp_params_shard)
 * each group's buffers are padded to a whole number of blocks, one per rank, and this rank owns
 * block [lo, lo + n): a separate master holds only those n elements, and the optimizer updates
 * only them. */
#ifndef MP_PARAMS_H
#define MP_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/tensor.h"

#define MP_MAX_PARAMS 256

typedef enum mp_group_id { MP_GROUP_WEIGHTS = 0, MP_GROUP_NORM = 1, MP_NGROUPS = 2 } mp_group_id;

typedef struct mp_param_view {
    char name[96]; /* e.g. "fc1.weight" */
    int ndim;
    int64_t shape[MP_MAX_DIMS];
    int group;      /* mp_group_id */
    int64_t offset; /* in elements, into the group's buffers */
    int64_t numel;
} mp_param_view;

/* How a group stores its values; see the file comment. */
typedef struct mp_group_spec {
    mp_dtype model, grad;
    bool master;  /* FP32 masters for a half model */
    bool no_grad; /* forward passes alone: no gradient buffer (mp_params_grad is empty) */
} mp_group_spec;

typedef struct mp_param_group {
    mp_group_spec spec;
    int64_t total;    /* elements, padding included */
    int64_t lo, n;    /* this rank's block: elements [lo, lo + n); 0 and total unsharded */
    mp_tensor model;  /* (total) spec.model, MP_MEM_WEIGHTS */
    mp_tensor grad;   /* (total) spec.grad, MP_MEM_GRADS */
    mp_tensor master; /* FP32: (n) MP_MEM_MASTER, or model itself, or empty */
} mp_param_group;

typedef struct mp_params {
    const struct mp_ops *ops; /* whose memory the buffers live in (mp_params_alloc) */
    int shard_rank, shard_size; /* mp_params_shard's; 0 and 0 (or 1) unsharded */
    int count;
    mp_param_view views[MP_MAX_PARAMS];
    mp_param_group groups[MP_NGROUPS];
} mp_params;

/* Declares a parameter of a group before mp_params_alloc; returns its index, or -1 when the
 * table is full or the name is taken. */
int mp_params_add(mp_params *p, const char *name, int group, int ndim, const int64_t *shape);

/* Shards the groups over `size` ranks (ZeRO-1), this one being `rank`: call after the last
 * mp_params_add and before mp_params_alloc. Each group's total grows to a whole number of
 * blocks of a multiple of 16 elements, and [lo, lo + n) becomes this rank's block. size 1 keeps
 * everything whole. */
void mp_params_shard(mp_params *p, int rank, int size);

/* Whether the groups are sharded over several ranks. */
bool mp_params_sharded(const mp_params *p);

/* Allocates every group's buffers (zeroed) as its spec says, in the memory of backend `ops`;
 * sets [lo, lo + n) to the whole group unless mp_params_shard set it. */
void mp_params_alloc(mp_params *p, const struct mp_ops *ops,
                     const mp_group_spec specs[MP_NGROUPS]);

/* Parameter i as a tensor of its own shape: the model copy, the gradient, or the FP32 master
 * (an empty tensor when its group has none, or when it is a separate master of a block that
 * does not hold all of parameter i). */
mp_tensor mp_params_value(const mp_params *p, int i);
mp_tensor mp_params_grad(const mp_params *p, int i);
mp_tensor mp_params_master(const mp_params *p, int i);

/* The part of parameter i that lies in this rank's block of its group: elements [*lo, *hi) of
 * the group (all of it unsharded); false when the block does not reach it. */
bool mp_params_block_part(const mp_params *p, int i, int64_t *lo, int64_t *hi);

/* Elements [lo, hi) of a group's flat tensor `flat` ((total) elements) as a 1-D view. */
mp_tensor mp_params_slice(const mp_tensor *flat, int64_t lo, int64_t hi);

/* What the optimizer updates for a group, this rank's block (n elements): the separate master,
 * else the block of the model. */
mp_tensor mp_params_updated(const mp_params *p, int group);

/* The index of the parameter called `name`, or -1. */
int mp_params_find(const mp_params *p, const char *name);

/* Number of parameter elements, padding excluded. */
int64_t mp_params_numel(const mp_params *p);

/* Frees the flat buffers. */
void mp_params_free(mp_params *p);

#endif
