/* Setting up a training run from a validated config: what this build can run, the data, the
 * model with identical initial parameters on every rank, optimizer, schedule and outputs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_ALLOC */
#endif
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/device_bind.h"
#include "engine/trace.h"
#include "engine/backends.h"
#include "io/ckpt_dir.h"
#include "src/train.h"

/* The backend amp.device asks for: the CPU, or the GPU of this rank (local rank modulo the
 * visible devices), whose choice rank 0 prints. */
static mp_status open_backend(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    int ngpu = mp_backend_cuda_devices();
    int dev = mp_device_for_local_rank(t->comm->local_rank, ngpu);
    mp_backend_options o = {.device = dev > 0 ? dev : 0,
                            .allow_tf32 = c->amp.allow_tf32,
                            .conv_workspace_bytes = c->amp.conv_workspace_mb << 20,
                            .conv_timed = strcmp(c->amp.conv_algo, "timed") == 0,
                            .conv_deterministic = c->amp.deterministic};
    char why[320];
    mp_status st = mp_backend_open(c->amp.device, &o, &t->ops, why, sizeof why);
    if (st != MP_OK) { /* mp_backend_open's "amp.device \"cuda\": why" */
        const char *msg = mp_error_message(), *key = "amp.device ";
        char at[900];
        if (strncmp(msg, key, strlen(key)) == 0)
            msg += strlen(key);
        return mp_fail(st, "%s: %s", mp_config_key_at(c, "amp.device", at, sizeof at), msg);
    }
    t->device = t->ops->queue() ? o.device : -1;
    if (t->comm->rank == 0)
        printf("backend: %s\n", why);
    return MP_OK;
}

/* The split whose samples set the model's input and the batch buffers: the training set, the
 * test set when evaluating (which may have read it alone; mp_train_load_data checks both alike). */
static const mp_dataset *shape_data(const mp_trainer *t)
{
    return t->forward_only ? &t->test : &t->train;
}

/* Re-records the model-building error just recorded with where the user configured the layer
 * it names: its model.layers.[N] group (the first prefix of specs that mp_model_plan refuses
 * ends with it), or the preset's key; the config file when neither was given. */
static mp_status model_error(const mp_config *c, mp_status st, const mp_layer_spec *specs, int n,
                             const int64_t in_shape[3])
{
    char msg[1024], key[32];
    snprintf(msg, sizeof msg, "%s", mp_error_message());
    int bad = n - 1;
    for (int k = 1; k < n; k++) {
        int64_t params, acts;
        if (mp_model_plan(specs, k, in_shape, c->data.num_classes, c->data.batch_size, &params,
                          &acts) != MP_OK) {
            bad = k - 1;
            break;
        }
    }
    snprintf(key, sizeof key, "model.layers.[%d]", bad);
    const char *where = c->model.nlayers > 0 ? mp_config_where(c, key)
                                             : mp_config_where(c, "model.preset");
    if (!where && c->model.nlayers == 0)
        where = mp_config_where(c, "model.hidden");
    return mp_fail(st, "%s: %s", where ? where : c->path, msg);
}

/* Refuses a model whose weights, gradients, momentum and activations do not fit in this rank's
 * share of the host's memory, or in what is free on its GPU, before anything is allocated
 * (allocation failure aborts): 4 bytes for each parameter and copy, and the activation arena's
 * bytes as the plan lays it out (mp_model_plan_bytes). */
static mp_status check_memory(const mp_trainer *t, const mp_layer_spec *specs, int n,
                              const int64_t in_shape[3])
{
    const mp_config *c = t->cfg;
    int64_t params = 0, acts = 0;
    mp_status st = mp_model_plan_recompute(specs, n, in_shape, c->data.num_classes,
                                           c->data.batch_size, c->model.recompute, &params,
                                           &acts);
    int64_t act_bytes = 0; /* the planned arena's, exactly */
    if (st == MP_OK)
        st = mp_model_plan_bytes(specs, n, in_shape, c->data.num_classes, c->data.batch_size,
                                 &t->amp,
                                 &(mp_model_opts){.recompute = c->model.recompute,
                                                  .forward_only = t->forward_only},
                                 &act_bytes);
    if (st != MP_OK)
        return model_error(c, st, specs, n, in_shape);
    /* weights and gradients, then the optimizer's slots and the masters, which ZeRO-1 shards,
     * and the accumulator; evaluating, the weights alone (no masters: engine/model.c) */
    double slots = t->forward_only ? 0.0
                   : strcmp(c->optim.name, "sgd") != 0 ? 2.0
                   : c->optim.momentum != 0.0          ? 1.0
                                                       : 0.0;
    slots += (t->amp.master_weights || t->amp.cast_weights) && !t->forward_only ? 1.0 : 0.0;
    bool sharded = c->optim.zero > 0 && !t->forward_only;
    double copies = (t->forward_only ? 1.0 : 2.0) + slots / (sharded ? t->comm->size : 1);
    copies += c->train.accum_steps > 1 && !t->forward_only ? 1.0 : 0.0;
    double need = 4.0 * (double)params * copies + (double)act_bytes;
    int ranks = t->comm->local_size > 0 ? t->comm->local_size : 1;
    int64_t device = t->ops->mem_free_bytes();
    const char *where = "this host has";
    double have;
    if (device >= 0) { /* the model is on the GPU, which the ranks on this host share */
        int ngpu = mp_backend_cuda_devices();
        ranks = ngpu > 0 ? (ranks + ngpu - 1) / ngpu : 1;
        have = (double)device / ranks;
        where = "its GPU has free";
    } else {
        double host = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
        have = host / ranks - (double)mp_mem_current(MP_MEM_DATA);
    }
    if (need > have)
        return mp_fail(MP_EUSAGE,
                       "%s: model: needs %.1f GiB per rank (%lld parameters%s, "
                       "activations for batch %lld) but %s %.1f GiB "
                       "for each of its %d rank%s",
                       c->path, need / 1073741824.0, (long long)params,
                       t->forward_only ? "" : " with gradients and optimizer state",
                       (long long)c->data.batch_size, where, have / 1073741824.0, ranks,
                       ranks > 1 ? "s" : "");
    return MP_OK;
}

mp_status mp_train_model_specs(const mp_config *c, bool cuda, mp_layer_spec *specs, int *n)
{
    if (c->model.nlayers > 0) {
        *n = c->model.nlayers;
        memcpy(specs, c->model.layers, sizeof(mp_layer_spec) * (size_t)*n);
        return MP_OK;
    }
    *n = mp_config_preset_specs(c, cuda, specs);
    if (*n < 0)
        return mp_fail(MP_EUSAGE, "%s: %s", c->path, mp_error_message());
    return MP_OK;
}

static mp_status build_model(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n;
    MP_TRY(mp_train_model_specs(c, strcmp(t->ops->name, "cuda") == 0, specs, &n));
    const mp_dataset *d = shape_data(t);
    int64_t in_shape[3] = {d->h, d->w, d->c};
    if (n > 0 && strcmp(specs[0].type, "embedding") == 0 && !d->text && !d->tokens)
        return mp_fail(MP_EUSAGE, "%s: model: its first layer, an embedding, takes token ids, "
                       "but data.format \"%s\" gives images (an embedding model needs \"text\" "
                       "or \"tokens\")", c->path, c->data.format);
    MP_TRY(check_memory(t, specs, n, in_shape));
    bool zero = c->optim.zero > 0 && t->comm->size > 1 && !t->forward_only;
    mp_model_opts mo = {.shard_rank = zero ? t->comm->rank : 0,
                        .shard_size = zero ? t->comm->size : 1,
                        .recompute = c->model.recompute,
                        .forward_only = t->forward_only};
    mp_status st = mp_model_build_opts(&t->model, t->ops, specs, n, in_shape,
                                       c->data.num_classes, c->data.batch_size, &t->amp, &mo);
    if (st != MP_OK)
        return model_error(c, st, specs, n, in_shape);
    int64_t labels = mp_dataset_label_len(d);
    if (t->model.positions != labels)
        return mp_fail(MP_EUSAGE, "%s: the model gives %lld outputs per sample (%s) but the data "
                       "has %lld labels per sample (%s)", c->path, (long long)t->model.positions,
                       t->model.positions > 1 ? "one per position" : "a classifier",
                       (long long)labels, labels > 1 ? "one per token" : "one per image");
    mp_model_seed(&t->model, c->train.seed); /* every rank's dropout masks follow the seed */
    if (t->comm->rank == 0 || zero) /* sharded: every rank fills its block of the masters */
        MP_TRY(mp_model_init(&t->model, c->train.seed));
    t->nbufs = mp_model_buffers(&t->model, t->bufs, MP_MAX_PARAMS);
    if (t->nbufs > MP_MAX_PARAMS)
        return mp_fail(MP_EUSAGE, "%s: model: more than %d BatchNorm buffers", c->path,
                       MP_MAX_PARAMS);
    for (int j = 0; j < t->nbufs; j++)
        t->bufpack_len += mp_tensor_numel(&t->bufs[j].t);
    if (t->comm->size > 1) /* mp_train_sync_buffers' broadcast buffer */
        t->bufpack = mp_alloc((size_t)t->bufpack_len * sizeof(float) + 1, MP_MEM_WORKSPACE);
    return MP_OK;
}

int mp_train_state_tensors(mp_trainer *t, unsigned parts, mp_tensor **out)
{
    int n = 0;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &t->model.params.groups[k];
        if (parts & MP_STATE_PARAMS) {
            out[n++] = &g->model;
            out[n++] = &g->master;
        }
        if (parts & MP_STATE_OPTIM) {
            out[n++] = &t->opt.slot1[k];
            out[n++] = &t->opt.slot2[k];
        }
    }
    for (int j = 0; (parts & MP_STATE_BUFFERS) && j < t->nbufs; j++)
        out[n++] = &t->bufs[j].t;
    return n;
}

mp_status mp_train_bcast(mp_trainer *t, mp_tensor *x, const char *what)
{
    if (!x->data)
        return MP_OK;
    mp_coll c = mp_coll_of(MP_COLL_BCAST, x->data, (size_t)mp_tensor_bytes(x), MP_F32,
                           MP_REDOP_SUM, what);
    uint64_t ticket;
    MP_TRY(mp_comm_coll_start(t->comm, t->ops, &c, &ticket));
    return mp_comm_coll_wait(t->comm, ticket);
}

mp_status mp_train_sync(mp_trainer *t)
{
    if (t->comm->size == 1)
        return MP_OK;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &t->model.params.groups[k];
        MP_TRY(mp_train_bcast(t, &g->model, "broadcast of the initial parameters"));
        if (g->master.data != g->model.data && g->n == g->total) /* not a rank's own block */
            MP_TRY(mp_train_bcast(t, &g->master, "broadcast of the initial master weights"));
    }
    return MP_OK;
}

int64_t mp_train_batches(const mp_trainer *t, int64_t count)
{
    int64_t b = t->cfg->data.batch_size;
    return t->cfg->data.drop_last ? count / b : (count + b - 1) / b;
}

int64_t mp_train_steps(const mp_trainer *t, int64_t count)
{
    return (mp_train_batches(t, count) + t->accum - 1) / t->accum;
}

void mp_train_replan(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    const mp_resume_point *at = &t->start;
    if (at->world_size == 0)
        return;
    int64_t first = mp_train_steps(t, mp_sampler_share(&t->sampler, at->position));
    int64_t total = at->step;
    if (at->epoch < c->train.epochs)
        total += first + (c->train.epochs - at->epoch - 1) * t->steps_per_epoch;
    bool capped = c->train.max_steps > 0 && c->train.max_steps < total;
    if (capped)
        total = c->train.max_steps;
    t->total_steps = total > at->step ? total : at->step;
    /* The schedule's place: epochs done and the part of this one that its rest leaves, in this
     * run's steps; the run's own step count there when the global batch never changed. A run
     * that train.max_steps ends counts its schedule in steps, as max_steps does: no offset. */
    int64_t place = at->epoch * t->steps_per_epoch + t->steps_per_epoch - first;
    t->sched.offset = !capped && at->epoch < c->train.epochs && place >= 0 ? place - at->step : 0;
    t->sched.total_steps = t->total_steps + t->sched.offset;
}

bool mp_train_rest_dropped(const mp_trainer *t)
{
    const mp_resume_point *at = &t->start;
    return at->world_size > 0 && at->epoch < t->cfg->train.epochs &&
           (t->cfg->train.max_steps == 0 || t->cfg->train.max_steps > at->step) &&
           mp_train_steps(t, mp_sampler_share(&t->sampler, at->position)) == 0;
}

static void plan_steps(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    int64_t n = mp_train_steps(t, t->sampler.num_local);
    t->steps_per_epoch = n > 1 ? n : 1;
    t->total_steps = t->steps_per_epoch * c->train.epochs;
    if (c->train.max_steps > 0 && c->train.max_steps < t->total_steps)
        t->total_steps = c->train.max_steps;
}

static void setup_schedule(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    mp_schedule *s = &t->sched;
    mp_schedule_parse(c->schedule.type, &s->type);
    s->base_lr = c->optim.lr;
    s->min_lr = c->schedule.min_lr;
    s->gamma = c->schedule.gamma;
    s->step_every = (int64_t)(c->schedule.step_epochs * (double)t->steps_per_epoch + 0.5);
    if (s->step_every < 1)
        s->step_every = 1;
    s->total_steps = t->total_steps;
    s->warmup_steps = (int64_t)(c->schedule.warmup_epochs * (double)t->steps_per_epoch + 0.5);
}

mp_amp_policy mp_train_amp_policy(const mp_config *c)
{
    mp_opt_level level = MP_O0;
    mp_dtype half = MP_F16;
    mp_opt_level_parse(c->amp.opt_level, &level);
    mp_dtype_parse(c->amp.half, &half);
    return mp_amp_resolve(level, half, c->amp.keep_norm_fp32, c->amp.master_weights,
                          c->amp.loss_scale, c->amp.allow_tf32);
}

static void setup_amp(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    t->amp = mp_train_amp_policy(c);
    mp_scaler_config *s = &t->scaler_cfg;
    s->dynamic = c->amp.loss_scale == 0.0;
    s->init_scale = s->dynamic ? c->amp.init_scale : c->amp.loss_scale;
    s->growth_factor = c->amp.growth_factor;
    s->backoff_factor = c->amp.backoff_factor;
    s->growth_interval = c->amp.growth_interval;
    s->hysteresis = c->amp.hysteresis;
    s->min_scale = c->amp.min_scale;
    s->max_scale = c->amp.max_scale;
    s->max_consecutive_skips = c->amp.max_consecutive_skips;
    s->margin = c->amp.scale_margin;
    t->scaler = mp_scaler_init(s);
}

static void setup_optimizer(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    mp_optim_args h = {.kind = strcmp(c->optim.name, "adam") == 0    ? MP_OPTIM_ADAM
                               : strcmp(c->optim.name, "adamw") == 0 ? MP_OPTIM_ADAMW
                                                                     : MP_OPTIM_SGD,
                       .weight_decay = c->optim.weight_decay,
                       .momentum = c->optim.momentum,
                       .dampening = c->optim.dampening,
                       .nesterov = c->optim.nesterov,
                       .beta1 = c->optim.beta1,
                       .beta2 = c->optim.beta2,
                       .eps = c->optim.eps};
    mp_optimizer_init(&t->opt, t->ops, &t->model.params, &h);
}

static mp_status setup_buckets(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    mp_dtype wire = MP_F32;
    mp_grad_sync_config sc = {
        .bucket_bytes = (int64_t)ceil(c->comm.bucket_mb * 1048576.0), /* >= 1: mb > 0 */
        .first_bucket_bytes = (int64_t)ceil(c->comm.first_bucket_mb * 1048576.0),
        .wire = mp_dtype_parse(c->comm.grad_dtype, &wire) == 0 ? (int)wire : -1,
        .predivide = c->comm.predivide > 0 ? c->comm.predivide : (double)t->comm->size,
        .overlap = c->comm.overlap,
        .shard = mp_params_sharded(&t->model.params),
        .accumulate = t->accum > 1,
    };
    MP_TRY(mp_grad_sync_init(&t->sync, t->comm, t->ops, &t->model.params, &sc));
    t->model.grads_ready = mp_grad_sync_ready;
    t->model.grads_ready_arg = &t->sync;
    if (!c->log.profile || strcmp(c->log.profile_clock, "host") != 0)
        return MP_OK; /* the gradients' ready times wait for the queue: the host clock's */
    MP_TRY(mp_ready_times_init(&t->ready, &t->sync));
    t->model.grads_ready = mp_ready_times_ready;
    t->model.grads_ready_arg = &t->ready;
    return MP_OK;
}

mp_status mp_train_open_outputs(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    mp_progress_mode mode = MP_PROGRESS_NONE;
    if (c->log.trace[0])
        MP_TRY(mp_train_open_trace(t));
    if (t->comm->rank == 0) {
        if (c->log.trace[0])
            MP_TRY(mp_train_trace_spares(c->log.trace, c->log.metrics));
        if (c->checkpoint.dir[0] && mp_ckpt_dir_names(c->checkpoint.dir, c->log.metrics))
            return mp_fail(MP_EUSAGE, "log.metrics: %s is a name that checkpoint.dir %s's saves "
                           "write or remove: name another file", c->log.metrics,
                           c->checkpoint.dir);
        if (t->start.world_size > 0)
            MP_TRY(mp_metrics_open_resumed(&t->metrics, c->log.metrics, t->start.step,
                                           t->start.epoch));
        else
            MP_TRY(mp_metrics_open(&t->metrics, c->log.metrics));
        if (c->checkpoint.async && c->checkpoint.dir[0])
            MP_TRY(mp_ckpt_async_create(&t->ckpt));
        mp_progress_mode_parse(c->log.progress, &mode);
    }
    mp_progress_init(&t->progress, mode, stdout, t->total_steps, c->log.every);
    return MP_OK;
}

/* Skips blanks, then one or more digits, then blanks, from *p; false when there are no digits. */
static bool skip_count(const char **p)
{
    const char *q = *p + strspn(*p, " \t");
    size_t digits = strspn(q, "0123456789");
    *p = q + digits + strspn(q + digits, " \t");
    return digits > 0;
}

/* A thread count from environment variable `name` as OpenMP reads OMP_NUM_THREADS: a positive
 * integer, blanks around it allowed, or a list "N,M,..." of them whose first entry is the outer
 * level's count; above 4096 it is 4096. 0 when the variable is unset or empty, -1 when it holds
 * anything else. */
static int threads_from_env(const char *name)
{
    const char *v = getenv(name);
    if (!v || !v[0])
        return 0;
    const char *p = v;
    bool ok = skip_count(&p);
    while (ok && *p == ',')
        p++, ok = skip_count(&p);
    if (!ok || *p)
        return -1;
    errno = 0;
    unsigned long long n = strtoull(v, NULL, 10);
    if (n == 0)
        return -1;
    return errno == ERANGE || n > 4096 ? 4096 : (int)n;
}

/* The CPU libraries' threads per rank, one setting for OpenBLAS, oneDNN and the backend's own
 * loops (OpenBLAS's OpenMP build shares OpenMP's thread count anyway): OMP_NUM_THREADS when it
 * is a positive integer (what PyTorch's and Horovod's users set, and Slurm jobs from
 * SLURM_CPUS_PER_TASK), else OPENBLAS_NUM_THREADS when it is one, else the host's cores shared
 * by its ranks; whichever it is, no more than the cores this process may run on (a launcher that
 * binds a rank to one core, as mpirun does for 1 or 2 ranks, gets one thread there, not threads
 * that take turns on that core). Sets t->cpu_threads, and t->cpu_threads_asked and
 * t->cpu_threads_var to the variable's value and name when one was given (else 0 and NULL). */
static void cpu_threads(mp_trainer *t)
{
    static const char *const vars[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"};
    t->cpu_threads_asked = 0;
    t->cpu_threads_var = NULL;
    for (int i = 0; i < 2 && !t->cpu_threads_var; i++) {
        int n = threads_from_env(vars[i]);
        if (n > 0)
            t->cpu_threads_asked = n, t->cpu_threads_var = vars[i];
        else if (n < 0 && t->comm->rank == 0) { /* mp_fail makes the value one line */
            mp_fail(MP_EUSAGE, "%s='%.40s' is not a thread count; ignored", vars[i],
                    getenv(vars[i]));
            fprintf(stderr, "mpdist: warning: %s\n", mp_error_message());
            mp_error_clear();
        }
    }
    int n = t->cpu_threads_var ? t->cpu_threads_asked : mp_train_core_share(t->comm);
    int allowed = mp_train_cores_allowed();
    if (allowed > 0 && allowed < n)
        n = allowed;
    t->cpu_threads = n > 0 ? n : 1;
}

int mp_train_core_share(const mp_comm *comm)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return (int)(cores / (comm->local_size > 0 ? comm->local_size : 1));
}

int mp_train_cores_allowed(void)
{
    long ids = sysconf(_SC_NPROCESSORS_CONF);
    int count = ids > CPU_SETSIZE ? (int)ids : CPU_SETSIZE, n = 0;
    cpu_set_t *mine = CPU_ALLOC(count);
    if (mine) {
        size_t bytes = CPU_ALLOC_SIZE(count);
        CPU_ZERO_S(bytes, mine);
        if (sched_getaffinity(0, bytes, mine) == 0)
            n = CPU_COUNT_S(bytes, mine);
        CPU_FREE(mine);
    }
    return n;
}

mp_status mp_train_check_batches(const mp_trainer *t, int64_t count, bool resumed)
{
    const mp_config *c = t->cfg;
    int64_t b = c->data.batch_size;
    /* mp_train_batches' batches of count: full ones, then what is left (none: drop_last) */
    int64_t last = c->data.drop_last || count % b == 0 ? (count < b ? 0 : b) : count % b;
    char at[1200];
    if (count >= b && mp_model_check_batch(&t->model, b, true) != MP_OK)
        return mp_fail(MP_EUSAGE, "%s = %lld: %s", mp_config_key_at(c, "data.batch_size", at,
                       sizeof at), (long long)b, mp_error_message());
    if (last < 1 || last == b || mp_model_check_batch(&t->model, last, true) == MP_OK)
        return MP_OK;
    if (resumed)
        return mp_fail(MP_EUSAGE, "the rest of the resumed epoch ends with a batch of %lld of "
                       "a rank's %lld samples (data.batch_size = %lld on %d rank%s): %s; resume "
                       "with another rank count or batch size", (long long)last,
                       (long long)count, (long long)b, t->comm->size,
                       t->comm->size > 1 ? "s" : "", mp_error_message());
    return mp_fail(MP_EUSAGE, "%s: the last batch of each epoch holds %lld of a rank's %lld "
                   "samples: %s; data.drop_last = true drops that batch",
                   mp_config_key_at(c, "data.drop_last", at, sizeof at), (long long)last,
                   (long long)count, mp_error_message());
}

/* What training adds to the evaluation's set-up: the sampler's shard and the steps it makes,
 * the schedule, the optimizer, the gradient buckets, the loader and the loss gradient's rows. */
static mp_status setup_training(mp_trainer *t)
{
    const mp_config *cfg = t->cfg;
    mp_comm *comm = t->comm;
    if (mp_sampler_init(&t->sampler, t->train.count, comm->size, comm->rank, cfg->train.seed,
                        cfg->data.shuffle, cfg->data.drop_last) != 0)
        return mp_fail(MP_EDATA, "%s: cannot shard %lld samples over %d ranks", cfg->data.path,
                       (long long)t->train.count, comm->size);
    char at[1200];
    if (cfg->data.drop_last && t->sampler.num_local < cfg->data.batch_size)
        return mp_fail(MP_EUSAGE, "%s: each rank's share of the training set (%lld sample%s) is "
                       "less than data.batch_size = %lld, so every batch would be dropped",
                       mp_config_key_at(cfg, "data.drop_last", at, sizeof at),
                       (long long)t->sampler.num_local, t->sampler.num_local == 1 ? "" : "s",
                       (long long)cfg->data.batch_size);
    MP_TRY(mp_train_check_batches(t, t->sampler.num_local, false));
    plan_steps(t);
    setup_schedule(t);
    setup_optimizer(t);
    MP_TRY(setup_buckets(t));
    mp_loader_config lc = {.data = &t->train,
                           .threads = (int)cfg->data.loader_threads,
                           .nice = (int)cfg->data.loader_nice,
                           .depth = (int)cfg->data.prefetch,
                           .batch = cfg->data.batch_size,
                           .dtype = mp_model_input_dtype(&t->model),
                           .mean = t->mean,
                           .std = t->std,
                           .pad = cfg->data.augment ? (int)cfg->data.pad_crop : 0,
                           .flip = cfg->data.augment,
                           .seed = cfg->train.seed,
                           .host_alloc = t->ops->host_alloc,
                           .host_free = t->ops->host_free,
                           .fence_wait = t->ops->fence_wait,
                           .fence_free = t->ops->fence_free};
    MP_TRY(mp_loader_open(&t->loader, &lc));
    int64_t ds[2] = {cfg->data.batch_size * t->model.positions, cfg->data.num_classes};
    t->dlogits = mp_tensor_new(t->ops, t->model.acts[t->model.nlayers - 1].dtype, 2, ds,
                               MP_MEM_ACTIVATIONS);
    return MP_OK;
}

/* mp_train_setup, or with forward_only mp_train_setup_eval. */
static mp_status setup(mp_trainer *t, const mp_config *cfg, mp_comm *comm, bool forward_only)
{
    memset(t, 0, sizeof *t);
    t->forward_only = forward_only;
    t->cfg = cfg;
    t->comm = comm;
    MP_TRY(open_backend(t));
    cpu_threads(t);
    mp_backend_cpu_threads(t->cpu_threads);
    comm->timeout_s = cfg->comm.timeout_s;
    t->accum = cfg->train.accum_steps > 0 ? cfg->train.accum_steps : 1;
    setup_amp(t);
    MP_TRY(mp_train_load_data(t));
    MP_TRY(build_model(t));
    if (!forward_only)
        MP_TRY(setup_training(t));
    int64_t b = cfg->data.batch_size;
    const mp_dataset *d = shape_data(t);
    int64_t xs[4] = {b, d->h, d->w, d->c};
    t->x = mp_tensor_new(t->ops, mp_model_input_dtype(&t->model), 4, xs, MP_MEM_ACTIVATIONS);
    t->st = t->ops->mem_alloc(sizeof *t->st, MP_MEM_OPTIM);
    if (!t->st)
        return MP_EINTERNAL; /* mem_alloc said why */
    /* Host buffers the backend copies from are host_alloc's (pinned on a GPU), so that no
     * copy_in waits for the device. */
    t->hst = t->ops->host_alloc(sizeof *t->hst, MP_MEM_WORKSPACE);
    t->stop_req = t->ops->host_alloc(sizeof *t->stop_req, MP_MEM_WORKSPACE);
    t->data_word = t->ops->host_alloc(2 * sizeof *t->data_word, MP_MEM_WORKSPACE);
    size_t y_bytes = (size_t)b * (size_t)mp_dataset_label_len(d) * sizeof(int32_t);
    t->y = t->ops->host_alloc(y_bytes, MP_MEM_DATA);
    if (!t->hst || !t->stop_req || !t->data_word || !t->y)
        return MP_EINTERNAL; /* host_alloc said why */
    t->ydev = t->y;
    t->xhost = t->x.data;
    if (!t->ops->host_memory) { /* evaluation batches are assembled on the host and copied in */
        t->ydev = t->ops->mem_alloc(y_bytes, MP_MEM_DATA);
        t->xhost = t->ops->host_alloc((size_t)mp_tensor_bytes(&t->x), MP_MEM_DATA);
        if (!t->ydev || !t->xhost)
            return MP_EINTERNAL; /* mem_alloc or host_alloc said why */
    }
    return MP_OK;
}

mp_status mp_train_setup(mp_trainer *t, const mp_config *cfg, mp_comm *comm)
{
    return setup(t, cfg, comm, false);
}

mp_status mp_train_setup_eval(mp_trainer *t, const mp_config *cfg, mp_comm *comm)
{
    return setup(t, cfg, comm, true);
}

void mp_train_free(mp_trainer *t)
{
    mp_ckpt_async_free(t->ckpt); /* a save in flight finishes first */
    mp_train_ungather(t, false);
    mp_train_graph_free(t); /* before the communicator: NCCL's finalize waits for graphs to go */
    if (t->device_comm) /* before the buckets the collectives read are freed */
        mp_comm_drop_device(t->comm);
    mp_progress_finish(&t->progress);
    mp_metrics_close(t->metrics);
    if (mp_trace_close() != MP_OK)
        fprintf(stderr, "mpdist: warning: %s\n", mp_error_message());
    mp_loader_close(t->loader);
    if (t->ops) {
        if (!t->ops->host_memory) {
            t->ops->mem_free(t->ydev);
            t->ops->host_free(t->xhost);
        }
        t->ops->mem_free(t->st);
        t->ops->host_free(t->hst);
        t->ops->host_free(t->stop_req);
        t->ops->host_free(t->data_word);
        t->ops->host_free(t->y);
        mp_tensor_delete(t->ops, &t->x);
        mp_tensor_delete(t->ops, &t->dlogits);
    }
    mp_free(t->bufpack);
    mp_optimizer_free(&t->opt);
    mp_ready_times_free(&t->ready);
    mp_grad_sync_free(&t->sync);
    mp_sampler_free(&t->sampler);
    mp_model_free(&t->model);
    mp_dataset_free(&t->train);
    mp_dataset_free(&t->test);
    memset(t, 0, sizeof *t);
}
