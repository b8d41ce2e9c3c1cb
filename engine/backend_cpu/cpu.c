/* The CPU backend's op table. */
#include <cblas.h>
#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "engine/backend_cpu/cpu.h"

static const mp_ops mp_cpu_ops = {
    .name = "cpu",
    .host_memory = true,
#define MP_OP(ret, op, params) .op = mp_cpu_##op,
#include "engine/op_list.h"
};

const mp_ops *mp_backend_cpu(void) { return &mp_cpu_ops; }

static mp_ops mp_cpu_staged_ops;

static void make_staged(void)
{
    mp_cpu_staged_ops = mp_cpu_ops;
    mp_cpu_staged_ops.name = "cpu-staged";
    mp_cpu_staged_ops.host_memory = false;
    mp_cpu_graph_staged(&mp_cpu_staged_ops);
}

const mp_ops *mp_backend_cpu_staged(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_staged);
    return &mp_cpu_staged_ops;
}

void mp_backend_cpu_threads(int n)
{
    openblas_set_num_threads(n);
#ifdef _OPENMP
    omp_set_num_threads(n); /* our parallel loops' and oneDNN's threads */
#endif
}
