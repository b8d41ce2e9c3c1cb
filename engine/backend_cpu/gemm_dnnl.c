/* bf16 GEMMs through oneDNN's matmul (what PyTorch runs for bf16 matmuls on CPUs), on CPUs with
 * bf16 dot products (AVX512-BF16, AMX): the operands as they are, an FP32 result or one rounded
 * to bf16 by oneDNN itself (no FP32 copy of c to write and read back), against widening both to
 * FP32 for OpenBLAS's sgemm (3-4x the time at the mlp's and gpt's shapes on a 2-core
 * AVX512-BF16 VM). The transposes are the operands' strides (plain
 * layouts: oneDNN's brgemm kernels pack them themselves); a primitive per shape and thread
 * count, kept in engine/backend_cpu/dnnl_cache.h's table. */
#include "engine/backend_cpu/gemm_dnnl.h"

#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/backend_cpu/isa.h"
#include "engine/env_choice.h"

#ifdef MPDIST_HAVE_DNNL
#include <omp.h>
#include <pthread.h>

#include "engine/backend_cpu/dnnl_cache.h"

/* The first int tells it from conv_dnnl.c's keys (their kinds are 0-2). */
enum { MP_DNNL_MATMUL = 16 };

typedef struct gemm_key {
    int kind, dtype, ta, tb;
    int64_t m, n, k;
    int threads, cdt; /* cdt: c's dtype, MP_F32 or MP_BF16 */
} gemm_key;
_Static_assert(sizeof(gemm_key) == 48, "gemm_key has no padding: keys are compared with memcmp");

static bool mp_gemm_env_off;

static void gemm_open(void)
{
    mp_gemm_env_off = mp_env_choice(MP_ENV_CPU_GEMM) == 0; /* "openblas" */
}

/* a (which 0), b (1) and c (2) of key k as oneDNN sees them: op(a) (m, k), op(b) (k, n),
 * c (m, n). */
static dnnl_status_t tensor_md(const gemm_key *k, int which, dnnl_memory_desc_t *md)
{
    dnnl_dims_t d = {which == 1 ? k->k : k->m, which == 0 ? k->k : k->n};
    bool t = which == 0 ? k->ta : which == 1 ? k->tb : false;
    dnnl_data_type_t dt = which < 2 || k->cdt == MP_BF16 ? dnnl_bf16 : dnnl_f32;
    return dnnl_memory_desc_init_by_tag(md, 2, d, dt, t ? dnnl_ba : dnnl_ab);
}

static void make_entry(const void *key, mp_dnnl_entry *e)
{
    const gemm_key *k = key;
    dnnl_memory_desc_t md[3];
    for (int i = 0; i < 3; i++)
        if (tensor_md(k, i, &md[i]) != dnnl_success)
            return;
    dnnl_matmul_desc_t mm;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_matmul_desc_init(&mm, &md[0], &md[1], NULL, &md[2]) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        return;
    bool ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                  dnnl_success &&
              dnnl_primitive_desc_create(&pd, &mm, attr, mp_dnnl_engine(), NULL) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    /* bf16 instructions (brg:avx512_core_bf16, AMX), not bf16 emulated in FP32 (gemm:jit under
     * a lower ONEDNN_MAX_CPU_ISA), whose subnormals would differ */
    const char *impl = NULL;
    ok = ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
         impl && (strstr(impl, "bf16") || strstr(impl, "amx"));
    if (ok)
        mp_dnnl_entry_finish(e, pd, md);
    else if (pd)
        dnnl_primitive_desc_destroy(pd);
}

bool mp_cpu_dnnl_gemm_takes(mp_dtype dt)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, gemm_open);
    return dt == MP_BF16 && !mp_gemm_env_off && mp_cpu_isa() == MP_ISA_AVX512BF16 &&
           mp_dnnl_engine();
}

bool mp_cpu_dnnl_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, mp_dtype dt,
                      const void *a, const void *b, mp_dtype cdt, void *c)
{
    if (!mp_cpu_dnnl_gemm_takes(dt) || m <= 0 || n <= 0 || k <= 0 || !mp_dnnl_stream() ||
        (cdt != MP_F32 && cdt != MP_BF16))
        return false;
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.kind = MP_DNNL_MATMUL;
    key.dtype = (int)dt;
    key.ta = ta, key.tb = tb;
    key.m = m, key.n = n, key.k = k;
    key.threads = omp_get_max_threads();
    key.cdt = (int)cdt;
    mp_dnnl_entry *e = mp_dnnl_entry_for(&key, sizeof key, make_entry);
    if (!e->prim)
        return false;
    void *data[3] = {(void *)a, (void *)b, c};
    int roles[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    dnnl_exec_arg_t args[3];
    void *scratch = mp_cpu_workspace(MP_CPU_WS_GEMM_DNNL, e->scratch_bytes + 64);
    return mp_dnnl_bind(e, data, roles, args) && mp_dnnl_execute(e, args, 3, scratch) &&
           dnnl_stream_wait(mp_dnnl_stream()) == dnnl_success;
}

void mp_cpu_dnnl_info(FILE *out)
{
    const dnnl_version_t *v = dnnl_version();
    const char *gemm = mp_cpu_dnnl_gemm_takes(MP_BF16) ? "bf16 GEMMs"
                       : mp_gemm_env_off   ? "not bf16 GEMMs (MPDIST_CPU_GEMM=openblas)"
                       : !mp_dnnl_engine() ? "not bf16 GEMMs (no oneDNN CPU engine)"
                                           : "not bf16 GEMMs (no AVX512-BF16 in use here)";
    fprintf(out, "onednn: %d.%d.%d (convolutions; %s)\n", v->major, v->minor, v->patch, gemm);
}

#else

bool mp_cpu_dnnl_gemm_takes(mp_dtype dt)
{
    (void)dt;
    return false;
}

bool mp_cpu_dnnl_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, mp_dtype dt,
                      const void *a, const void *b, mp_dtype cdt, void *c)
{
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)dt, (void)a, (void)b, (void)cdt;
    (void)c;
    return false;
}

void mp_cpu_dnnl_info(FILE *out)
{
    fprintf(out, "onednn: not built in (convolutions as im2col, GEMMs on OpenBLAS)\n");
}

#endif
