/* The training step as graphs (amp.cuda_graphs; docs/gpu.md): after warm-up steps have grown
 * every workspace, the device part of a step (the BatchNorm statistics' save, forward, the loss,
 * backward, unscale-and-check, the optimizer step, the statistics' revert and the scaler update)
 * is captured once (ops->graph_begin .. graph_end) and then launched whole for each step that
 * does not hand a value to the host: one launch instead of a few hundred op calls. With
 * train.accum_steps > 1 each kind of micro-batch (the first, the middle ones, the last) is a
 * graph of its own, launched once a micro-batch. What changes from step to step reaches the
 * graphs through memory that stays put: the batch and labels copied into the trainer's own x and
 * ydev before each launch, the learning rate through amp_step_values (mp_amp_state.lr) and the
 * micro-batch's index for the dropout masks with it (mask_step, which the model's dropout reads:
 * mp_model_mask_step), the stop request into st before the step. Steps that log the loss, end at
 * a host point or hold a shorter batch run eagerly, the same ops in the same order, so a run's
 * numbers are those of the same run without graphs, bit for bit. With several ranks the
 * gradients' collectives are captured too (NCCL's own graph nodes; on the staged CPU backend a
 * host call that runs each over its MPI transport: comm/comm_device.h), every rank captures
 * the same step and agrees that all captures succeeded before any launches, and the watchdog
 * times each launch as one collective. */
#ifndef MP_TRAIN_GRAPH_H
#define MP_TRAIN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/status.h"

struct mp_trainer;

/* The kinds of a step's micro-batches, each captured as a graph of its own (bits of a kind):
 * the first starts the step (the BatchNorm statistics' save, the accumulator's first write), the
 * last ends it (the gradients' sum, the optimizer, the scaler); one micro-batch is both. */
enum { MP_GRAPH_FIRST = 1, MP_GRAPH_LAST = 2, MP_GRAPH_KINDS = 4 };

typedef struct mp_train_graph {
    bool allowed;        /* the run may be captured (mp_train_graph_setup) */
    bool insist;         /* amp.cuda_graphs = "on": a failed capture ends the run */
    const char *why_not; /* when not allowed: why (for "on"'s error and auto's line on CUDA) */
    int warmup;          /* eager steps left before a capture */
    void *exec[MP_GRAPH_KINDS];    /* the captured micro-batch of each kind (NULL: none yet) */
    int64_t batch[MP_GRAPH_KINDS]; /* the rows it holds */
    int micro[MP_GRAPH_KINDS];     /* the micro-batches of its step (its loss scale is 1/micro) */
    int64_t captured_at; /* the step first captured (0-based; -1: none) */
    int64_t captures;    /* captures made: one a kind, more when a workspace moved (graph_valid) */
    int64_t launches;    /* micro-batches run by launching a graph */
    int64_t launched_at[MP_GRAPH_KINDS]; /* the step of each kind's last launch (-1: none, or
                            eager work since); a launch of a kind at neither that step nor the
                            next first re-checks with the other ranks */
    bool masks_read;     /* the model's masks read their index from the state (set up where the
                            step may be captured; it stays so after a failed capture) */
} mp_train_graph;

/* Decides from t's config, backend and model whether the step may be captured: not with
 * amp.cuda_graphs = "off", nor "auto" on a backend other than CUDA (the staged CPU backend captures
 * when asked to, with "on"), nor on a backend that queues nothing (the plain CPU), several ranks
 * whose collectives a graph cannot hold (mp_comm_can_capture: they go through the host),
 * log.profile (it times each op) or a test hook; "auto" with several ranks runs eagerly too
 * (their capture is "on"'s until a GPU run has checked it). Where it
 * may, the model's masks read the step from the state (mp_model_mask_step: amp_step_values
 * writes step * accum + i before micro-batch i). MP_EUSAGE naming the reason when
 * amp.cuda_graphs = "on" and it may not; MP_OK otherwise (auto: eager where it may not). */
mp_status mp_train_graph_setup(struct mp_trainer *t);

/* Whether this step (its micro-batches' device parts, handing nothing to the host) runs as
 * graphs: allowed and past the warm-up (counted by this call, once a step). */
bool mp_train_graph_wanted(struct mp_trainer *t);

/* Runs the device part `body(t, arg)` of a micro-batch of kind `kind` (MP_GRAPH_FIRST |
 * MP_GRAPH_LAST bits) and `rows` rows of a step of `micro` micro-batches as that kind's graph:
 * captures it first when there is none, or when the one there no longer holds the backend's
 * workspaces (ops->graph_valid: an op at another shape grew one since), then launches it; rank 0
 * says so in one line at each capture. A batch of other rows, or a step of another number of
 * micro-batches, than the captured one's runs eagerly (body now): its values passed by value
 * (the loss gradient's 1/micro) differ (the trainer's shorter last window of an epoch ends at
 * a host point and runs eagerly anyway). A capture that
 * fails (an op that waits for the host inside it, a library call CUDA cannot capture) ran
 * nothing: with "on" it is that op's error, which ends the run; with "auto" rank 0 says so in
 * one line, the run goes on eagerly from this micro-batch (body run now; g->allowed false), and
 * no capture is tried again. With several ranks it is collective: every rank calls it for the
 * same micro-batches with the same rows; the ranks agree after each capture whether all
 * succeeded (one that failed fails every rank's: "the capture failed on rank R"), and, where
 * eager steps ran since the last launch, whether any rank must capture again. */
mp_status mp_train_graph_run(struct mp_trainer *t, int64_t step, int kind, int64_t rows,
                             int micro, mp_status (*body)(struct mp_trainer *t, void *arg),
                             void *arg);

/* Frees the captured graphs (none: nothing), after a launch still running on the device
 * transport has finished (its collectives are the communicator's until the graph goes: call
 * before mp_comm_drop_device). */
void mp_train_graph_free(struct mp_trainer *t);

#endif
