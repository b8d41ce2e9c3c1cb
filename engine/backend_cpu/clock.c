/* The CPU backend's clock marks (ops->mark_record, mark_elapsed): nothing is queued, so the work
 * queued before a mark has finished when it is recorded, and a mark holds the host clock then. */
#include <stdlib.h>

#include "engine/backend_cpu/cpu.h"
#include "engine/clock.h"

mp_status mp_cpu_mark_record(void **mark)
{
    if (!*mark && !(*mark = malloc(sizeof(double))))
        return mp_fail(MP_EINTERNAL, "cpu: out of host memory for a clock mark");
    *(double *)*mark = mp_now();
    return MP_OK;
}

mp_status mp_cpu_mark_elapsed(void *from, void *to, double *ms)
{
    if (!from || !to)
        return mp_fail(MP_EINTERNAL, "cpu: mark_elapsed on a mark never recorded");
    mp_cpu_count_fence_wait();
    *ms = 1e3 * (*(const double *)to - *(const double *)from);
    return MP_OK;
}

void mp_cpu_mark_free(void *mark) { free(mark); }
