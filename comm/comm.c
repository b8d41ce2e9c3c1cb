/* MPI start-up and the foundation's collectives. Errors are returned (MPI_ERRORS_RETURN on our
 * duplicate communicator) and turned into MP_ECOMM with the check macro's message. */
#include "comm/comm.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt);
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt);

const char *mp_mpi_error_string(int rc)
{
    static _Thread_local char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return msg;
}

mp_status mp_comm_init(mp_comm *c, int *argc, char ***argv)
{
    memset(c, 0, sizeof *c);
    int inited = 0;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited)
        MPI_CHECK(MPI_Init(argc, argv));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c->world));
    MPI_CHECK(MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(c->world, &c->rank));
    MPI_CHECK(MPI_Comm_size(c->world, &c->size));
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &c->local_rank));
    MPI_CHECK(MPI_Comm_size(node, &c->local_size));
    MPI_CHECK(MPI_Comm_free(&node));
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    snprintf(c->host, sizeof c->host, "%s", name);
    mp_identity_set(c->rank, c->host);
    MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &c->half_word));
    MPI_CHECK(MPI_Type_commit(&c->half_word));
    MPI_CHECK(MPI_Op_create(sum_f16, 1, &c->sum_f16));
    MPI_CHECK(MPI_Op_create(sum_bf16, 1, &c->sum_bf16));
    return MP_OK;
}

mp_status mp_comm_bcast(const mp_comm *c, void *buf, size_t bytes, int root)
{
    char *p = buf;
    while (bytes > 0) {
        int chunk = bytes > (size_t)INT_MAX ? INT_MAX : (int)bytes;
        MPI_CHECK(MPI_Bcast(p, chunk, MPI_BYTE, root, c->world));
        p += chunk;
        bytes -= (size_t)chunk;
    }
    return MP_OK;
}

mp_status mp_comm_allreduce_sum_f32(const mp_comm *c, float *buf, size_t n)
{
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, chunk, MPI_FLOAT, MPI_SUM, c->world));
        buf += chunk;
        n -= (size_t)chunk;
    }
    return MP_OK;
}

/* MPI reduction callbacks for half types: element-wise sum in FP32, rounded once. */
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    uint16_t *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = mp_f32_to_f16(mp_f16_to_f32(a[i]) + mp_f16_to_f32(b[i]));
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    uint16_t *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = mp_f32_to_bf16(mp_bf16_to_f32(a[i]) + mp_bf16_to_f32(b[i]));
}

static mp_status allreduce_half(const mp_comm *c, uint16_t *buf, size_t n, mp_dtype dt)
{
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, chunk, c->half_word,
                                dt == MP_F16 ? c->sum_f16 : c->sum_bf16, c->world));
        buf += chunk;
        n -= (size_t)chunk;
    }
    return MP_OK;
}

mp_status mp_comm_allreduce_sum(const mp_comm *c, void *buf, size_t n, mp_dtype dt)
{
    switch (dt) {
    case MP_F32: return mp_comm_allreduce_sum_f32(c, buf, n);
    case MP_F16:
    case MP_BF16: return allreduce_half(c, buf, n, dt);
    case MP_F64:
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, c->world));
        return MP_OK;
    }
    return mp_fail(MP_EINTERNAL, "allreduce: unknown dtype");
}

mp_status mp_comm_any(const mp_comm *c, bool *flag)
{
    int v = *flag ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, c->world));
    *flag = v != 0;
    return MP_OK;
}

mp_status mp_comm_allreduce_sum_f64(const mp_comm *c, double *buf, int n)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, c->world));
    return MP_OK;
}

mp_status mp_comm_agree(const mp_comm *c, mp_status local, int *reporter)
{
    *reporter = local != MP_OK ? c->rank : -1;
    int worst = (int)local, first;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, c->world));
    if (worst == MP_OK)
        return MP_OK;
    int mine = (int)local == worst ? c->rank : c->size;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->world));
    *reporter = first;
    return (mp_status)worst;
}

void mp_comm_abort(const mp_comm *c, int code)
{
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(c && c->world != MPI_COMM_NULL ? c->world : MPI_COMM_WORLD, code);
}

void mp_comm_finalize(mp_comm *c)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin)
        return;
    if (c->world != MPI_COMM_NULL && c->world != 0) {
        MPI_Op_free(&c->sum_f16);
        MPI_Op_free(&c->sum_bf16);
        MPI_Type_free(&c->half_word);
        MPI_Comm_free(&c->world);
    }
    MPI_Finalize();
}
