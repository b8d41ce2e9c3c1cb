/* The training run (DESIGN §2 on the CPU backend): data, sampler, model, optimizer, schedule and
 * gradient buckets set up from a validated config on every rank, then the step loop with
 * gradients summed over ranks during backward, periodic evaluation on the test split, metrics and progress on rank 0. */
#ifndef MP_TRAIN_H
#define MP_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/buckets.h"
#include "comm/comm.h"
#include "engine/amp.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "engine/presets.h"
#include "engine/scaler.h"
#include "engine/schedule.h"
#include "io/augment.h"
#include "io/dataset.h"
#include "io/loader.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "io/sampler.h"
#include "src/config.h"

typedef struct mp_train_result {
    int64_t steps;          /* optimizer steps taken */
    double final_loss;      /* global mean loss of the last step */
    double test_loss, accuracy; /* last evaluation on the test split */
    double wall_s, images_per_s;
    int64_t skipped_steps;
    double loss_scale;      /* at the end */
} mp_train_result;

typedef struct mp_trainer {
    const mp_config *cfg;
    mp_comm *comm;
    const mp_ops *ops;
    mp_dataset train, test;
    mp_sampler sampler;
    mp_loader *loader;      /* training batches, prefetched */
    mp_amp_policy amp;
    mp_model model;
    mp_grad_sync sync;      /* gradient buckets, summed over ranks during backward */
    mp_optimizer opt;
    mp_schedule sched;
    mp_scaler_config scaler_cfg;
    mp_scaler_state scaler;
    mp_tensor x, dlogits;   /* (batch, H, W, C) input (the policy's input dtype) and
                               (batch, classes) loss gradient (the logits' dtype) */
    int32_t *y;             /* (batch) labels */
    double mean[3], std[3]; /* per-channel normalisation */
    int64_t steps_per_epoch, total_steps;
    mp_metrics *metrics;    /* rank 0 only; NULL elsewhere */
    mp_progress progress;
    /* Test hooks, NULL in normal runs. before_backward may change this rank's loss gradient
     * (n, classes) before backward and the all-reduce carry it; after_reduce runs once the
     * gradients are summed over ranks, before the overflow check and the optimizer step. */
    void (*before_backward)(struct mp_trainer *t, int64_t step, mp_tensor *dlogits, void *arg);
    void (*after_reduce)(struct mp_trainer *t, int64_t step, void *arg);
    void *hook_arg;
} mp_trainer;

/* Loads the data, builds the model (initialised on rank 0) and prepares optimizer and
 * schedule; writes no file and calls no collective, so callers agree on the status with
 * mp_comm_agree before going on. MP_EUSAGE for settings this build cannot run or a model
 * too big for the host, MP_EDATA for data files. */
mp_status mp_train_setup(mp_trainer *t, const mp_config *cfg, mp_comm *comm);

/* Broadcasts rank 0's initial parameters to every rank; collective, after a successful setup
 * on all ranks. */
mp_status mp_train_sync(mp_trainer *t);

/* Opens the metrics file (rank 0) and starts the progress line; nothing else writes files.
 * MP_EUSAGE when log.metrics cannot be created. Not collective. */
mp_status mp_train_open_outputs(mp_trainer *t);

/* Trains for train.epochs (or until train.max_steps) and evaluates; collective. */
mp_status mp_train_run(mp_trainer *t, mp_train_result *r);

/* Evaluates the model on the test split, sharded over ranks; collective. */
mp_status mp_train_evaluate(mp_trainer *t, double *loss, double *accuracy);

/* Frees everything setup allocated (safe after a failed setup). */
void mp_train_free(mp_trainer *t);

#endif
