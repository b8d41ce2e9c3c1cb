/* The run's summary record (train.h: mp_train_write_summary). */
#include <stdio.h>

#include "engine/profile.h"
#include "src/train.h"

void mp_train_write_summary(const mp_trainer *t, const mp_train_result *r)
{
    const mp_config *c = t->cfg;
    mp_summary_record s = {
        .world_size = t->comm->size,
        .opt_level = mp_opt_level_name(t->amp.level),
        .half = c->amp.half,
        .backend = t->ops->name,
        .model = c->model.preset,
        .wall_s = r->wall_s,
        .images_per_s = r->images_per_s,
        .accuracy = r->accuracy,
        .text = t->test.text != NULL,
        .test_loss = r->test_loss,
        .final_loss = r->final_loss,
        .loss_scale = r->loss_scale,
        .steps = r->steps,
        .step_s = r->step_s,
        .input_wait_s = r->input_wait_s,
        .comm_exposed_s = r->comm_exposed_s,
        .skipped_steps = r->skipped_steps,
        .peak_mem_bytes = mp_mem_peak_total(),
        .device_peak_bytes = mp_mem_peak_at(MP_MEM_DEVICE),
        .host_peak_bytes = mp_mem_peak_at(MP_MEM_HOST),
        .device_used_peak_bytes = r->device_used_peak,
        .amp_weights = mp_dtype_name(t->amp.weights),
        .amp_compute = mp_dtype_name(t->amp.compute),
        .amp_norm = mp_dtype_name(t->amp.norm),
        .amp_grads = mp_dtype_name(t->amp.weights),
        .amp_master_weights = t->amp.master_weights,
        .amp_keep_batchnorm_fp32 = t->amp.keep_batchnorm_fp32,
        .amp_loss_scale = t->amp.loss_scale,
        .graph_captured_at = t->graph.captured_at + 1,
        .graph_captures = t->graph.captures,
        .graph_launches = t->graph.launches,
    };
    if (t->loader) {
        mp_loader_stats ls;
        mp_loader_stats_get(t->loader, &ls);
        s.loader_fills = ls.fills;
        s.loader_fill_s = ls.fill_s;
        s.loader_fence_s = ls.fence_s;
        s.loader_slot_wait_s = mp_loader_device_wait_s(t->loader);
    }
    int64_t steps = 0;
    double step_s = 0.0;
    const mp_prof_entry *e = mp_profile_entries(&s.n_prof, &steps, &step_s);
    for (int i = 0; c->log.profile && steps > 0 && i < s.n_prof; i++) {
        snprintf(s.prof_name[i], sizeof s.prof_name[i], "%s %s", e[i].kind,
                 mp_prof_phase_name(e[i].phase));
        s.prof_ms[i] = 1e3 * e[i].s / (double)steps;
    }
    if (!c->log.profile || steps == 0)
        s.n_prof = 0;
    s.prof_step_ms = steps > 0 ? 1e3 * step_s / (double)steps : 0.0;
    for (int i = 0; i < MP_MEM_NCAT && i < 8; i++) {
        s.mem_names[i] = mp_mem_cat_name((mp_mem_cat)i);
        s.mem_bytes[i] = mp_mem_peak((mp_mem_cat)i);
        s.n_mem = i + 1;
    }
    if (t->ready.sum)
        mp_ready_times_report(&t->ready, t->metrics, t->accum);
    mp_metrics_summary(t->metrics, &s);
}
