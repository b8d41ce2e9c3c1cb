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
    if (t->comm->size > 1)
        return "more than one rank (the gradient all-reduce is not captured)";
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
    g->warmup = MP_GRAPH_WARMUP;
    const char *mode = t->cfg->amp.cuda_graphs;
    /* auto: where a launch saves the host's work, on CUDA; the staged CPU backend records and
     * replays the same ops, no faster, and captures when asked to ("on": the tests) */
    if (strcmp(mode, "off") == 0 || (strcmp(mode, "auto") == 0 && strcmp(t->ops->name, "cuda")))
        return MP_OK;
    g->why_not = why_not(t);
    g->allowed = g->why_not == NULL;
    /* dropout and attention masks from the index amp_step_values writes into the state before
     * each micro-batch (step * accum + i, the eager path's), which a launch reads */
    if (g->allowed)
        mp_model_mask_step(&t->model, &t->st->mask_step);
    g->masks_read = g->allowed;
    g->insist = strcmp(mode, "on") == 0;
    if (!g->allowed && g->insist)
        return mp_fail(MP_EUSAGE, "%s: amp.cuda_graphs = \"on\", but this run cannot capture "
                       "its step: %s", t->cfg->path, g->why_not);
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

mp_status mp_train_graph_run(mp_trainer *t, int64_t step, int kind, int64_t rows, int micro,
                             mp_status (*body)(mp_trainer *t, void *arg), void *arg)
{
    mp_train_graph *g = &t->graph;
    if (!g->allowed || (g->exec[kind] && (rows != g->batch[kind] || micro != g->micro[kind])))
        return body(t, arg);
    bool again = g->exec[kind] && !t->ops->graph_valid(g->exec[kind]);
    if (again) {
        t->ops->graph_free(g->exec[kind]);
        g->exec[kind] = NULL;
    }
    if (!g->exec[kind]) {
        MP_TRY(t->ops->graph_begin());
        mp_status st = body(t, arg);
        char why[512] = "";
        if (st != MP_OK) /* the op's failure, before graph_end's own overwrites the message */
            snprintf(why, sizeof why, "%s", mp_error_message());
        void *exec = NULL;
        mp_status end = t->ops->graph_end(&exec);
        if (st == MP_OK && end != MP_OK)
            snprintf(why, sizeof why, "%s", mp_error_message());
        if (st != MP_OK || end != MP_OK) {
            t->ops->graph_free(exec);
            if (g->insist)
                return mp_fail(st != MP_OK ? st : end, "%s", why);
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
    MP_TRY(t->ops->graph_launch(g->exec[kind]));
    g->launches++;
    return MP_OK;
}

void mp_train_graph_free(mp_trainer *t)
{
    for (int k = 0; k < MP_GRAPH_KINDS; k++) {
        if (t->ops && t->graph.exec[k])
            t->ops->graph_free(t->graph.exec[k]);
        t->graph.exec[k] = NULL;
    }
    mp_model_mask_step(&t->model, NULL); /* the state it points at may go with the trainer */
    t->graph.masks_read = false;
}
