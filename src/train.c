/* The step loop (docs/ARCHITECTURE.md §2): load a shard batch in the input dtype, forward, FP32
 * loss scaled by the loss scale, backward into the flat gradient buffers while each finished bucket
 * is summed over ranks (comm/buckets.h), one unscale-and-check pass (global norm and found_inf,
 * agreed by all ranks), then the FP32 master step, skipped (weights, optimizer state and the
 * BatchNorm statistics the forward updated all left as they were) when found_inf is set, and the
 * scaler update, the same on every rank. The scale, the flag and the counters live in backend
 * memory (mp_amp_state): on a GPU the kernels read them and the host reads them only at host points
 * (mp_train_run). Rank 0 logs a global mean loss every log.every steps; evaluation runs every
 * train.eval_every epochs and at the end. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/profile.h"
#include "engine/stop.h"
#include "engine/trace.h"
#include "src/train.h"
#include "src/train_window.h"

/* Runs CALL (an mp_status expression) timed in the profile as (KIND, step phase), and returns
 * from the caller when it fails. */
#define PROFILED(KIND, CALL)                                                                 \
    do {                                                                                     \
        double mark_ = mp_profile_begin(KIND);                                               \
        mp_status st_ = (CALL);                                                              \
        mp_profile_end(mark_, KIND, MP_PROF_STEP);                                           \
        MP_TRY(st_);                                                                         \
    } while (0)

/* This rank's stop request into st->stop when it changed (once a run at most, so no step copies
 * it as a matter of course). */
static mp_status stop_request(mp_trainer *t)
{
    double req = (double)mp_stop_requested();
    if (req == *t->stop_req)
        return MP_OK;
    *t->stop_req = req;
    if (t->ops->host_memory)
        t->st->stop = req;
    else
        MP_TRY(t->ops->copy_in(&t->st->stop, t->stop_req, sizeof *t->stop_req));
    return MP_OK;
}

/* With `stop`, writes this rank's stop request into the state first (stop_request; a step
 * launched as a graph had it written before its launch), then agrees, with one MAX over ranks
 * of (sum of squares, found_inf, stop, fill, bad_labels, data_pending), on whether the step is
 * skipped, the norm it clips with, the scaler's margin rule and whether the run stops: every
 * rank takes the same decision even when a rank's gradients went bad after the sum, and all
 * stop at the same step (a rank's data error at the next host point). Sharded
 * (ZeRO-1), each rank's sum of squares covers its block, so they are summed first. The state
 * lives in backend memory: the data plane reduces it where it is (NCCL) or a host copy. */
static mp_status agree(mp_trainer *t, bool stop)
{
    if (stop)
        MP_TRY(stop_request(t));
    if (t->comm->size == 1)
        return MP_OK;
    static const char what[] =
        "agreement on found_inf, the gradient norm, the gradient fill and stop signals";
    uint64_t ticket;
    bool waited;
    if (mp_params_sharded(&t->model.params)) { /* each rank checked its block: sum the norms */
        mp_coll sum = mp_coll_of(MP_COLL_ALLREDUCE, &t->st->sumsq, 1, MP_F64, MP_REDOP_SUM,
                                 "sum of the gradient norm's squares over the shards");
        MP_TRY(mp_comm_coll_start(t->comm, t->ops, &sum, &ticket));
    }
    mp_coll coll = mp_coll_of(MP_COLL_ALLREDUCE, &t->st->sumsq, MP_AMP_AGREE, MP_F64,
                              MP_REDOP_MAX, what);
    MP_TRY(mp_comm_coll_start(t->comm, t->ops, &coll, &ticket));
    return mp_comm_coll_order(t->comm, ticket, &waited);
}

/* Whether tensor x (any dtype, on the device) holds an inf or NaN. */
static bool nonfinite(mp_trainer *t, const mp_tensor *x, mp_status *st)
{
    double sumsq = 0.0;
    bool bad = false;
    if (x->data && *st == MP_OK)
        *st = t->ops->grad_stats(x, 1.0, &sumsq, &bad);
    return bad;
}

/* The first parameter (in model order) whose gradient holds an inf or NaN in this rank's block
 * (all of it unsharded: the rest of a sharded gradient buffer is not summed), for the message
 * when the run diverges. */
static const char *first_overflow(mp_trainer *t)
{
    const mp_params *p = &t->model.params;
    mp_status st = MP_OK;
    for (int i = 0; i < p->count && st == MP_OK; i++) {
        int64_t lo, hi;
        if (!mp_params_block_part(p, i, &lo, &hi))
            continue;
        mp_tensor part = mp_params_slice(&p->groups[p->views[i].group].grad, lo, hi);
        if (nonfinite(t, &part, &st))
            return p->views[i].name;
    }
    return "(none: the overflow was on another rank)";
}

/* The largest finite value of the narrowest half type group k's gradients passed through: their
 * own dtype, or the wire's when several ranks sum them; 0 when they stayed in FP32 or FP64. */
static double half_limit(const mp_trainer *t, int k)
{
    mp_dtype own = t->model.params.groups[k].grad.dtype, wire = t->sync.wire[k];
    double limit = own == MP_F16 || own == MP_BF16 ? mp_dtype_max(own) : 0.0;
    if (t->comm->size > 1 && (wire == MP_F16 || wire == MP_BF16) &&
        (limit == 0.0 || mp_dtype_max(wire) < limit))
        limit = mp_dtype_max(wire);
    return limit;
}

/* Sharded (ZeRO-1): every rank's updated block of the model copies to every rank. */
static mp_status gather_weights(mp_trainer *t)
{
    uint64_t ticket = 0;
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &t->model.params.groups[k];
        if (g->total == 0)
            continue;
        mp_coll c = mp_coll_blocks(MP_COLL_ALLGATHER, g->model.data, (size_t)g->total,
                                   g->model.dtype, (size_t)g->n, 0,
                                   "all-gather of the updated weights");
        MP_TRY(mp_comm_coll_start(t->comm, t->ops, &c, &ticket));
    }
    bool waited;
    return ticket ? mp_comm_coll_order(t->comm, ticket, &waited) : MP_OK;
}

/* The fused unscale-and-check into the state (of this rank's block when sharded), the
 * agreement (with `stop`, after writing the stop request), the optimizer step (skipped on the
 * device when found_inf is set; its rate is st->lr, which amp_step_values set before the step), the
 * scaler update and, sharded, the all-gather of the weights: queued work only, no host wait on
 * a device transport. */
static mp_status apply_gradients(mp_trainer *t, bool stop)
{
    double post = mp_grad_sync_post_scale(&t->sync);
    for (int k = 0; k < MP_NGROUPS; k++) {
        mp_param_group *g = &t->model.params.groups[k];
        mp_tensor block = mp_params_slice(&g->grad, g->lo, g->lo + g->n);
        PROFILED("unscale+check", t->ops->amp_check(&block, post, half_limit(t, k), t->st));
    }
    PROFILED("agreement", agree(t, stop));
    PROFILED("optimizer", mp_optimizer_step_amp(&t->opt, &t->model.params, post,
                                                t->cfg->optim.clip_grad_norm, t->st));
    PROFILED("bn statistics", mp_model_stats_revert(&t->model, t->st));
    PROFILED("scaler", t->ops->amp_update(&t->scaler_cfg, t->st));
    if (mp_params_sharded(&t->model.params))
        PROFILED("weight all-gather", gather_weights(t));
    return MP_OK;
}

mp_status mp_train_read_state(mp_trainer *t)
{
    if (t->ops->host_memory)
        *t->hst = *t->st;
    else
        MP_TRY(t->ops->copy_out(t->hst, t->st, sizeof *t->hst));
    t->scaler = t->hst->scaler;
    t->opt.steps = t->hst->steps;
    t->stop_signal = (int)t->hst->stop;
    return MP_OK;
}

mp_status mp_train_write_state(mp_trainer *t)
{
    *t->hst = (mp_amp_state){.scaler = t->scaler,
                            .steps = t->opt.steps,
                            .stop = *t->stop_req,
                            .step_scale = t->scaler.scale};
    if (t->ops->host_memory) {
        *t->st = *t->hst;
        return MP_OK;
    }
    return t->ops->copy_in(t->st, t->hst, sizeof *t->hst);
}

/* Marks st, the failure every rank reaches at the same step from the agreed state, as such
 * (t->failed_together: rank 0 alone reports it and no rank aborts); returns st. */
static mp_status together(mp_trainer *t, mp_status st)
{
    t->failed_together = true;
    t->fail_reporter = 0;
    return st;
}

/* The agreed state's data error (a rank's loader failed, next_batch): the failure of every
 * rank, reported by the rank it names with the message it kept. */
static mp_status data_error(mp_trainer *t)
{
    int code, rank;
    mp_amp_data_error_of(t->hst->data_error, &code, &rank);
    t->failed_together = true;
    t->fail_reporter = rank;
    if (rank == t->comm->rank && t->data_failed != MP_OK)
        return mp_fail(t->data_failed, "%s", t->data_why);
    return mp_fail((mp_status)code, "the data of rank %d failed", rank);
}

/* At a host point (every step when the backend's memory is the host's, else logging, evaluation,
 * checkpoint and last steps): reads the state and ends the run with a rank's data error, with
 * MP_EDATA when the GPU's loss met a label out of range since, or with MP_EDIVERGED after
 * max_consecutive_skips skipped steps in a row. */
static mp_status host_point(mp_trainer *t)
{
    MP_TRY(mp_train_read_state(t));
    if (t->hst->data_error != 0.0)
        return data_error(t);
    if (t->hst->bad_labels != 0.0)
        return together(t, mp_fail(MP_EDATA, "%s: a training label is outside [0, %lld) "
                                   "(data.num_classes); the steps since the last host point "
                                   "that met one were skipped", t->cfg->path,
                                   (long long)t->cfg->data.num_classes));
    if (t->hst->diverged)
        return together(t, mp_fail(MP_EDIVERGED, "diverged: %lld steps in a row had inf/NaN "
                                   "gradients (loss scale %g); the first parameter that "
                                   "overflowed: %s", (long long)t->hst->diverged,
                                   t->hst->step_scale, first_overflow(t)));
    return MP_OK;
}

/* A blank micro-batch for a rank whose loader failed (t->data_failed): a full batch of zeros
 * with label 0 into x, dl and labels, and found_inf and the rank's data error word
 * (data_pending) into the state, so that the step is skipped on every rank and the run ends at
 * the next host point (host_point). A single rank's data error ends its run at once instead
 * (next_batch). */
static mp_status blank_batch(mp_trainer *t, mp_tensor *x, mp_tensor *dl, const int32_t **labels,
                             int64_t *n)
{
    *n = t->x.shape[0];
    *x = mp_tensor_batch(&t->x, *n);
    *dl = mp_tensor_batch(&t->dlogits, *n * t->model.positions);
    *labels = t->ydev;
    MP_TRY(t->ops->fill(x, 0.0));
    if (t->ops->host_memory) {
        t->st->found_inf = t->data_word[0];
        t->st->data_pending = t->data_word[1];
        return MP_OK;
    }
    size_t y_bytes = (size_t)(*n * mp_dataset_label_len(&t->train)) * sizeof(int32_t);
    MP_TRY(t->ops->copy_in(t->ydev, t->y, y_bytes));
    MP_TRY(t->ops->copy_in(&t->st->found_inf, &t->data_word[0], sizeof(double)));
    return t->ops->copy_in(&t->st->data_pending, &t->data_word[1], sizeof(double));
}

/* The loader's data error st on this rank of several: kept with its message (t->data_failed,
 * data_why) for the host point that ends the run on every rank, and the labels' host buffer
 * zeroed for blank_batch. */
static void data_failed(mp_trainer *t, mp_status st)
{
    snprintf(t->data_why, sizeof t->data_why, "%s", mp_error_message());
    t->data_failed = st;
    t->data_word[0] = 1.0;
    t->data_word[1] = mp_amp_data_error((int)st, t->comm->rank);
    memset(t->y, 0, (size_t)(t->x.shape[0] * mp_dataset_label_len(&t->train)) * sizeof(int32_t));
}

/* The next micro-batch into x (batch n, in backend memory), dl (its loss gradient's rows) and
 * labels. On several ranks, a data error of the loader (MP_EDATA: a damaged file) does not end
 * this rank alone: that micro-batch and every later one are blank (blank_batch). */
static mp_status next_batch(mp_trainer *t, mp_tensor *x, mp_tensor *dl, const int32_t **labels,
                            int64_t *n, mp_train_result *r)
{
    if (t->data_failed != MP_OK)
        return blank_batch(t, x, dl, labels, n);
    const void *xdata;
    double t0 = mp_now(), device0 = mp_loader_device_wait_s(t->loader);
    mp_status st = mp_loader_next(t->loader, &xdata, labels, n);
    if (st == MP_EDATA && t->comm->size > 1) {
        data_failed(t, st);
        return blank_batch(t, x, dl, labels, n);
    }
    MP_TRY(st);
    /* a wait for the device to free a slot is the device's time, not the input's */
    r->input_wait_s += mp_now() - t0 - (mp_loader_device_wait_s(t->loader) - device0);
    *x = mp_tensor_batch(&t->x, *n);
    *dl = mp_tensor_batch(&t->dlogits, *n * t->model.positions);
    if (t->ops->host_memory) {
        x->data = (void *)xdata; /* the loader's slot: read-only here */
        return MP_OK;
    } /* from the loader's pinned slot, asynchronously: the fence keeps the loader from refilling
         the slot before the copy has read it */
    MP_TRY(t->ops->copy_in(x->data, xdata, (size_t)mp_tensor_bytes(x)));
    MP_TRY(t->ops->copy_in(t->ydev, *labels,
                           (size_t)(*n * mp_dataset_label_len(&t->train)) * sizeof(int32_t)));
    MP_TRY(t->ops->fence_record(mp_loader_fence(t->loader)));
    *labels = t->ydev;
    return MP_OK;
}

/* Forward and backward of micro-batch i of `micro` in optimizer step `step`, its rows in x, dl
 * and labels: its loss gradient divided by `micro`; the last one sends the gradients (with the
 * earlier ones' added), the others add theirs to the accumulator. *loss: its loss when
 * want_loss. */
static mp_status micro_device(mp_trainer *t, int64_t step, int i, int micro, bool want_loss,
                              mp_tensor x, mp_tensor dl, const int32_t *labels, double *loss)
{
    const mp_tensor *logits;
    mp_xent_result res = {0};
    t->model.step = step * t->accum + i; /* each micro-batch its own dropout masks */
    if (t->before_forward)
        t->before_forward(t, step, &x, t->hook_arg);
    MP_TRY(mp_model_forward(&t->model, &x, true, &logits));
    PROFILED("loss", t->ops->softmax_xent(logits, labels, t->cfg->train.label_smoothing,
                                          mp_grad_sync_pre_scale(&t->sync) / micro, t->st,
                                          want_loss ? &res : NULL, &dl));
    if (t->before_backward)
        t->before_backward(t, step, &dl, t->hook_arg);
    if (i + 1 < micro) { /* no_sync: nothing travels until the window's last micro-batch */
        mp_status (*ready)(void *, int) = t->model.grads_ready;
        t->model.grads_ready = NULL;
        mp_status st = mp_model_backward(&t->model, &x, &dl);
        t->model.grads_ready = ready;
        MP_TRY(st);
        PROFILED("accumulate", mp_grad_sync_accumulate(&t->sync, i == 0));
    } else {
        mp_grad_sync_begin(&t->sync, micro > 1);
        if (t->ready.sum)
            mp_ready_times_begin(&t->ready);
        MP_TRY(mp_model_backward(&t->model, &x, &dl));
        if (t->ready.sum)
            mp_ready_times_end(&t->ready);
        PROFILED("gradient sync wait", mp_grad_sync_finish(&t->sync));
    }
    *loss = res.loss;
    return MP_OK;
}

/* Before micro-batch i > 0 of a step, where the model's masks read their index from the state
 * (t->graph.masks_read: mp_model_mask_step): that index, step * accum + i, into the state
 * (amp_step_values, with the step's rate); micro-batch 0's came with the step's rate. */
static mp_status step_masks(mp_trainer *t, int64_t step, int i, double lr)
{
    if (i == 0 || !t->graph.masks_read)
        return MP_OK;
    return t->ops->amp_step_values(t->st, lr, step * t->accum + i);
}

/* micro_device on the next micro-batch from the loader. */
static mp_status micro_batch(mp_trainer *t, int64_t step, int i, int micro, bool want_loss,
                             mp_window *w, mp_train_result *r, double *loss)
{
    mp_tensor x, dl;
    const int32_t *labels;
    int64_t n;
    PROFILED("data", next_batch(t, &x, &dl, &labels, &n, r));
    MP_TRY(micro_device(t, step, i, micro, want_loss, x, dl, labels, loss));
    w->images += n * t->comm->size;
    return MP_OK;
}

/* What a graph holds (src/train_graph.h): micro-batch i of `micro` of a step, already in x, dl
 * and labels, handing nothing to the host: the first also saves the statistics, the last ends
 * the step (the gradients' sum, the optimizer, the statistics' revert, the scaler update). */
typedef struct step_body {
    int64_t step;
    int i, micro;
    mp_tensor x, dl;
    const int32_t *labels;
} step_body;

static mp_status device_micro(mp_trainer *t, void *arg)
{
    const step_body *b = arg;
    double loss;
    if (b->i == 0)
        PROFILED("bn statistics", mp_model_stats_save(&t->model));
    MP_TRY(micro_device(t, b->step, b->i, b->micro, false, b->x, b->dl, b->labels, &loss));
    if (b->i + 1 < b->micro)
        return MP_OK;
    t->model.step = b->step;
    return apply_gradients(t, false);
}

/* The device part of a step that hands nothing to the host, each micro-batch as the graph of
 * its kind where the run allows it (src/train_graph.h), else eagerly: the same ops either way.
 * The stop request is written before it (a signal that comes during the step stops the run a
 * step later than an eager step's agreement would); the masks' index of micro-batch i > 0 before
 * it (step_masks). */
static mp_status graph_step(mp_trainer *t, int64_t step, int micro, double lr, mp_window *w,
                            mp_train_result *r)
{
    bool graphs = mp_train_graph_wanted(t);
    MP_TRY(stop_request(t));
    for (int i = 0; i < micro; i++) {
        step_body b = {.step = step, .i = i, .micro = micro};
        int64_t n;
        MP_TRY(step_masks(t, step, i, lr));
        PROFILED("data", next_batch(t, &b.x, &b.dl, &b.labels, &n, r));
        w->images += n * t->comm->size;
        int kind = (i == 0 ? MP_GRAPH_FIRST : 0) | (i + 1 == micro ? MP_GRAPH_LAST : 0);
        MP_TRY(graphs ? mp_train_graph_run(t, step, kind, n, micro, device_micro, &b)
                      : device_micro(t, &b));
    }
    t->model.step = step; /* what messages name */
    return MP_OK;
}

/* One optimizer step `step` over `micro` micro-batches. want_loss: the host waits for this
 * step's loss (logging steps; the mean over the micro-batches); host: the step ends at a host
 * point. Otherwise nothing here waits for the device. */
static mp_status train_step(mp_trainer *t, int64_t step, int micro, double lr, bool want_loss,
                            bool host, mp_window *w, mp_train_result *r, double *loss)
{
    double t0 = mp_now(), sum = 0.0, mark = mp_profile_begin("step");
    /* the optimizer's rate and micro-batch 0's masks index (graphs read them there too) */
    MP_TRY(t->ops->amp_step_values(t->st, lr, step * t->accum));
    if (!want_loss && !host && t->graph.allowed) {
        int64_t launches = t->graph.launches;
        MP_TRY(graph_step(t, step, micro, lr, w, r));
        if (t->graph.launches > launches) { /* a launch times no sums: not the last eager
                                               step's again (a warm-up step did time its own) */
            t->sync.comm_ms = t->sync.exposed_ms = 0.0;
            t->sync.timed = false;
            mp_grad_sync_unmarked(&t->sync);
        }
    } else {
        PROFILED("bn statistics", mp_model_stats_save(&t->model)); /* put back if skipped */
        for (int i = 0; i < micro; i++) {
            double one = 0.0;
            MP_TRY(step_masks(t, step, i, lr));
            MP_TRY(micro_batch(t, step, i, micro, want_loss, w, r, &one));
            sum += one;
        }
        t->model.step = step; /* what messages name */
        if (t->after_reduce)
            t->after_reduce(t, step, t->hook_arg);
        MP_TRY(apply_gradients(t, true));
    }
    w->comm_ms += t->sync.comm_ms;
    w->timed += t->sync.timed;
    w->comm[w->steps % MP_WINDOW_COMM] = t->sync.comm_ms;
    w->exposed_ms += t->sync.exposed_ms;
    r->comm_exposed_s += 1e-3 * t->sync.exposed_ms;
    if (want_loss) /* a logged step ends the window: its device time ends here */
        MP_TRY(t->ops->mark_record(&w->mark[1]));
    if (host)
        PROFILED("host point", host_point(t));
    mp_profile_step_end(mark);
    double t1 = mp_now();
    mp_trace_span("step", "step", MP_TRACE_MAIN, t0, t1, step);
    r->step_s += t1 - t0;
    w->steps++;
    *loss = sum / micro;
    return MP_OK;
}

/* The part of parameter i's separate FP32 master that this rank holds (all of it unsharded or
 * gathered, what lies in its block when sharded); empty when the group has no separate master
 * or the block does not reach the parameter. */
static mp_tensor master_part(const mp_params *p, int i)
{
    const mp_param_group *g = &p->groups[p->views[i].group];
    int64_t lo, hi;
    if (!g->master.data || g->master.data == g->model.data || !mp_params_block_part(p, i, &lo, &hi))
        return (mp_tensor){0};
    return mp_params_slice(&g->master, lo - g->lo, hi - g->lo);
}

/* At an evaluation and before a checkpoint: MP_EDIVERGED naming the first parameter (model
 * copy or FP32 master) or BatchNorm statistic that holds an inf or NaN, so that a run whose
 * weights went bad never ends as done nor saves them. The parameters are the same on every rank
 * (a failure on them is reached together: sharded, each rank checks its block of the masters
 * and one MAX agrees on the first); the BatchNorm statistics are rank 0's own before a
 * save (synchronised only before an evaluation), so a failure on them is not. */
static mp_status check_finite(mp_trainer *t)
{
    const mp_params *p = &t->model.params;
    mp_status st = MP_OK;
    int bad = p->count; /* the first parameter with a bad value, in model order */
    for (int i = 0; i < p->count && bad == p->count; i++) {
        mp_tensor v = mp_params_value(p, i), m = master_part(p, i);
        if (nonfinite(t, &v, &st) || nonfinite(t, &m, &st))
            bad = i;
    }
    MP_TRY(st);
    if (mp_params_sharded(p)) { /* each rank saw its block of the masters: the first of all */
        double first = -(double)bad;
        MP_TRY(mp_comm_allreduce(t->comm, &first, 1, MP_F64, MP_REDOP_MAX,
                                 "agreement on the finiteness of the sharded masters"));
        bad = (int)-first;
    }
    if (bad < p->count)
        return together(t, mp_fail(MP_EDIVERGED, "diverged: parameter %s holds inf or NaN "
                                   "values at step %lld (the first one in model order; "
                                   "learning rate, weight decay or data normalisation too "
                                   "large?)", p->views[bad].name, (long long)t->model.step + 1));
    mp_named_tensor bufs[MP_MAX_PARAMS];
    int nbufs = mp_model_buffers(&t->model, bufs, MP_MAX_PARAMS);
    for (int j = 0; j < nbufs && j < MP_MAX_PARAMS; j++)
        if (nonfinite(t, &bufs[j].t, &st))
            return mp_fail(MP_EDIVERGED, "diverged: BatchNorm statistic %s holds inf or NaN "
                           "values at step %lld", bufs[j].name, (long long)t->model.step + 1);
    return st;
}

static mp_status evaluate_epoch(mp_trainer *t, int64_t epoch, mp_train_result *r)
{
    double t0 = mp_now();
    MP_TRY(mp_train_evaluate(t, &r->test_loss, &r->accuracy));
    mp_trace_span("evaluation", "evaluation", MP_TRACE_MAIN, t0, mp_now(), epoch);
    MP_TRY(check_finite(t));
    if (!isfinite(r->test_loss))
        return together(t, mp_fail(MP_EDIVERGED, "diverged: the test loss after epoch %lld is %g "
                                   "with finite parameters (inputs out of range: data.mean and "
                                   "data.std?)", (long long)epoch + 1, r->test_loss));
    bool text = t->test.text != NULL;
    mp_eval_record e = {.epoch = epoch, .loss = r->test_loss, .accuracy = r->accuracy,
                        .text = text};
    if (t->metrics)
        mp_metrics_eval(t->metrics, &e);
    if (text)
        mp_progress_line(&t->progress, "eval epoch %lld: test loss %.4f (%.4f bits per byte) "
                         "accuracy %.4f", (long long)epoch + 1, r->test_loss,
                         mp_metrics_bpb(r->test_loss), r->accuracy);
    else
        mp_progress_line(&t->progress, "eval epoch %lld: test loss %.4f accuracy %.4f",
                         (long long)epoch + 1, r->test_loss, r->accuracy);
    return MP_OK;
}

/* Saves a checkpoint of the state after `at` (collective); with checkpoint.async rank 0 first
 * waits for the save before if it is still in flight. */
static mp_status save(mp_trainer *t, const mp_resume_point *at, mp_train_result *r)
{
    double t0 = mp_now();
    MP_TRY(mp_train_save_finished(t, true, r)); /* at most one in flight */
    double waited = mp_now() - t0;
    /* Sharded (ZeRO-1), a synchronous save gathers one parameter at a time as rank 0 writes it;
     * the async snapshot needs the whole state on rank 0, gathered on every rank first. */
    bool stream = mp_params_sharded(&t->model.params) && !t->cfg->checkpoint.async;
    if (!stream)
        MP_TRY(mp_train_gather(t));
    mp_status st = check_finite(t);
    mp_train_state state = mp_train_state_of(t);
    if (stream)
        state.whole = mp_train_whole_part, state.whole_arg = t;
    if (st == MP_OK)
        st = mp_train_save_state(t, &state, at, r);
    mp_status end = mp_train_ungather(t, false);
    MP_TRY(st != MP_OK ? st : end);
    mp_train_saved(t, &state, at, r, t0, waited);
    return MP_OK;
}

/* After a step that leaves the run at `at`: stops on an agreed signal or at the step budget
 * (never at the last step, which ends normally) and saves the checkpoints that are due. */
static mp_status after_step(mp_trainer *t, const mp_resume_point *at, mp_train_result *r)
{
    const mp_config *c = t->cfg;
    bool last = at->step >= t->total_steps;
    bool budget = c->train.step_budget > 0 && at->step - t->start.step >= c->train.step_budget;
    mp_ckpt_async_step(t->ckpt); /* this step ran while the save in flight was written */
    MP_TRY(mp_train_save_finished(t, false, r));
    if (!last && t->stop_signal) {
        t->stop = true;
        r->stopped_by = mp_stop_name(t->stop_signal);
        r->stop_signal = t->stop_signal;
    } else if (!last && budget) {
        t->stop = true;
        r->stopped_by = "train.step_budget";
    }
    bool every = c->checkpoint.every_steps > 0 && at->step % c->checkpoint.every_steps == 0;
    if (c->checkpoint.dir[0] && !last && (t->stop || every))
        MP_TRY(save(t, at, r));
    return MP_OK;
}

/* Raises r->device_used_peak to the device's use now, where the backend knows it. */
static void sample_device_use(const mp_trainer *t, mp_train_result *r)
{
    int64_t used = t->ops->mem_used_bytes();
    if (used > r->device_used_peak)
        r->device_used_peak = used;
}

/* Whether the end of epoch `epoch` (from 0) evaluates: every train.eval_every epochs. */
static bool eval_due(const mp_config *c, int64_t epoch)
{
    return c->train.eval_every > 0 && (epoch + 1) % c->train.eval_every == 0;
}

/* mp_train_run's loop, timing windows in w (its start mark recorded). */
static mp_status run(mp_trainer *t, mp_train_result *r, mp_window *w)
{
    const mp_config *c = t->cfg;
    double start = w->t0;
    int64_t step = t->start.step, epoch = t->start.epoch, evaluated = -1, images = 0;
    int64_t gb = c->data.batch_size * t->comm->size;
    mp_resume_point at = t->start;
    double rate = 0.0; /* images/s of the last logged window, shown by the bar in between */
    t->stop = false;
    MP_TRY(mp_train_graph_setup(t));
    if (c->log.profile)
        mp_profile_start(t->ops, strcmp(c->log.profile_clock, "device") == 0);
    else
        mp_profile_stop(); /* an earlier run in this process that failed may have left it on */
    MP_TRY(mp_train_write_state(t));
    sample_device_use(t, r);
    if (mp_train_rest_dropped(t)) {
        /* the rest of the resumed epoch, less than a batch, that data.drop_last drops: its end */
        if (eval_due(c, epoch)) {
            MP_TRY(evaluate_epoch(t, epoch, r));
            evaluated = epoch;
        }
        at = (mp_resume_point){.step = step, .epoch = ++epoch, .position = 0};
    }
    for (; epoch < c->train.epochs && step < t->total_steps && !t->stop; epoch++) {
        int64_t from = epoch == t->start.epoch ? t->start.position : 0;
        mp_sampler_set_epoch_at(&t->sampler, epoch, from);
        int64_t batches = mp_train_batches(t, t->sampler.count);
        int64_t steps = mp_train_steps(t, t->sampler.count);
        int64_t take = batches * c->data.batch_size;
        mp_loader_start_epoch(t->loader, t->sampler.local,
                              take < t->sampler.count ? take : t->sampler.count, epoch);
        for (int64_t b = 0; b < steps && step < t->total_steps && !t->stop; b++) {
            double lr = mp_schedule_lr(&t->sched, step), loss;
            int64_t before = w->images, next = step + 1;
            int64_t done = (b + 1) * t->accum < batches ? (b + 1) * t->accum : batches;
            bool end = b + 1 == steps;
            bool log = next % c->log.every == 0 || next == t->total_steps;
            bool eval = end && eval_due(c, epoch);
            bool budget = c->train.step_budget > 0 && next - t->start.step >= c->train.step_budget;
            bool ckpt = c->checkpoint.dir[0] && c->checkpoint.every_steps > 0 &&
                        next % c->checkpoint.every_steps == 0;
            bool host = t->ops->host_memory || log || end || eval || budget || ckpt;
            t->comm->step = step;
            MP_TRY(train_step(t, step, (int)(done - b * t->accum), lr, log, host, w, r, &loss));
            images += w->images - before;
            step = next;
            if (log) {
                MP_TRY(mp_train_log_window(t, step, epoch, loss, lr, t->hst->step_scale,
                                           t->hst->scaler.consecutive_skips > 0, w,
                                           &r->final_loss, &rate));
                sample_device_use(t, r);
            } else
                mp_progress_step(&t->progress, step, epoch + 1, r->final_loss, lr, rate);
            if (eval) {
                MP_TRY(evaluate_epoch(t, epoch, r));
                evaluated = epoch;
            }
            at = (mp_resume_point){.step = step,
                                   .epoch = end ? epoch + 1 : epoch,
                                   .position = end ? 0 : from + done * gb};
            MP_TRY(after_step(t, &at, r));
            if (t->step_end)
                t->step_end(t, step - 1, t->hook_arg);
        }
    }
    mp_profile_stop();
    sample_device_use(t, r);
    r->wall_s = mp_now() - start;
    r->steps = step;
    r->skipped_steps = t->scaler.skipped_steps;
    r->loss_scale = t->scaler.scale;
    r->images_per_s = r->wall_s > 0 ? (double)images / r->wall_s : 0.0;
    if (t->stop) {
        r->stopped = true;
        MP_TRY(mp_train_save_finished(t, true, r));
        mp_progress_finish(&t->progress);
        return MP_OK;
    }
    if (evaluated != epoch - 1)
        MP_TRY(evaluate_epoch(t, epoch - 1, r));
    if (c->checkpoint.dir[0] && c->checkpoint.at_end && step > t->start.step)
        MP_TRY(save(t, &at, r));
    MP_TRY(mp_train_save_finished(t, true, r)); /* the run is done when its last file is */
    if (t->metrics)
        mp_train_write_summary(t, r);
    mp_progress_finish(&t->progress);
    return MP_OK;
}

mp_status mp_train_run(mp_trainer *t, mp_train_result *r)
{
    memset(r, 0, sizeof *r);
    r->device_used_peak = -1;
    if (t->forward_only)
        return mp_fail(MP_EINTERNAL, "train: the trainer was set up to evaluate only "
                       "(mp_train_setup_eval)");
    t->data_failed = MP_OK; /* nothing an earlier run on this trainer failed with stays */
    t->data_why[0] = '\0';
    t->failed_together = false;
    t->fail_reporter = 0;
    mp_window w = {.t0 = mp_now()};
    mp_status st = t->ops->mark_record(&w.mark[0]);
    if (st == MP_OK)
        st = run(t, r, &w);
    t->ops->mark_free(w.mark[0]);
    t->ops->mark_free(w.mark[1]);
    return st;
}
