/* Where bench-comm's buffers live (see bench_comm.h): host memory, or the memory of the backend
 * --device names, with the device transport the communicator takes for it and, on NCCL, the bare
 * communicator the raw rows call. */
#include "src/bench_comm.h"

#include <stdio.h>

#include "comm/device_bind.h"
#include "engine/alloc.h"
#include "engine/backends.h"

mp_status mp_bench_comm_open(const mp_comm *c, const mp_bench_comm_opts *o, mp_bench_mem *m)
{
    *m = (mp_bench_mem){.device = -1};
    size_t bytes = (size_t)o->max_bytes;
    if (!o->device) {
        m->buf = m->host = mp_alloc(bytes, MP_MEM_WORKSPACE);
        return MP_OK;
    }
    int dev = mp_device_for_local_rank(c->local_rank, mp_backend_cuda_devices());
    mp_backend_options bo = {.device = dev > 0 ? dev : 0};
    char why[320];
    if (mp_backend_open(o->device, &bo, &m->ops, why, sizeof why) != MP_OK)
        return mp_fail(MP_EUSAGE, "bench-comm --device %s: %s", o->device, why);
    m->device = m->ops->queue() ? bo.device : -1;
    if (m->device >= 0)
        snprintf(m->where, sizeof m->where, "%s memory (GPU %d)", m->ops->name, m->device);
    else
        snprintf(m->where, sizeof m->where, "%s memory%s", m->ops->name,
                 m->ops->host_memory ? "" : " (device-like host memory)");
    m->buf = m->ops->mem_alloc(bytes, MP_MEM_WORKSPACE);
    m->host = m->ops->host_memory ? m->buf : m->ops->host_alloc(bytes, MP_MEM_WORKSPACE);
    if (!m->buf || !m->host)
        return mp_fail(MP_EDATA, "bench-comm: [rank %d @ %s] -e %lld: out of %s memory for the "
                                 "buffer and its host copy", c->rank, c->host,
                       (long long)bytes, m->ops->name);
    return MP_OK;
}

mp_status mp_bench_comm_choose(mp_comm *c, const mp_bench_comm_opts *o, mp_bench_mem *m)
{
    c->timeout_s = o->timeout_s;
    if (!m->ops || m->device < 0) /* no GPU: no NCCL */
        return MP_OK;
    mp_gpu_id *ids = mp_alloc((size_t)c->size * sizeof *ids, MP_MEM_WORKSPACE);
    mp_status st = mp_comm_gather_gpus(c, m->device, ids);
    int use_nccl = 0;
    char why[256] = "";
    if (st == MP_OK)
        st = mp_comm_choose("nccl", true, mp_comm_nccl_built(), o->share_gpu, c->size, ids,
                            &use_nccl, why, sizeof why);
    if (st != MP_OK)
        st = mp_fail(st, "bench-comm --device cuda: %s", mp_error_message());
    m->nccl = use_nccl || c->size == 1; /* one rank: NCCL still times the device's path */
    if (st == MP_OK) /* before the process's first NCCL call */
        st = mp_comm_share_gpu_env(c->rank, c->size, ids, NULL);
    mp_free(ids);
    return st;
}

mp_status mp_bench_comm_connect(mp_comm *c, mp_bench_mem *m)
{
    if (!m->ops || m->ops->host_memory) /* host memory: the host transport */
        return MP_OK;
    MP_TRY(mp_comm_use_device(c, m->device, m->nccl ? m->ops->queue() : NULL));
    m->connected = true;
    return m->nccl ? mp_nccl_raw_open(&m->raw, &c->peers, m->device) : MP_OK;
}

void mp_bench_comm_close(mp_comm *c, mp_bench_mem *m)
{
    mp_nccl_raw_close(m->raw);
    if (m->connected)
        mp_comm_drop_device(c);
    if (!m->ops) {
        mp_free(m->buf);
    } else {
        if (m->host != m->buf)
            m->ops->host_free(m->host);
        m->ops->mem_free(m->buf);
    }
    *m = (mp_bench_mem){.device = -1};
}
