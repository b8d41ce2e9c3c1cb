/* mpdist's entry point: parses the command line, and for training starts MPI, loads and agrees
 * on the configuration and the data, then runs. The only place that decides to exit: every
 * failure prints one line on the rank that saw it first and exits with the docs/ARCHITECTURE.md §6
 * code; a failure in the middle of training aborts all ranks so none hangs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/launch_check.h"
#include "engine/alloc.h"
#include "engine/backends.h"
#include "engine/env_choice.h"
#include "engine/profile.h"
#include "engine/stop.h"
#include "io/ckpt_dir.h"
#include "src/bench_comm.h"
#include "src/checkpoint.h"
#include "src/cli.h"
#include "src/config.h"
#include "src/info.h"
#include "src/sample.h"
#include "src/signals.h"
#include "src/train.h"

/* Prints the last error as one "mpdist: error: ..." line on stderr (mp_fail keeps it one line);
 * returns st (the exit code). */
static int report(mp_status st)
{
    fprintf(stderr, "mpdist: error: %s\n", mp_error_message());
    fflush(stderr);
    return (int)st;
}

/* Whether this process speaks for the launch before MPI starts (mp_launch_env_reports): the
 * launcher's rank 0, a process without a launcher, or one whose launcher rank cannot be. */
static bool launch_speaker(void)
{
    mp_launch_env e;
    mp_launch_env_read(&e);
    return mp_launch_env_reports(&e);
}

/* Before MPI starts every rank sees the same command line: only launch_speaker() prints the
 * error, so it appears once. */
static int report_once(mp_status st)
{
    return launch_speaker() ? report(st) : (int)st;
}

/* mp_comm_init's failure st: a launch error (MP_EUSAGE) is printed where comm->report says. */
static int report_init(const mp_comm *comm, mp_status st)
{
    return st != MP_EUSAGE || comm->report ? report(st) : (int)st;
}

static int fail_midway(mp_comm *comm, mp_status st);

/* Agrees on `st` over all ranks; on failure the lowest failed rank prints its message, every
 * rank finalises MPI, and the agreed code is returned (0 when all succeeded). When a collective
 * failed or timed out (the communicator is broken), the job is ended as fail_midway does. A
 * stop during set-up (MP_ESTOPPED) is no failure: said on stdout, its exit code run()'s. */
static int agree(mp_comm *comm, mp_status st)
{
    int reporter = -1;
    mp_status all = mp_comm_agree(comm, st, &reporter);
    if (all == MP_OK)
        return 0;
    if (comm->broken)
        return fail_midway(comm, MP_ECOMM);
    if (all == MP_ESTOPPED) {
        if (comm->rank == reporter)
            printf("%s, before the first step: nothing trained, nothing saved\n",
                   mp_error_message());
        return (int)all;
    }
    if (comm->rank == reporter)
        report(st);
    else if (reporter < 0) /* the agreement itself failed: say why here */
        report(all);
    return (int)all;
}

/* A collective run failed midway: the rank the watchdog picked (any rank for other failures)
 * prints, and every rank is ended so none hangs. Returns the exit code. */
static int fail_midway(mp_comm *comm, mp_status st)
{
    if (comm->report)
        report(st);
    if (comm->size > 1)
        mp_comm_abort(comm, (int)st);
    return (int)st;
}

/* A failure every rank reached at the same step from agreed state (divergence, a bad label, a
 * rank's data error): rank `reporter` prints it, and every rank returns the code through the
 * normal end (MPI finalised, no abort), so the job ends with one line and that code. */
static int fail_together(const mp_comm *comm, mp_status st, int reporter)
{
    if (comm->rank == reporter)
        report(st);
    return (int)st;
}

/* The end of a command that failed with st after the trainer's runs began: together when the
 * ranks agreed on it (t->failed_together), else midway. */
static int fail_run(const mp_trainer *t, mp_status st)
{
    return t->failed_together ? fail_together(t->comm, st, t->fail_reporter)
                              : fail_midway(t->comm, st);
}

static void print_banner(const mp_trainer *t, const mp_config *c)
{
    printf("mpdist %s: %d rank%s, backend %s, opt level %s, model %s (%lld parameters), "
           "%lld steps (%lld per epoch), global batch %lld",
           MPDIST_VERSION, t->comm->size, t->comm->size > 1 ? "s" : "", t->ops->name,
           c->amp.opt_level, c->model.preset, (long long)mp_params_numel(&t->model.params),
           (long long)t->total_steps, (long long)t->steps_per_epoch,
           (long long)(c->data.batch_size * t->comm->size * t->accum));
    if (t->accum > 1)
        printf(" (%lld micro-batches of %lld per rank a step)", (long long)t->accum,
               (long long)c->data.batch_size);
    if (t->ops->host_memory)
        printf(", %d CPU thread%s per rank", t->cpu_threads, t->cpu_threads > 1 ? "s" : "");
    if (mp_params_sharded(&t->model.params))
        printf(", ZeRO-1: masters and optimizer state sharded over %d ranks", t->comm->size);
    if (c->model.recompute)
        printf(", blocks recomputed in backward");
    printf("\n");
    mp_amp_print(&t->amp, stdout);
    if (t->sched.warmup_steps > t->sched.total_steps) /* legal (a short try of a long config) */
        printf("note: schedule.warmup_epochs = %g is %lld steps, more than the run's %lld: the "
               "learning rate stays below optim.lr (at most %.3g of it)\n",
               c->schedule.warmup_epochs, (long long)t->sched.warmup_steps,
               (long long)t->sched.total_steps,
               (double)t->sched.total_steps / (double)t->sched.warmup_steps);
    int allowed = mp_train_cores_allowed(), share = mp_train_core_share(t->comm);
    if (t->ops->host_memory && t->cpu_threads < t->cpu_threads_asked) {
        char asked[32];
        snprintf(asked, sizeof asked, t->cpu_threads_asked == 4096 ? "4096 or more" : "%d",
                 t->cpu_threads_asked);
        printf("note: %s asks for %s threads, but this rank may run on %d core%s: %d CPU "
               "thread%s per rank%s\n", t->cpu_threads_var, asked, t->cpu_threads,
               t->cpu_threads > 1 ? "s" : "", t->cpu_threads, t->cpu_threads > 1 ? "s" : "",
               allowed < sysconf(_SC_NPROCESSORS_ONLN)
                   ? " (mpirun --bind-to none, or --map-by slot:PE=N, gives it more cores)"
                   : "");
    }
    /* a GPU rank bound to one core: its loader's threads take turns with the thread that
     * issues the step (the staged CPU backend of the tests is left quiet) */
    if (strcmp(t->ops->name, "cuda") == 0 && c->data.loader_threads > 0 && allowed == 1 &&
        share > 1)
        printf("note: this rank is bound to 1 core of the %d it could use (mpirun binds 1 or 2 "
               "ranks to a core each), which the loader's %lld thread%s share with the step: "
               "mpirun --bind-to none, or --map-by slot:PE=%d, gives it the others\n", share,
               (long long)c->data.loader_threads, c->data.loader_threads > 1 ? "s" : "", share);
    fflush(stdout);
}

/* Seconds since its last change after which a save's temporary is taken for a killed writer's
 * and removed at start-up; a younger one may be another job's save in progress (two jobs on one
 * checkpoint.dir are a mistake, but not one to lose a checkpoint over). */
#define STALE_TEMP_S 120.0

/* Rank 0, before training (not for --dry-run, which writes nothing): checkpoint.dir can be
 * created and written, this run holds its lock until it ends (another run on it is refused here,
 * before anything is written), and the temporaries of saves that were killed are removed, on one
 * line. */
static mp_status prepare_ckpt_dir(const mp_config *cfg)
{
    MP_TRY(mp_ckpt_dir_prepare(cfg->checkpoint.dir));
    char note[1400];
    MP_TRY(mp_ckpt_dir_lock(cfg->checkpoint.dir, note, sizeof note));
    if (note[0])
        fprintf(stderr, "mpdist: %s\n", note);
    char said[1200];
    if (mp_ckpt_clean_temps(cfg->checkpoint.dir, STALE_TEMP_S, said, sizeof said) < 0)
        return MP_ECKPT;
    if (said[0])
        printf("checkpoint: %s\n", said);
    return MP_OK;
}

/* Rank 0 reads the weights of checkpoint `path` (any opt level) into the model, every rank takes
 * them (sharded: whole on rank 0, then each rank's block). Collective; the exit code. */
static int load_weights_all(mp_trainer *t, const char *path)
{
    int rc = agree(t->comm, mp_train_gather(t));
    if (rc == 0)
        rc = agree(t->comm, t->comm->rank == 0
                                ? mp_checkpoint_load_weights(&t->model, path, t->cfg)
                                : MP_OK);
    if (rc == 0)
        rc = agree(t->comm, mp_train_sync(t));
    if (rc == 0)
        rc = agree(t->comm, mp_train_ungather(t, true));
    return rc;
}

/* A fresh run's first weights: checkpoint.init's when set (printed on rank 0), else rank 0's
 * random ones, shared. Collective; the exit code. */
static int fresh_weights(mp_trainer *t, const mp_config *cfg)
{
    if (!cfg->checkpoint.init[0])
        return agree(t->comm, mp_train_sync(t));
    int rc = load_weights_all(t, cfg->checkpoint.init);
    if (rc == 0 && t->comm->rank == 0)
        printf("init: the weights of %s (optimizer state, loss scale and step start anew)\n",
               cfg->checkpoint.init);
    return rc;
}

/* Rank 0, resumed from checkpoint `path` (not "auto") at `step`: MP_EUSAGE when
 * checkpoint.dir holds a newer checkpoint, which this run's saves would replace or prune (a
 * branch from an older checkpoint goes into a directory of its own). */
static mp_status newer_checkpoint(const mp_config *cfg, const char *path, int64_t step)
{
    int64_t newest = -1;
    int n = cfg->checkpoint.dir[0] ? mp_ckpt_list(cfg->checkpoint.dir, &newest, 1) : 0;
    if (n < 0)
        return MP_ECKPT; /* mp_ckpt_list said why */
    if (n == 0 || newest <= step)
        return MP_OK;
    return mp_fail(MP_EUSAGE, "checkpoint.dir %s holds a checkpoint of step %lld, newer than %s "
                   "(step %lld), which this run's saves would replace or remove: continue the "
                   "newest (--resume auto), or give this branch another checkpoint.dir",
                   cfg->checkpoint.dir, (long long)newest, path, (long long)step);
}

/* Rank 0 loads the checkpoint named by --resume or checkpoint.resume, then every rank takes
 * its state; without one, rank 0's initial parameters are shared. Returns the exit code. */
static int start_state(mp_trainer *t, const mp_cli *cli, const mp_config *cfg)
{
    if (cfg->checkpoint.dir[0] && !cli->dry_run) {
        int rc = agree(t->comm, t->comm->rank == 0 ? prepare_ckpt_dir(cfg) : MP_OK);
        if (rc != 0)
            return rc;
    }
    const char *resume = cli->resume ? cli->resume : cfg->checkpoint.resume;
    int64_t newest = -1;
    int listed = 0;
    if (!resume[0] && t->comm->rank == 0 && cfg->checkpoint.dir[0])
        listed = mp_ckpt_list(cfg->checkpoint.dir, &newest, 1);
    if (!resume[0]) { /* a fresh run would mix its files with another run's: refused */
        mp_status st = listed < 0     ? MP_ECKPT
                       : newest < 0 ? MP_OK
                                    : mp_fail(MP_EUSAGE, "checkpoint.dir %s already holds "
                                            "checkpoints of a run (newest: step %lld): continue "
                                            "it with --resume auto, or use another "
                                            "checkpoint.dir", cfg->checkpoint.dir,
                                            (long long)newest);
        int rc = agree(t->comm, st);
        return rc ? rc : fresh_weights(t, cfg);
    }
    char used[1100];
    snprintf(used, sizeof used, "%s", resume);
    /* Sharded (optim.zero), rank 0 reads whole tensors and every rank keeps its block. */
    int rc = agree(t->comm, mp_train_gather(t));
    if (rc != 0)
        return rc;
    mp_status st = MP_OK;
    mp_train_state state = mp_train_state_of(t);
    if (t->comm->rank == 0)
        st = strcmp(resume, "auto") == 0 ? mp_checkpoint_load_auto(&state, used, sizeof used)
                                         : mp_checkpoint_load(&state, resume);
    if (st == MP_OK && t->comm->rank == 0 && strcmp(resume, "auto") != 0)
        st = newer_checkpoint(cfg, resume, t->start.step);
    rc = agree(t->comm, st);
    if (rc == 0)
        rc = agree(t->comm, mp_train_share_start(t));
    if (rc == 0)
        rc = agree(t->comm, mp_train_ungather(t, true));
    if (rc == 0 && t->start.world_size == 0) { /* "auto" found nothing: a fresh start */
        if (t->comm->rank == 0)
            printf("resume: no checkpoint in %s yet, starting afresh\n", cfg->checkpoint.dir);
        return cfg->checkpoint.init[0] ? fresh_weights(t, cfg) : 0; /* shared already */
    }
    if (rc != 0 || t->comm->rank != 0)
        return rc;
    const mp_resume_point *at = &t->start;
    printf("resumed from %s: step %lld, epoch %lld, %lld samples into it\n", used,
           (long long)at->step, (long long)at->epoch + 1, (long long)at->position);
    int64_t gb = cfg->data.batch_size * t->comm->size * t->accum;
    if (at->global_batch != gb)
        printf("note: the checkpoint was written with global batch %lld (%lld rank%s), this run "
               "has %lld (%d rank%s, %lld micro-batch%s a step): the rest of the epoch is "
               "re-sharded, step counts follow the new batch and the schedule keeps its place in "
               "the epochs\n",
               (long long)at->global_batch, (long long)at->world_size,
               at->world_size == 1 ? "" : "s", (long long)gb, t->comm->size,
               t->comm->size == 1 ? "" : "s", (long long)t->accum, t->accum == 1 ? "" : "es");
    if (at->position > 0 && at->shuffled >= 0 && (at->shuffled != 0) != cfg->data.shuffle)
        printf("note: the checkpoint was written with data.shuffle = %s, this run has %s: the "
               "rest of epoch %lld is taken in the new order, so some of its samples come twice "
               "and others not at all\n", at->shuffled ? "true" : "false",
               cfg->data.shuffle ? "true" : "false", (long long)at->epoch + 1);
    int64_t rest = mp_sampler_share(&t->sampler, at->position);
    if (cfg->data.drop_last && rest < cfg->data.batch_size)
        printf("note: the rest of epoch %lld is %lld samples a rank, less than data.batch_size = "
               "%lld: data.drop_last = true drops it\n", (long long)at->epoch + 1,
               (long long)rest, (long long)cfg->data.batch_size);
    return 0;
}

static void print_result(const mp_train_result *res, const mp_config *cfg)
{
    if (!res->stopped) {
        printf("done: %lld steps in %.1f s, %.0f images/s, test loss %.4f\n",
               (long long)res->steps, res->wall_s, res->images_per_s, res->test_loss);
        printf("test accuracy: %.4f\n", res->accuracy);
    } else if (res->checkpoint[0]) {
        printf("stopped at step %lld by %s; checkpoint %s (continue with --resume %s or "
               "checkpoint.resume = \"auto\")\n",
               (long long)res->steps, res->stopped_by, res->checkpoint, res->checkpoint);
    } else {
        printf("stopped at step %lld by %s without a checkpoint (checkpoint.dir is not set in "
               "%s)", (long long)res->steps, res->stopped_by, cfg->path);
        if (res->stop_signal) /* see train() */
            printf("; nothing of the run was kept: exit %d (128 + the signal's number)",
                   128 + res->stop_signal);
        printf("\n");
    }
}

static void print_dry_run(mp_trainer *t, const mp_config *cfg)
{
    mp_config_print(cfg, stdout);
    printf("\n");
    mp_model_summary(&t->model, stdout);
    printf("bytes per rank (allocator counters):");
    for (int k = 0; k < MP_MEM_NCAT; k++)
        printf(" %s %lld%s", mp_mem_cat_name((mp_mem_cat)k),
               (long long)mp_mem_current((mp_mem_cat)k), k + 1 < MP_MEM_NCAT ? "," : "\n");
    const mp_plan *p = &t->model.plan;
    size_t apart = mp_plan_unshared(p);
    printf("activation plan: %zu tensors in %zu bytes, %zu if each had bytes of its own (%.3f)",
           (size_t)p->n, p->size, apart, apart ? (double)p->size / (double)apart : 0.0);
    /* as before the plan and the fused ops: every tensor of the unfused model apart */
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n = 0;
    int64_t before = 0;
    const mp_model *m = &t->model;
    mp_model_opts o = {.recompute = m->recompute, .unplanned = true, .unfused = true};
    if (mp_train_model_specs(cfg, strcmp(t->ops->name, "cuda") == 0, specs, &n) == MP_OK &&
        mp_model_plan_bytes(specs, n, m->in_shape, m->num_classes, m->max_batch, &t->amp, &o,
                            &before) == MP_OK && before > 0)
        printf(", %lld unfused and unplanned (%.3f)", (long long)before,
               (double)p->size / (double)before);
    printf("\n");
}

/* mpdist train on a set-up trainer: the start state, outputs, the run. The exit code. */
static int train(mp_trainer *t, const mp_cli *cli, const mp_config *cfg)
{
    int rc = agree(t->comm, mp_train_connect(t));
    if (rc == 0)
        rc = start_state(t, cli, cfg);
    if (rc == 0 && t->start.world_size > 0 && t->start.step >= t->total_steps &&
        !mp_train_rest_dropped(t)) { /* (a dropped rest still ends its epoch: run()) */
        if (t->comm->rank == 0) /* the same decision on every rank: the shared resume point */
            printf("nothing to do: the run is at step %lld, at or past the end this config sets "
                   "(train.epochs = %lld, train.max_steps = %lld); no step taken, metrics and "
                   "checkpoints left as they were\n", (long long)t->start.step,
                   (long long)cfg->train.epochs, (long long)cfg->train.max_steps);
        return 0;
    }
    if (rc == 0 && !cli->dry_run)
        rc = agree(t->comm, mp_train_open_outputs(t));
    if (rc == 0 && t->comm->rank == 0) {
        if (cli->dry_run)
            print_dry_run(t, cfg);
        print_banner(t, cfg);
    }
    if (rc == 0 && !cli->dry_run) {
        mp_train_result res;
        mp_status st = mp_train_run(t, &res);
        if (st != MP_OK)
            rc = fail_run(t, st);
        else if (t->comm->rank == 0)
            print_result(&res, cfg);
        if (st == MP_OK && res.stopped && res.stop_signal && !cfg->checkpoint.dir[0])
            rc = 128 + res.stop_signal; /* lost, as a kill would have lost it (every rank) */
        if (st == MP_OK && t->comm->rank == 0 && cfg->log.profile) {
            mp_profile_print(stdout, "rank 0");
            mp_backends_conv_plans(stdout);
        }
    }
    return rc;
}

/* The evaluation's speed (its first round of batches left out) and rank 0's bytes during it:
 * the weights and buffers it holds, and the most its activations (the forward-only plan at
 * data.batch_size, and the batch) and workspace held (it keeps no gradients and no masters). */
static void print_eval_speed(const mp_eval_speed *s)
{
    printf("eval: %lld samples in %.3f s, %.1f samples/s; bytes: weights %lld, activations %lld, "
           "workspace %lld\n", (long long)s->samples, s->seconds,
           s->seconds > 0 ? (double)s->samples / s->seconds : 0.0,
           (long long)mp_mem_current(MP_MEM_WEIGHTS), (long long)mp_mem_peak(MP_MEM_ACTIVATIONS),
           (long long)mp_mem_peak(MP_MEM_WORKSPACE));
}

/* MP_EDIVERGED for checkpoint `path` whose test loss is not finite, with the likely causes. */
static mp_status eval_diverged(const mp_trainer *t, const char *path, double loss)
{
    bool half = t->amp.compute != MP_F32;
    char at[64];
    if (half)
        snprintf(at, sizeof at, "%s (%s)", t->cfg->amp.opt_level, t->cfg->amp.half);
    else
        snprintf(at, sizeof at, "%s", t->cfg->amp.opt_level);
    return mp_fail(MP_EDIVERGED, "diverged: %s's test loss is %g at opt level %s: a diverged "
                   "checkpoint, %sor inputs out of range (data.mean and data.std?)",
                   path, loss, at,
                   half ? "activations or logits that overflow this half type (amp.half = "
                          "\"bf16\" or O0?), "
                        : "");
}

/* mpdist eval on a set-up trainer: rank 0 loads the weights, all evaluate. The exit code. */
static int evaluate(mp_trainer *t, const mp_cli *cli)
{
    int rc = load_weights_all(t, cli->checkpoint);
    double loss = 0.0, accuracy = 0.0;
    if (rc == 0) {
        mp_eval_speed speed;
        mp_mem_reset_peaks(); /* the evaluation's own peaks, not the set-up's or the load's */
        mp_status st = mp_train_evaluate_timed(t, &loss, &accuracy, &speed);
        if (st == MP_OK && t->comm->rank == 0)
            print_eval_speed(&speed);
        if (st != MP_OK)
            rc = fail_run(t, st);
        else if (!isfinite(loss)) /* the same on every rank (the sums are all-reduced) */
            rc = agree(t->comm, eval_diverged(t, cli->checkpoint, loss));
        else if (t->comm->rank == 0 && mp_dataset_label_len(&t->test) > 1)
            printf("%s: test loss %.6f (%.6f bits per byte)\ntest accuracy: %.4f\n",
                   cli->checkpoint, loss, mp_metrics_bpb(loss), accuracy);
        else if (t->comm->rank == 0)
            printf("%s: test loss %.4f\ntest accuracy: %.4f\n", cli->checkpoint, loss,
                   accuracy);
    }
    return rc;
}

/* The exit code of a run that a stop signal ended during set-up (MP_ESTOPPED, agreed): 0 with
 * checkpoint.dir, whose newest checkpoint stays the resume point (a Slurm job requeues), else
 * 128 + the signal's number, the largest any rank received (a rank that received none gets
 * it too), as for a stop after some steps (train()). */
static int stopped_in_setup(mp_comm *comm, const mp_config *cfg)
{
    double sig = (double)mp_stop_requested();
    if (mp_comm_allreduce(comm, &sig, 1, MP_F64, MP_REDOP_MAX, "the stop signal") != MP_OK)
        return fail_midway(comm, MP_ECOMM);
    return cfg->checkpoint.dir[0] ? 0 : 128 + (int)sig;
}

/* train and eval: MPI, the configuration agreed by every rank, the trainer set up and its data
 * checked (both agreed), then the command. */
static int run(const mp_cli *cli, int *argc, char ***argv)
{
    mp_comm comm;
    mp_launch_env env;
    mp_launch_env_read(&env);
    mp_launch_bind_lifetime(&env); /* no rank outlives its launcher, not even a stopped one */
    /* before MPI's start-up, which can take seconds under srun: a time-limit signal then stops
     * the run in its set-up or at its first step */
    if (cli->cmd == MP_CMD_TRAIN)
        mp_signals_install();
    mp_status st = mp_comm_init(&comm, argc, argv);
    if (st != MP_OK) /* a launch error is the same on every process: said once */
        return report_init(&comm, st);
    mp_signals_install_fatal(comm.rank, comm.host);
    mp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int rc = agree(&comm, mp_env_check());
    if (rc == 0)
        rc = agree(&comm, mp_config_load(&cfg, cli->config, cli->sets, cli->nsets));
    if (rc == 0 && cli->restartable && !cfg.checkpoint.dir[0]) /* the same on every rank */
        rc = agree(&comm, mp_fail(MP_EUSAGE, "%s: --restartable (launch/mpdist-run "
                                  "--max-restarts): a restart resumes from checkpoint.dir, which "
                                  "is not set: set it, or launch without restarts", cfg.path));
    mp_trainer t;
    memset(&t, 0, sizeof t);
    if (rc == 0)
        rc = agree(&comm, cli->cmd == MP_CMD_EVAL ? mp_train_setup_eval(&t, &cfg, &comm)
                                                  : mp_train_setup(&t, &cfg, &comm));
    if (rc == 0)
        rc = agree(&comm, mp_train_check_data(&t));
    if (rc == 0)
        rc = cli->cmd == MP_CMD_EVAL ? evaluate(&t, cli) : train(&t, cli, &cfg);
    else if (rc == MP_ESTOPPED)
        rc = stopped_in_setup(&comm, &cfg);
    mp_train_free(&t);
    mp_config_free(&cfg);
    mp_comm_finalize(&comm);
    return rc;
}

/* export and inspect read files only: under a launcher only launch_speaker() works. */
static int file_command(const mp_cli *cli)
{
    if (!launch_speaker())
        return 0;
    mp_signals_install_fatal(-1, NULL);
    mp_signals_install_ending();
    mp_status st;
    if (cli->cmd == MP_CMD_INSPECT) {
        st = mp_checkpoint_inspect(cli->config, stdout);
    } else {
        mp_dtype dt = MP_F16;
        mp_dtype_parse(cli->dtype, &dt);
        bool bn = false;
        st = mp_checkpoint_export(cli->config, cli->output, dt, cli->keep_bn_fp32, &bn);
        if (st == MP_OK)
            printf("exported the weights of %s to %s in %s%s\n", cli->config, cli->output,
                   cli->dtype, !cli->keep_bn_fp32 ? ""
                               : bn ? ", BatchNorm in fp32"
                                    : " (the model has no BatchNorm: --keep-batchnorm-fp32 "
                                      "changed nothing)");
    }
    fflush(stdout);
    return st == MP_OK ? 0 : report(st);
}

/* sample runs on the CPU of one process: under a launcher only launch_speaker() works. */
static int sample(const mp_cli *cli)
{
    if (!launch_speaker())
        return 0;
    mp_signals_install_fatal(-1, NULL);
    mp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    mp_status st = mp_config_load(&cfg, cli->config, cli->sets, cli->nsets);
    if (st == MP_OK) {
        mp_sample_opts o = {.checkpoint = cli->checkpoint,
                            .prompt = cli->prompt,
                            .tokens = cli->tokens,
                            .temperature = cli->temperature,
                            .seed = cli->seed};
        st = mp_sample_run(&cfg, &o, stdout);
    }
    mp_config_free(&cfg);
    fflush(stdout);
    return st == MP_OK ? 0 : report(st);
}

static int bench_comm(const mp_cli *cli, int *argc, char ***argv)
{
    mp_bench_comm_opts o;
    mp_launch_env env;
    mp_launch_env_read(&env);
    /* a bad option without a launcher is said before MPI's start-up; under one, after it and
     * agreed, so that a rank given other options than the rest says so (MPMD launches) */
    if (!env.launcher && mp_env_check() != MP_OK)
        return report(MP_EUSAGE);
    mp_status parsed = mp_bench_comm_parse(&o, *argc, *argv, cli->rest);
    char why[1024];
    snprintf(why, sizeof why, "%s", mp_error_message());
    if (parsed != MP_OK && !env.launcher)
        return report(parsed);
    mp_comm comm;
    mp_status st = mp_comm_init(&comm, argc, argv);
    if (st != MP_OK)
        return report_init(&comm, st);
    mp_signals_install_fatal(comm.rank, comm.host);
    mp_bench_mem mem = {.device = -1};
    int rc = agree(&comm, mp_env_check());
    if (rc == 0)
        rc = agree(&comm, parsed == MP_OK ? MP_OK : mp_fail(parsed, "%s", why));
    if (rc == 0)
        rc = agree(&comm, mp_bench_comm_same_opts(&comm, &o));
    if (rc == 0)
        rc = agree(&comm, mp_bench_comm_check_memory(&comm, &o));
    if (rc == 0)
        rc = agree(&comm, mp_bench_comm_open(&comm, &o, &mem));
    if (rc == 0)
        rc = agree(&comm, mp_bench_comm_choose(&comm, &o, &mem));
    if (rc == 0)
        rc = agree(&comm, mp_bench_comm_connect(&comm, &mem));
    st = rc == 0 ? mp_bench_comm_run(&comm, &o, &mem, stdout) : MP_OK;
    if (st != MP_OK)
        rc = fail_midway(&comm, st);
    if (rc == 0 || !comm.broken)
        mp_bench_comm_close(&comm, &mem);
    mp_comm_finalize(&comm);
    return rc;
}

static int dispatch(int argc, char **argv)
{
    mp_cli cli;
    if (mp_cli_parse(&cli, argc, argv) != MP_OK)
        return report_once(MP_EUSAGE);
    /* a mistyped path switch, before anything runs; the MPI commands check it after MPI's
     * start-up and agree on it, so that a rank whose environment alone is wrong says so */
    bool mpi = cli.cmd == MP_CMD_TRAIN || cli.cmd == MP_CMD_EVAL || cli.cmd == MP_CMD_BENCH_COMM;
    if (cli.cmd != MP_CMD_HELP && cli.cmd != MP_CMD_VERSION && !mpi && mp_env_check() != MP_OK)
        return report_once(MP_EUSAGE);
    switch (cli.cmd) {
    case MP_CMD_HELP: mp_cli_usage(stdout); return 0;
    case MP_CMD_VERSION: printf("mpdist %s\n", MPDIST_VERSION); return 0;
    case MP_CMD_INFO: mp_info_print(stdout); return 0;
    case MP_CMD_TRAIN:
    case MP_CMD_EVAL: return run(&cli, &argc, &argv);
    case MP_CMD_EXPORT:
    case MP_CMD_INSPECT: return file_command(&cli);
    case MP_CMD_BENCH_COMM: return bench_comm(&cli, &argc, &argv);
    case MP_CMD_SAMPLE: return sample(&cli);
    }
    return report_once(mp_fail(MP_EINTERNAL, "unknown command"));
}

/* The results must reach stdout: a write error there (a full disk, a closed pipe, /dev/full),
 * seen when it is flushed and closed, turns a success into exit 1 with a line on stderr; a
 * failing stderr turns it into exit 1 silently. */
static int finish_output(int rc)
{
    int err = 0;
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        err = errno ? errno : EIO;
    errno = 0;
    if (fclose(stdout) != 0 && !err)
        err = errno ? errno : EIO;
    if (err && rc == 0) { /* (a command that failed said why already: one line) */
        fprintf(stderr, "mpdist: error: cannot write the output to stdout (%s)\n", strerror(err));
        rc = 1;
    }
    if ((fflush(stderr) != 0 || ferror(stderr)) && rc == 0)
        rc = 1;
    return rc;
}

int main(int argc, char **argv)
{
    mp_h5_no_atexit();
    return finish_output(dispatch(argc, argv));
}
