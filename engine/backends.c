/* Backend facts for `mpdist info`. The CUDA facts come from backend_cuda/ when it is built. */
#include "engine/backends.h"

#include <cblas.h>

#ifdef MPDIST_HAVE_CUDA
#include "engine/backend_cuda/info.h"
#endif

void mp_backends_info(FILE *out)
{
#ifdef MPDIST_HAVE_CUDA
    fprintf(out, "backends: cpu (CUDA libraries linked; the CUDA backend is not built yet)\n");
#else
    fprintf(out, "backends: cpu (built without CUDA)\n");
#endif
    fprintf(out, "blas: %s\n", openblas_get_config());
#ifdef MPDIST_HAVE_CUDA
    mp_cuda_info(out);
#endif
}
