/* The training step as a graph (amp.cuda_graphs; docs/gpu.md): after warm-up steps have
 * grown every workspace, the device part of a step (the BatchNorm statistics' save, forward, the
 * loss, backward, unscale-and-check, the optimizer step, the statistics' revert and the scaler
 * update) is captured once (ops->graph_begin .. graph_end) and then launched whole for each step
 * that does not hand a value to the host: one launch instead of a few hundred op calls. What
 * changes from step to step reaches the graph through memory that stays put: the batch and
 * labels copied into the trainer's own x and ydev before the launch, the learning rate through
 * amp_step_values (mp_amp_state.lr) and the step's index for the dropout masks with it
 * (mask_step, which the model's dropout reads: mp_model_mask_step), the stop request into st
 * before the launch. Steps that log the
 * loss, end at a host point or hold a shorter batch run eagerly, the same ops in the same order,
 * so a run's numbers are those of the same run without graphs, bit for bit. */
#ifndef MP_TRAIN_GRAPH_H
#define MP_TRAIN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/status.h"

struct mp_trainer;

typedef struct mp_train_graph {
    bool allowed;        /* the run may be captured (mp_train_graph_setup) */
    bool insist;         /* amp.cuda_graphs = "on": a failed capture ends the run */
    const char *why_not; /* when not allowed: why (for "on"'s error and auto's line on CUDA) */
    int warmup;          /* eager steps left before a capture */
    void *exec;          /* the captured step (NULL: none yet) */
    int64_t batch;       /* the micro-batch rows it holds */
    int64_t captured_at; /* the step first captured (0-based; -1: none) */
    int64_t captures;    /* captures made: more than one when a workspace moved (graph_valid) */
    int64_t launches;    /* steps run by launching a graph */
} mp_train_graph;

/* Decides from t's config, backend and model whether the step may be captured: not with
 * amp.cuda_graphs = "off", nor "auto" on a backend other than CUDA (the staged CPU backend captures
 * when asked to, with "on"), nor on a backend that queues nothing (the plain CPU), more than one
 * rank (the all-reduce is not captured), train.accum_steps > 1, log.profile (it times each op) or
 * a test hook. Where it may, the model's masks read the step from the state
 * (mp_model_mask_step). MP_EUSAGE naming the reason when amp.cuda_graphs = "on" and it may not;
 * MP_OK otherwise (auto: eager where it may not). */
mp_status mp_train_graph_setup(struct mp_trainer *t);

/* Whether this step (the device part of one micro-batch of `rows` rows, handing nothing to the
 * host) runs as a graph: allowed, past the warm-up (counted by this call) and, once captured, a
 * batch of the captured rows. */
bool mp_train_graph_wanted(struct mp_trainer *t, int64_t rows);

/* Runs the device part `body(t, arg)` of a step as the graph: captures it first when there is
 * none, or when the one there no longer holds the backend's workspaces (ops->graph_valid: an op
 * at another shape grew one since), rows as the captured batch's, then launches it; rank 0 says
 * so in one line at each capture. A capture that fails (an op that waits for the host inside
 * it, a library call CUDA cannot capture) ran nothing: with "on" it is that op's error, which
 * ends the run; with "auto" rank 0 says so in one line, the run goes on eagerly from this step
 * (body run now), and no capture is tried again. */
mp_status mp_train_graph_run(struct mp_trainer *t, int64_t step, int64_t rows,
                             mp_status (*body)(struct mp_trainer *t, void *arg), void *arg);

/* Frees the captured graph (none: nothing). */
void mp_train_graph_free(struct mp_trainer *t);

#endif
