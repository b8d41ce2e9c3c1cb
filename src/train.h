/* The training run (docs/ARCHITECTURE.md §2 on the CPU backend): data, sampler, model, optimizer,
 * schedule and gradient buckets set up from a validated config on every rank, then the step loop
 * with gradients summed over ranks during backward, periodic evaluation on the test split, metrics
  * and progress on rank 0. */
#ifndef MP_TRAIN_H
#define MP_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/buckets.h"
#include "comm/comm.h"
#include "engine/amp.h"
#include "engine/host_swap.h"
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
#include "src/checkpoint_async.h"
#include "src/config.h"
#include "src/train_graph.h"
#include "src/train_ready.h"
#include "src/train_state.h"

typedef struct mp_train_result {
    int64_t steps;          /* optimizer steps taken */
    double final_loss;      /* global mean loss of the last step */
    double test_loss, accuracy; /* last evaluation on the test split */
    double wall_s, images_per_s;
    /* Rank 0's time in training steps (evaluation and checkpoints left out), and its parts
     * spent waiting for the loader and for gradient all-reduces that backward did not hide;
     * the rest is compute. This invocation only. */
    double step_s, input_wait_s, comm_exposed_s;
    int64_t skipped_steps;
    /* The device's whole use (ops->mem_used_bytes) at its highest when sampled: at the start,
     * at every logged step and at the end; -1 where the backend does not know. */
    int64_t device_used_peak;
    double loss_scale;      /* at the end */
    bool stopped;           /* by a signal or train.step_budget, before the end */
    const char *stopped_by; /* "SIGTERM", "SIGUSR1", "train.step_budget" */
    int stop_signal;        /* the agreed signal that stopped it, or 0 */
    char checkpoint[1100];  /* rank 0: the last checkpoint written, "" if none */
} mp_train_result;

/* ZeRO-1's sharded state seen whole (mp_train_gather): while `on`, each group's separate master
 * and optimizer slots point at whole-group copies (MP_MEM_WORKSPACE) and [lo, lo + n) spans the
 * group; the rank's own blocks wait here. */
typedef struct mp_zero_whole {
    bool on;
    mp_tensor master[MP_NGROUPS], slot1[MP_NGROUPS], slot2[MP_NGROUPS];
    int64_t lo[MP_NGROUPS], n[MP_NGROUPS];
} mp_zero_whole;

typedef struct mp_trainer {
    const mp_config *cfg;
    mp_comm *comm;
    const mp_ops *ops;
    mp_dataset train, test;
    uint64_t train_digest;  /* mp_dataset_digest(&train), for checkpoints */
    mp_sampler sampler;
    mp_loader *loader;      /* training batches, prefetched */
    mp_amp_policy amp;
    mp_model model;
    mp_grad_sync sync;      /* gradient buckets, summed over ranks during backward */
    mp_ready_times ready;   /* log.profile: when backward completes each gradient */
    int64_t accum;          /* micro-batches per optimizer step (train.accum_steps) */
    mp_zero_whole whole;    /* the sharded state gathered whole, when it is (optim.zero) */
    mp_optimizer opt;
    mp_schedule sched;
    mp_scaler_config scaler_cfg;
    mp_scaler_state scaler; /* host copy of st->scaler, exact after mp_train_read_state */
    mp_amp_state *st;       /* the step's mixed-precision state, in the backend's memory */
    mp_amp_state *hst;      /* its host copy, read at host points (host_alloc's memory) */
    double *stop_req;       /* this rank's stop request as last written to st->stop (0 or a
                               signal number: it changes once at most), in host_alloc's memory
                               so that its copy_in runs asynchronously */
    mp_tensor x, dlogits;   /* (batch, H, W, C) input (the policy's input dtype) and
                               (batch, classes) loss gradient (the logits' dtype) */
    int32_t *y;             /* (batch) labels, host_alloc's memory */
    int32_t *ydev;          /* (batch) labels in the backend's memory (y itself on the CPU) */
    void *xhost;            /* (batch, H, W, C) host staging of x for evaluation, host_alloc's
                               memory (x's own storage on the CPU) */
    double mean[MP_DATA_MAX_CHANNELS], std[MP_DATA_MAX_CHANNELS]; /* per channel */
    int device;             /* the CUDA device of this rank, -1 on the CPU */
    int cpu_threads;        /* the CPU libraries' threads per rank (mp_backend_cpu_threads) */
    int cpu_threads_asked;  /* what cpu_threads_var asked for (0: no variable; the cores' share) */
    const char *cpu_threads_var; /* OMP_NUM_THREADS or OPENBLAS_NUM_THREADS, or NULL */
    bool device_comm;       /* mp_train_connect opened comm's device transport (NCCL) */
    bool forward_only;      /* set up to evaluate only (mp_train_setup_eval) */
    int64_t steps_per_epoch, total_steps;
    mp_named_tensor bufs[MP_MAX_PARAMS]; /* the model's persistent buffers, made equal to
                                            rank 0's before each evaluation */
    int nbufs;
    float *bufpack;         /* (sum of the buffers' sizes) broadcast staging */
    int64_t bufpack_len;
    mp_resume_point start;  /* set by mp_checkpoint_load/share for a resumed run */
    int stop_signal;        /* the stop signal any rank received (agreed each step), or 0 */
    bool stop;              /* the run stops after this step (signal or step budget) */
    bool failed_together;   /* the failure mp_train_run (or an evaluation) returned was decided
                               from the agreed state (divergence, a bad label, a rank's data
                               error): every rank returns it at the same step, so rank
                               fail_reporter reports it and no rank aborts */
    int fail_reporter;      /* with failed_together: the rank that prints the failure (0, or
                               the lowest rank whose data failed) */
    mp_status data_failed;  /* this rank's loader failed during a run of several ranks (MP_OK
                               while not): it trains on blank batches until the run ends at the
                               next host point, where data_why is its message */
    char data_why[1024];
    double *data_word;      /* {1, its data_error word} once data_failed: what it writes into
                               the state's found_inf and data_error each step, host_alloc's
                               memory so that the copy_in runs asynchronously */
    mp_metrics *metrics;    /* rank 0 only; NULL elsewhere */
    mp_ckpt_async *ckpt;    /* checkpoint.async's writer: rank 0 only; NULL elsewhere */
    double ckpt_stall_s, ckpt_wait_s; /* the step boundary's time for the save in flight */
    mp_progress progress;
    mp_train_graph graph;   /* the step captured as a graph (amp.cuda_graphs) */
    /* Test hooks, NULL in normal runs. before_forward may change this rank's batch x (on a
     * host-memory backend the loader's slot itself, refilled only after the step);
     * before_backward may change this rank's loss gradient
     * (n, classes) before backward and the all-reduce carry it (with accumulation: each
     * micro-batch's); after_reduce runs once the gradients are summed over ranks (sharded: the
     * rank's block of them), before the overflow check and the optimizer step. The
     * tensors are in the backend's memory: a hook that touches them on the host needs a CPU
     * backend (host_memory) or mp_host_begin/mp_host_end. */
    void (*before_forward)(struct mp_trainer *t, int64_t step, mp_tensor *x, void *arg);
    void (*before_backward)(struct mp_trainer *t, int64_t step, mp_tensor *dlogits, void *arg);
    void (*after_reduce)(struct mp_trainer *t, int64_t step, void *arg);
    /* step_end runs at the end of each step of mp_train_run, after its logging, evaluation and
     * checkpoint. */
    void (*step_end)(struct mp_trainer *t, int64_t step, void *arg);
    void *hook_arg;
} mp_trainer;

/* Loads the data (token shards only opened: their tokens are mp_train_check_data's), builds the
 * model (initialised on rank 0) and prepares optimizer and schedule; writes no file and calls no
 * collective, so callers agree on the status with mp_comm_agree before going on, then call
 * mp_train_check_data. MP_EUSAGE for settings this build cannot run or a model too big for the
 * host, MP_EDATA for data files. */
mp_status mp_train_setup(mp_trainer *t, const mp_config *cfg, mp_comm *comm);

/* mp_train_setup for evaluation alone (mpdist eval): the model's activations planned over the
 * forward pass (mp_model_opts.forward_only), its parameters whole on every rank (no ZeRO
 * sharding), no gradients, optimizer state, buckets, sampler or training loader. The data
 * formats whose test split is a file of its own (idx, cifar10, synthetic) read that split
 * alone, so the training files need not exist; t->train is then empty. Such a trainer
 * evaluates and loads weights; it cannot train. */
mp_status mp_train_setup_eval(mp_trainer *t, const mp_config *cfg, mp_comm *comm);

/* The cores of this host divided by its ranks (comm->local_size). Not collective. */
int mp_train_core_share(const mp_comm *comm);

/* The cores this process may run on (its affinity: a launcher may have bound it), 0 when
 * unknown. */
int mp_train_cores_allowed(void);

/* The layer specs of c's model (model.layers, or the preset with its keys) into specs (room
 * for MP_MAX_LAYERS), their count in *n, for a model on the CUDA backend when `cuda` (where
 * model.attention = "auto" is the (T, T) path). MP_EUSAGE naming c's file for a preset's bad
 * depth. */
mp_status mp_train_model_specs(const mp_config *c, bool cuda, mp_layer_spec *specs, int *n);

/* The config's data into t->train and t->test, token shards opened but their tokens not yet
 * checked against the vocabulary (mp_train_check_data). Evaluating, the formats whose test
 * split is a file of its own (idx, cifar10, synthetic) read that split alone: mpdist eval needs
 * no training files (folder takes the training classes' names, text and tokens split one file,
 * hdf5 opens both datasets' headers). */
mp_status mp_train_load_data(mp_trainer *t);

/* Collective, after every rank's mp_train_setup (or _eval) succeeded: checks that every rank
 * read the same data as rank 0 (both splits' sizes and shapes, the training set's
 * mp_dataset_digest, the token pieces), then what the set-up opened without reading, today the
 * tokens of token shards against the vocabulary, each rank a share of the pieces (io/tokens.h).
 * Returns this rank's own status (MP_EDATA for data that differ from rank 0's, a bad token or a
 * read error with its file, MP_ESTOPPED for a stop signal, MP_ECOMM when a collective failed);
 * the ranks stop together at the first stage or round where any failed, only the rank with the
 * first bad piece in the files' order keeping its failure, and callers agree on the result
 * (mp_comm_agree) so that the rank that failed reports. */
mp_status mp_train_check_data(mp_trainer *t);

/* The opt-level policy c's amp group resolves to. */
mp_amp_policy mp_train_amp_policy(const mp_config *c);

/* Chooses how gradients travel (comm.backend: NCCL when the backend is CUDA, this build has
 * NCCL and no two ranks share a GPU; MPI otherwise), opens NCCL when chosen and prints the choice
 * and its reason on rank 0. Collective, after a successful setup on all ranks. MP_EUSAGE when
 * comm.backend = "nccl" cannot be had. */
mp_status mp_train_connect(mp_trainer *t);

/* Broadcasts rank 0's initial parameters to every rank; collective, after a successful setup
 * on all ranks. */
mp_status mp_train_sync(mp_trainer *t);

/* Broadcasts rank 0's tensor x (backend memory; nothing when it has none) to every rank,
 * through the communicator's data plane, and waits; `what` names it in messages. Collective. */
mp_status mp_train_bcast(mp_trainer *t, mp_tensor *x, const char *what);

/* Parts of the training state that live in the backend's memory. */
enum { MP_STATE_PARAMS = 1, MP_STATE_OPTIM = 2, MP_STATE_BUFFERS = 4 };

/* Writes to out the tensors of the given parts (each group's model and master, each group's
 * optimizer slots, the persistent buffers; some may be empty) for mp_host_begin, and returns
 * how many: at most 4 * MP_NGROUPS + MP_MAX_PARAMS. */
int mp_train_state_tensors(mp_trainer *t, unsigned parts, mp_tensor **out);

/* The trainer's state as a checkpoint sees it (src/train_state.h): views into t, valid while t
 * lives and its tensors stay where they are (ZeRO-1's gathered whole state included, when it is
 * gathered). Not collective. */
mp_train_state mp_train_state_of(mp_trainer *t);

/* Rank 0, at the end of a run: the summary record of result r (log.metrics; io/metrics.h) with
 * the resolved opt levels, the memory peaks, the profile (log.profile), the ready times and the
 * graph's captures and launches. */
void mp_train_write_summary(const mp_trainer *t, const mp_train_result *r);

/* Collective, after rank 0 loaded a checkpoint (mp_checkpoint_load) or found nothing to load:
 * broadcasts the resume point, the scaler, the parameters, the BatchNorm statistics and the
 * optimizer state to every rank, and replans the steps for this rank count. Rank 0's load
 * checked the generator table against the resume point. MP_EUSAGE on every rank when the rest
 * of the resumed epoch has a batch the model refuses (mp_train_check_batches). */
mp_status mp_train_share_start(mp_trainer *t);

/* Opens this rank's trace file (log.trace; collective then: the clocks are aligned), the
 * metrics file (rank 0; a resumed run keeps the records before its checkpoint and appends) and
 * starts the progress line. MP_EUSAGE when log.metrics or the trace file cannot be created, is
 * a FIFO no process reads, holds another program's file (mp_metrics_open), is a name that
 * checkpoint.dir's saves write, or one the trace writes (mp_train_trace_spares). */
mp_status mp_train_open_outputs(mp_trainer *t);

/* With log.trace: rank 0's clock on every rank (collective), then this rank's file,
 * DIR/rank-R.json, refused (MP_EUSAGE) where it holds another program's file; rank 0 also
 * removes an earlier, larger run's rank files and says where the trace goes. */
mp_status mp_train_open_trace(mp_trainer *t);

/* MP_EUSAGE when log.metrics `metrics` is log.trace's directory `trace` or one of its rank
 * files' names (the trace would write over the metrics), once the trace's directory exists;
 * else MP_OK (also for no metrics). */
mp_status mp_train_trace_spares(const char *trace, const char *metrics);

/* Copies the state in the backend's memory (t->st) to the host: t->hst, t->scaler,
 * t->opt.steps and t->stop_signal (waits for the device). */
mp_status mp_train_read_state(mp_trainer *t);

/* Writes t->scaler and t->opt.steps (a fresh or a resumed run's) into t->st. */
mp_status mp_train_write_state(mp_trainer *t);

/* Trains for train.epochs (or until train.max_steps) and evaluates; collective. The host waits
 * for the device only at host points: every step when the backend's memory is the host's, else
 * at logging, evaluation, checkpoint, budget, epoch-end and last steps, where it reads the state
 * (loss scale, skipped steps, stop signals, divergence). MP_EINTERNAL for a trainer set up by
 * mp_train_setup_eval. */
mp_status mp_train_run(mp_trainer *t, mp_train_result *r);

/* Rank 0 writes state s as the checkpoint of `at` into r->checkpoint (the other ranks take part
 * when s.whole gathers a sharded state one parameter at a time; otherwise s is whole and they do
 * nothing), or with checkpoint.async copies s into the writer's snapshot and returns
 * (r->checkpoint is set when mp_train_save_finished reports the file). MP_ECKPT when the file
 * cannot be written. */
mp_status mp_train_save_state(mp_trainer *t, mp_train_state *s,
                              const mp_resume_point *at, mp_train_result *r);

/* After mp_train_save_state, begun at t0 (mp_now) of which `waited` seconds went waiting for the
 * save before: the trace span, and synchronously the pruning of old files and, on rank 0, the
 * report (progress line, metrics record with the stall); with checkpoint.async the stall is kept
 * for mp_train_save_finished's report. */
void mp_train_saved(mp_trainer *t, const mp_train_state *s, const mp_resume_point *at,
                    mp_train_result *r, double t0, double waited);

/* checkpoint.async on rank 0: reports the save in flight once it has finished (with wait: waits
 * for it first) into r->checkpoint, the progress line and the metrics, or returns the writer's
 * failure (MP_ECKPT). Nothing elsewhere or when no save is in flight. */
mp_status mp_train_save_finished(mp_trainer *t, bool wait, mp_train_result *r);

/* Batches (micro-batches) for `count` samples of this rank in one epoch: count / batch_size,
 * rounded up unless data.drop_last. Only the rest of a resumed epoch can hold less than a batch
 * under data.drop_last (set-up refuses a share that small): it has none, the rest dropped. */
int64_t mp_train_batches(const mp_trainer *t, int64_t count);

/* Optimizer steps for `count` samples of this rank in one epoch: its batches in windows of
 * train.accum_steps, the last window taking what is left. */
int64_t mp_train_steps(const mp_trainer *t, int64_t count);

/* MP_OK when the model can train every batch of an epoch of `count` samples a rank (the batches
 * of mp_train_batches: data.batch_size, and a shorter last one), else MP_EUSAGE naming the batch
 * and the layer's refusal (mp_model_check_batch), for set-up (resumed: the rest of a resumed
 * epoch, which a new rank count or batch size shards anew) to say before any step what every
 * rank would meet in it. The same on every rank. */
mp_status mp_train_check_batches(const mp_trainer *t, int64_t count, bool resumed);

/* ZeRO-1 (optim.zero = 1 on several ranks): makes every rank's separate FP32 masters and
 * optimizer slots whole-group copies gathered from their owners, for the code that reads or
 * writes the state by parameter (checkpoints, the finiteness check, a resume's broadcast).
 * Collective; nothing when the state is not sharded or is whole already. */
mp_status mp_train_gather(mp_trainer *t);

/* mp_train_state.whole for trainer `arg` (ZeRO-1, not gathered): parameter i's whole FP32
 * master (part 0) or optimizer slot (1, 2) into buf on every rank, each block broadcast by its
 * owner from the host copy of its shard. Collective. */
mp_status mp_train_whole_part(void *arg, int part, int i, float *buf);

/* Ends mp_train_gather: with `keep`, the rank's own block of the whole copies is copied into
 * its shards first (after a resume wrote them); the copies are freed. Not collective. */
mp_status mp_train_ungather(mp_trainer *t, bool keep);

/* Plans the steps of a resumed run (t->start set): the rest of the start epoch as the sampler
 * re-shards it over the current ranks, then whole epochs, up to train.max_steps. The schedule
 * keeps its place in the epochs (warm-up, decays and cosine's end where the config puts them):
 * its offset (engine/schedule.h) takes the resume to the step this run's batch would be at,
 * 0 for a run whose global batch never changed, and 0 when train.max_steps ends the run (its
 * length is then in steps). A fresh run keeps the plan of mp_train_setup. */
void mp_train_replan(mp_trainer *t);

/* Whether a resumed run's start epoch has a rest of less than a batch that data.drop_last
 * drops (no step in it; train.max_steps not reached): the run ends that epoch before any step,
 * its evaluation when due, even when no step follows. False for a fresh run. */
bool mp_train_rest_dropped(const mp_trainer *t);

/* Makes every rank's persistent buffers (BatchNorm running statistics) equal to rank 0's;
 * collective. Called before each evaluation: training reads only batch statistics, so this
 * gives what PyTorch DDP's per-forward broadcast_buffers gives, without a collective per step,
 * and rank 0's statistics are the ones a checkpoint stores. */
mp_status mp_train_sync_buffers(mp_trainer *t);

/* Evaluates the model on the test split, sharded over ranks; collective. */
mp_status mp_train_evaluate(mp_trainer *t, double *loss, double *accuracy);

/* How fast an evaluation ran: `samples` (of all ranks) in `seconds` of this rank's wall time,
 * the first round of batches (one per rank: warm-up) left out unless it was the only one. */
typedef struct mp_eval_speed {
    int64_t samples;
    double seconds;
} mp_eval_speed;

/* mp_train_evaluate that also measures its speed into *speed. */
mp_status mp_train_evaluate_timed(mp_trainer *t, double *loss, double *accuracy,
                                  mp_eval_speed *speed);

/* Frees everything setup allocated (safe after a failed setup). */
void mp_train_free(mp_trainer *t);

#endif
