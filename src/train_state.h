/* The training state a checkpoint holds (docs/ARCHITECTURE.md §6): where the run stands and views
 * of what it has learned, taken from the trainer (mp_train_state_of, src/train.h) and handed to
 * src/checkpoint.c, so that checkpoints never see the trainer nor call back into it. */
#ifndef MP_TRAIN_STATE_H
#define MP_TRAIN_STATE_H

#include <stdint.h>

#include "engine/layer.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "engine/params.h"
#include "engine/scaler.h"
#include "src/config.h"

/* Where a run starts (all zero for a fresh run), and what a checkpoint records of where the
 * run it was taken from stood. */
typedef struct mp_resume_point {
    int64_t step;     /* optimizer steps taken */
    int64_t epoch;    /* the epoch the next step belongs to */
    int64_t position; /* samples of that epoch all ranks consumed (DistributedSampler order) */
    int64_t world_size, global_batch; /* of the run that wrote it (0: a fresh run) */
    int64_t seed;
    int shuffled; /* the data.shuffle it was written with: 0, 1, or -1 where the file does not
                     say; set by a load on rank 0 only (other points leave 0, never read) */
} mp_resume_point;

/* The state, as views into its owner. The tensors are in the backend's memory (ops): a reader
 * on the host swaps them in (mp_host_begin) first. */
typedef struct mp_train_state {
    const mp_config *cfg;
    const mp_ops *ops;
    int rank, world_size;
    int64_t accum;                   /* micro-batches per optimizer step */
    int64_t dataset_size;            /* samples in the training split */
    uint64_t dataset_digest;         /* mp_dataset_digest of it (0: none) */
    mp_model *model;                 /* the parameters: FP32 masters and their half copies */
    const mp_params *params;         /* what a save writes of them: model->params, or a copy */
    const mp_named_tensor *bufs;     /* the persistent buffers (BatchNorm running statistics) */
    int nbufs;
    mp_optimizer *opt;               /* its slots and step count */
    const mp_scaler_config *scaler_cfg;
    mp_scaler_state *scaler;         /* the host copy, exact at a host point */
    mp_resume_point *start;          /* where a resumed run starts: a load writes it */
    mp_tensor *tensors[4 * MP_NGROUPS + MP_MAX_PARAMS]; /* every tensor above, for the swap */
    int ntensors;
    mp_tensor *optim[2 * MP_NGROUPS]; /* the optimizer's slots alone */
    int noptim;
    /* ZeRO-1 saved without a whole copy (NULL otherwise): fills buf (FP32, parameter i's numel)
     * with the whole values of its sharded FP32 master (part 0) or optimizer slot (parts 1, 2)
     * from their owners, with the tensors in host memory (mp_host_begin). Collective: every rank
     * asks for the same (part, i) in the same order, inside mp_checkpoint_save. */
    mp_status (*whole)(void *arg, int part, int i, float *buf);
    void *whole_arg;
} mp_train_state;

#endif
