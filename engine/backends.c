/* Backend choice (amp.device) and backend facts for `mpdist info`. The CUDA backend comes from
 * backend_cuda/ when the binary is built with it. */
#include "engine/backends.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend_cpu/gemm_dnnl.h"
#include "engine/env_choice.h"

#ifdef MPDIST_HAVE_CUDA
#include "engine/backend_cuda/api.h"
#include "engine/backend_cuda/info.h"
#endif

int mp_backend_cuda_devices(void)
{
#ifdef MPDIST_HAVE_CUDA
    return mp_cuda_device_count();
#else
    return 0;
#endif
}

/* Opens the CUDA backend, or says in `why` why it cannot be used. */
static mp_status open_cuda(const mp_backend_options *o, const mp_ops **ops, char *why,
                           size_t cap)
{
#ifdef MPDIST_HAVE_CUDA
    int n = mp_cuda_device_count();
    if (n <= 0) {
        snprintf(why, cap, "no CUDA device is visible to this process");
        return MP_EUSAGE;
    }
    if (o->device < 0 || o->device >= n) {
        snprintf(why, cap, "CUDA device %d does not exist (%d visible)", o->device, n);
        return MP_EUSAGE;
    }
    mp_status st = mp_cuda_open(o);
    if (st != MP_OK) {
        snprintf(why, cap, "%s", mp_error_message());
        return st;
    }
    *ops = mp_backend_cuda();
    snprintf(why, cap, "cuda: device %d of %d", o->device, n);
    return MP_OK;
#else
    (void)o;
    (void)ops;
    snprintf(why, cap, "this binary was built without CUDA");
    return MP_EUSAGE;
#endif
}

mp_status mp_backend_open(const char *device, const mp_backend_options *o, const mp_ops **ops,
                          char *why, size_t cap)
{
    if (strcmp(device, "cpu") == 0) {
        bool staged = mp_env_choice(MP_ENV_CPU_STAGED) == 1; /* "1" */
        *ops = staged ? mp_backend_cpu_staged() : mp_backend_cpu();
        snprintf(why, cap, "cpu: amp.device is \"cpu\"");
        return MP_OK;
    }
    char reason[256];
    mp_status st = open_cuda(o, ops, reason, sizeof reason);
    if (st == MP_OK || strcmp(device, "cuda") == 0) {
        snprintf(why, cap, "%s", reason);
        return st == MP_OK ? MP_OK : mp_fail(st, "amp.device \"cuda\": %s", reason);
    }
    mp_error_clear();
    char cpu[64];
    MP_TRY(mp_backend_open("cpu", o, ops, cpu, sizeof cpu));
    snprintf(why, cap, "cpu: amp.device is \"auto\" and %s", reason);
    return MP_OK;
}

/* Whether OpenBLAS runs its generic SSE3 kernels (the core type it falls back to for a CPU it
 * does not know, as 0.3.21 does for Sapphire Rapids) on an x86 CPU with AVX2. */
static bool generic_blas_on_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return strcmp(openblas_get_corename(), "Prescott") == 0 && __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

void mp_backends_conv_plans(FILE *out)
{
#ifdef MPDIST_HAVE_CUDA
    mp_cuda_conv_plans(out);
#else
    (void)out;
#endif
}

void mp_backends_info(FILE *out)
{
#ifdef MPDIST_HAVE_CUDA
    fprintf(out, "backends: cpu cuda\n");
#else
    fprintf(out, "backends: cpu (built without CUDA)\n");
#endif
    fprintf(out, "blas: %s\n", openblas_get_config());
    if (generic_blas_on_avx2())
        fprintf(out, "blas: OpenBLAS did not recognise this CPU and runs its generic SSE3 "
                     "(Prescott) kernels; OPENBLAS_CORETYPE=Haswell (AVX2) or SkylakeX (AVX-512) "
                     "in the environment picks faster ones\n");
    mp_cpu_dnnl_info(out);
#ifdef MPDIST_HAVE_CUDA
    mp_cuda_info(out);
#endif
}
