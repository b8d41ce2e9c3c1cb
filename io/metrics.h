/* Metrics as JSON Lines (docs/ARCHITECTURE.md §6): one object per line, "type" first, written by
 * rank 0 with cJSON and flushed after every record so a crash loses nothing already logged.
 * A metrics sink opened with an empty path writes nothing. */
#ifndef MP_METRICS_H
#define MP_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/status.h"

typedef struct mp_metrics mp_metrics;

typedef struct mp_step_record {
    int64_t step;  /* 1-based optimizer step */
    int64_t epoch; /* 0-based */
    double loss, lr, loss_scale;
    bool skipped;
    double images_per_s, step_ms;
    double device_ms;   /* per step: the device's time over the window between clock marks
                           (ops->mark_elapsed; the CPU backend: the host's); < 0: null */
    double comm_ms;     /* per step: first gradient bucket started to all buckets summed */
    double comm_hidden; /* fraction of comm_ms spent while backward still ran; < 0: no
                           communication (one rank), written as null */
    double comm_last_ms; /* per step, over the window's last 256 steps that every rank
                            measured: comm_ms as the last rank to start its first bucket saw it
                            (the least over the ranks), without the wait for ranks still
                            computing; < 0: none measured, written as null */
    double comm_skew_ms; /* the same steps: the most comm_ms over the ranks less the least (how
                            long the first rank to start waited for the last); < 0: null */
} mp_step_record;

typedef struct mp_eval_record {
    int64_t epoch;
    double loss, accuracy;
    bool text; /* a text dataset: "bpb" (mp_metrics_bpb of loss) follows "accuracy" */
} mp_eval_record;

/* A checkpoint written: its step and file, and what it cost the training steps. */
typedef struct mp_ckpt_record {
    int64_t step;
    const char *path;
    int64_t bytes;
    bool async;           /* written by the background writer (checkpoint.async) */
    double stall_s;       /* the step boundary's time for the save (rank 0): synchronous, the
                             whole save; async, waiting for the save before plus the snapshot */
    double wait_s;        /* of stall_s, waiting for the save before to finish (async) */
    double write_s;       /* the file's writing until durable under its name */
    int64_t steps_during; /* training steps completed while it was written (async) */
} mp_ckpt_record;

typedef struct mp_summary_record {
    int world_size;
    const char *opt_level, *half, *backend, *model;
    double wall_s, images_per_s, accuracy, final_loss, loss_scale;
    bool text;        /* a text dataset: "test_bpb" (mp_metrics_bpb of test_loss) follows
                         "accuracy"; test_loss is not written otherwise */
    double test_loss;
    double step_s, input_wait_s, comm_exposed_s; /* written as "time_s": {steps, compute,
                                                    comm_exposed, input_wait} */
    int64_t steps, skipped_steps, peak_mem_bytes;
    /* The loader (io/loader.h's mp_loader_stats, and the consumer's waits for a slot's fence),
     * written as the object "loader": {batches, fill_s, fence_wait_s, slot_wait_s} when it
     * built any batch. */
    int64_t loader_fills;
    double loader_fill_s, loader_fence_s, loader_slot_wait_s;
    /* The peaks of the counted bytes by place (mp_mem_peak_at: device, host) and of the
     * device's whole use (ops->mem_used_bytes; < 0: unknown, not written). */
    int64_t device_peak_bytes, host_peak_bytes, device_used_peak_bytes;
    int64_t mem_bytes[8];      /* peak bytes by category, mem_names[i] naming each */
    const char *mem_names[8];
    int n_mem;
    /* The resolved opt-level table, written as the object "amp". */
    const char *amp_weights, *amp_compute, *amp_norm, *amp_grads; /* dtype names */
    bool amp_master_weights, amp_keep_batchnorm_fp32;
    double amp_loss_scale;     /* 0 = dynamic */
    /* amp.cuda_graphs: the step first captured (1-based, as step records count), the captures
     * (one a kind of micro-batch, more when a workspace moved and the step was captured anew)
     * and the micro-batches run by launching a graph (steps times train.accum_steps), written
     * as the object "graph" when there were any launches. */
    int64_t graph_captured_at, graph_captures, graph_launches;
    /* log.profile: n_prof entries (0: none), "<op> <phase>" and milliseconds per step, written
     * as the object "profile_ms" with the step's own as "step". */
    int n_prof;
    char prof_name[64][40];
    double prof_ms[64], prof_step_ms;
} mp_summary_record;

/* A gradient as backward completes it (log.profile): see mp_backward_record. */
typedef struct mp_backward_param {
    const char *name, *group; /* "fc1.weight"; "weights" or "norm" (engine/params.h) */
    int64_t elements, bytes;  /* bytes of its slot on the wire (alignment padding included, as
                                 buckets carry it; comm.grad_dtype or the gradient's dtype) */
    double ready_ms;          /* from backward's start to its gradient's completion */
} mp_backward_param;

/* A gradient bucket of the engine's plan (comm/buckets.h), in start order. */
typedef struct mp_backward_bucket {
    int64_t bytes;
    int params;
    double ready_ms; /* when backward completed its last gradient */
} mp_backward_bucket;

/* When backward completes each gradient, the mean over `steps` profiled steps (the first left
 * out, as in the profile); the scaling model's input (cluster/step_model.py), written as the
 * record "backward" with "params" in backward's order and "buckets" in start order. */
typedef struct mp_backward_record {
    int64_t steps;
    int64_t micro_batches; /* a step's (train.accum_steps): the summary's phase times cover them
                              all, the ready times only the last one's backward */
    double bucket_mb, first_bucket_mb;
    int nparams, nbuckets;
    const mp_backward_param *params;
    const mp_backward_bucket *buckets;
} mp_backward_record;

/* Bits per byte of a byte-level model whose mean cross-entropy (in nats per byte) is `loss`:
 * loss / ln 2. */
double mp_metrics_bpb(double loss);

/* Opens (truncates) the JSON Lines file at `path`, creating missing parent directories; the
 * file this process's stdout or stderr writes (/dev/stdout into a job's log) is appended to
 * instead. path == NULL or "" gives a sink that writes nothing. MP_EUSAGE if it cannot be
 * created, if it is a FIFO no process reads (rather than waiting), or if it holds another
 * program's file (a regular file whose bytes do not start as metrics do, or cannot be read),
 * which is left as it is, or if another sink has it open (an open file description lock held
 * while a sink is open: two runs naming one file), also left as it is. */
mp_status mp_metrics_open(mp_metrics **m, const char *path);

/* Append one record each; I/O errors are reported once on stderr and then ignored. */
void mp_metrics_step(mp_metrics *m, const mp_step_record *r);
void mp_metrics_eval(mp_metrics *m, const mp_eval_record *r);
void mp_metrics_checkpoint(mp_metrics *m, const mp_ckpt_record *r);
void mp_metrics_summary(mp_metrics *m, const mp_summary_record *r);
void mp_metrics_backward(mp_metrics *m, const mp_backward_record *r);

/* Opens the metrics of a run resumed from a checkpoint taken after `step`, whose next step
 * belongs to `epoch` (0-based): an existing file keeps its records up to that point (every line
 * before the first step record past `step`, eval record of `epoch` or later, summary or
 * backward record (the end of a run); a torn
 * last line is dropped too) and is appended to; a missing one is created. The resumed run then
 * writes what an uninterrupted run would have. Errors as mp_metrics_open. */
mp_status mp_metrics_open_resumed(mp_metrics **m, const char *path, int64_t step,
                                  int64_t epoch);

/* Closes the file and frees m (NULL is ignored). */
void mp_metrics_close(mp_metrics *m);

#endif
