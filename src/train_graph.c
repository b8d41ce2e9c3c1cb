/* The training step as a graph (src/train_graph.h). */
#include "src/train_graph.h"

#include <stdio.h>
#include <string.h>

#include "src/train.h"

/* Eager steps before the capture: the first grows the workspaces, the second runs with them. */
enum { MP_GRAPH_WARMUP = 2 };

/* Why t's step may not be captured, or NULL. */
static const char *why_not(const mp_trainer *t)
{
    const mp_config *c = t->cfg;
    if (t->ops->host_memory)
        return "the plain CPU backend runs each op as it is called (graphs need CUDA, or the "
               "staged CPU backend: MPDIST_CPU_STAGED=1)";
    if (!mp_comm_can_capture(t->comm, t->ops))
        return "more than one rank, and the gradients travel where a graph cannot hold them "
               "(through the host; comm.backend = \"nccl\" captures them)";
    if (c->log.profile)
        return "log.profile times each op";
    if (t->before_forward || t->before_backward || t->after_reduce)
        return "a test hook runs inside the step";
    return NULL;
}

mp_status mp_train_graph_setup(mp_trainer *t)
{
    mp_train_graph *g = &t->graph;
    mp_train_graph_free(t); /* an earlier run's, which this one captures anew */
    memset(g, 0, sizeof *g);
    g->captured_at = -1;
    for (int k = 0; k < MP_GRAPH_KINDS; k++)
        g->launched_at[k] = -1;
    g->warmup = MP_GRAPH_WARMUP;
    const char *mode = t->cfg->amp.cuda_graphs;
    /* auto: where a launch saves the host's work, on CUDA; the staged CPU backend records and
     * replays the same ops, no faster, and captures when asked to ("on": the tests) */
    if (strcmp(mode, "off") == 0 || (strcmp(mode, "auto") == 0 && strcmp(t->ops->name, "cuda")))
        return MP_OK;
    g->why_not = why_not(t);
    g->insist = strcmp(mode, "on") == 0;
    g->allowed = g->why_not == NULL;
    /* dropout and attention masks from the index amp_step_values writes into the state before
     * each micro-batch (step * accum + i, the eager path's), which a launch reads */
    if (g->allowed)
        mp_model_mask_step(&t->model, &t->st->mask_step);
    g->masks_read = g->allowed;
    if (!g->allowed && g->insist) {
        char at[900];
        return mp_fail(MP_EUSAGE, "%s: \"on\", but this run cannot capture its step: %s",
                       mp_config_key_at(t->cfg, "amp.cuda_graphs", at, sizeof at), g->why_not);
    }
    if (!g->allowed && t->comm->rank == 0)
        mp_progress_line(&t->progress, "graph: the step runs op by op (amp.cuda_graphs = "
                         "\"auto\"): %s", g->why_not);
    return MP_OK;
}

bool mp_train_graph_wanted(mp_trainer *t)
{
    mp_train_graph *g = &t->graph;
    if (!g->allowed)
        return false;
    if (g->warmup > 0) {
        g->warmup--;
        return false;
    }
    return true;
}

/* The first failure of a capture: st, its message kept in why (before a later call overwrites
 * it), or `why` as it is when st is MP_OK. */
static mp_status first(mp_status st, mp_status now, char *why, size_t len)
{
    if (st == MP_OK && now != MP_OK)
        snprintf(why, len, "%s", mp_error_message());
    return st != MP_OK ? st : now;
}

/* Captures body(t, arg) into *exec, its collectives with it (mp_comm_capture_begin); with
 * several ranks, all agree on whether every rank's capture succeeded, so that all launch the
 * graph or none does. A failure leaves *exec NULL and its message in why (another rank's: "the
 * capture failed on rank R"); a failure of the agreement itself breaks the communicator
 * (t->comm->broken), which ends the run. */
static mp_status capture(mp_trainer *t, mp_status (*body)(mp_trainer *t, void *arg), void *arg,
                         void **exec, char *why, size_t len)
{
    *exec = NULL;
    mp_status st = first(MP_OK, mp_comm_capture_begin(t->comm, t->ops), why, len);
    if (st == MP_OK) {
        st = first(st, t->ops->graph_begin(), why, len);
        if (st == MP_OK) {
            st = first(st, body(t, arg), why, len);
            st = first(st, mp_comm_capture_end(t->comm), why, len);
            st = first(st, t->ops->graph_end(exec), why, len);
        } else {
            mp_comm_capture_end(t->comm);
        }
    }
    if (t->comm->size > 1) {
        int reporter = -1;
        mp_status agreed = mp_comm_agree(t->comm, st, &reporter);
        if (t->comm->broken)
            snprintf(why, len, "%s", mp_error_message());
        else if (st == MP_OK && agreed != MP_OK)
            snprintf(why, len, "the capture failed on rank %d", reporter);
        st = agreed;
    }
    if (st != MP_OK) {
        t->ops->graph_free(*exec);
        *exec = NULL;
    }
    return st;
}

/* With several ranks, after steps that ran eagerly (where an op at another shape may have moved
 * a workspace on one rank and not on another: the timed cuDNN trials may choose differently):
 * whether any rank's graph no longer holds its workspaces, so that all capture again or none
 * does (a graph with collectives must be launched by every rank that captured it). */
static mp_status agree_again(mp_trainer *t, bool *again)
{
    double any = *again ? 1.0 : 0.0;
    MP_TRY(mp_comm_allreduce(t->comm, &any, 1, MP_F64, MP_REDOP_MAX,
                             "agreement on capturing the step's graph again"));
    *again = any != 0.0;
    return MP_OK;
}

mp_status mp_train_graph_run(mp_trainer *t, int64_t step, int kind, int64_t rows, int micro,
                             mp_status (*body)(mp_trainer *t, void *arg), void *arg)
{
    mp_train_graph *g = &t->graph;
    if (!g->allowed || (g->exec[kind] && (rows != g->batch[kind] || micro != g->micro[kind]))) {
        for (int k = 0; k < MP_GRAPH_KINDS; k++) /* ops at other shapes may move a workspace */
            g->launched_at[k] = -1;
        return body(t, arg);
    }
    bool again = g->exec[kind] && !t->ops->graph_valid(g->exec[kind]);
    int64_t last = g->launched_at[kind];
    if (g->exec[kind] && t->comm->size > 1 && (last < 0 || (step != last && step != last + 1)))
        MP_TRY(agree_again(t, &again));
    if (again) {
        t->ops->graph_free(g->exec[kind]);
        g->exec[kind] = NULL;
    }
    if (!g->exec[kind]) {
        char why[512] = "";
        void *exec = NULL;
        mp_status st = capture(t, body, arg, &exec, why, sizeof why);
        if (st != MP_OK) {
            if (g->insist || t->comm->broken)
                return mp_fail(st, "%s", why);
            g->allowed = false;
            if (t->comm->rank == 0)
                mp_progress_line(&t->progress, "graph: the capture of step %lld failed (%s); "
                                 "the run goes on op by op", (long long)step + 1, why);
            return body(t, arg);
        }
        g->exec[kind] = exec;
        g->batch[kind] = rows;
        g->micro[kind] = micro;
        if (g->captured_at < 0)
            g->captured_at = step;
        g->captures++;
        if (t->comm->rank == 0)
            mp_progress_line(&t->progress, "graph: step %lld captured%s%s; each step that logs "
                             "nothing from here on is %s", (long long)step + 1,
                             kind == (MP_GRAPH_FIRST | MP_GRAPH_LAST) ? ""
                             : kind == MP_GRAPH_FIRST ? " (its first micro-batch)"
                             : kind == MP_GRAPH_LAST ? " (its last micro-batch)"
                                                     : " (a middle micro-batch)",
                             again ? " again (a workspace moved since the last capture)" : "",
                             kind == (MP_GRAPH_FIRST | MP_GRAPH_LAST) ? "one launch"
                                                                      : "a launch a micro-batch");
    }
    MP_TRY(mp_comm_graph_launch(t->comm, t->ops, g->exec[kind], "the step's graph (its "
                                "collectives inside)"));
    g->launches++;
    g->launched_at[kind] = step;
    return MP_OK;
}

void mp_train_graph_free(mp_trainer *t)
{
    bool any = false;
    for (int k = 0; k < MP_GRAPH_KINDS; k++)
        any = any || t->graph.exec[k];
    /* a launch still running holds NCCL's captured collectives: its ticket first (bounded by
     * comm.timeout_s; a failure breaks the communicator, whose job is ending) */
    if (any && t->comm && mp_comm_has_device(t->comm) && !t->comm->broken &&
        mp_comm_device_wait(t->comm, t->comm->dissued) != MP_OK)
        fprintf(stderr, "mpdist: warning: %s\n", mp_error_message());
    for (int k = 0; k < MP_GRAPH_KINDS; k++) {
        if (t->ops && t->graph.exec[k])
            t->ops->graph_free(t->graph.exec[k]);
        t->graph.exec[k] = NULL;
    }
    mp_model_mask_step(&t->model, NULL); /* the state it points at may go with the trainer */
    t->graph.masks_read = false;
}
