/* The opt-level table of docs/ARCHITECTURE.md §3 and its resolution. */
#include "engine/amp.h"

#include <string.h>

static const char *const mp_level_names[] = {"O0", "O1", "O2", "O3"};

int mp_opt_level_parse(const char *s, mp_opt_level *level)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, mp_level_names[i]) == 0) {
            *level = (mp_opt_level)i;
            return 0;
        }
    return -1;
}

const char *mp_opt_level_name(mp_opt_level level) { return mp_level_names[level]; }

mp_amp_defaults mp_amp_level_defaults(mp_opt_level level, mp_dtype half)
{
    mp_amp_defaults d = {.keep_batchnorm_fp32 = level != MP_O3,
                         .master_weights = level == MP_O2,
                         .loss_scale = 1.0};
    if ((level == MP_O1 || level == MP_O2) && half == MP_F16)
        d.loss_scale = 0.0;
    return d;
}

mp_amp_policy mp_amp_resolve(mp_opt_level level, mp_dtype half, bool keep_batchnorm_fp32,
                             bool master_weights, double loss_scale, bool allow_tf32)
{
    mp_amp_policy p = {.level = level, .half = half, .allow_tf32 = allow_tf32,
                       .keep_batchnorm_fp32 = keep_batchnorm_fp32, .loss_scale = loss_scale};
    bool half_model = level == MP_O2 || level == MP_O3;
    p.weights = half_model ? half : MP_F32;
    p.compute = level == MP_O0 ? MP_F32 : half;
    p.input = half_model ? half : MP_F32;
    p.norm = keep_batchnorm_fp32 ? MP_F32 : p.weights;
    p.cast_weights = level == MP_O1;
    p.master_weights = half_model && master_weights;
    return p;
}

void mp_amp_print(const mp_amp_policy *p, FILE *out)
{
    fprintf(out, "opt level %s (%s):", mp_opt_level_name(p->level), mp_dtype_name(p->half));
    fprintf(out, " weights %s, master weights %s, GEMM/conv %s%s, norm layers' params %s,",
            mp_dtype_name(p->weights), p->master_weights ? "fp32" : "none",
            mp_dtype_name(p->compute), p->cast_weights ? " (weights cast once per step)" : "",
            mp_dtype_name(p->norm));
    fprintf(out, " LayerNorm output %s, softmax and loss fp32,",
            mp_dtype_name(p->level == MP_O1 ? MP_F32 : p->weights));
    if (p->loss_scale == 0.0)
        fprintf(out, " loss scale dynamic,");
    else
        fprintf(out, " loss scale %g (static),", p->loss_scale);
    fprintf(out, " grads %s, tf32 %s\n", mp_dtype_name(p->weights),
            p->allow_tf32 ? "allowed" : "off");
}
