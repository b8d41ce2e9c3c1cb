/* MPI start-up, ranks and hosts (and the peers the transports are given), and the collectives
 * over the transport. Errors are returned
 * (MPI_ERRORS_RETURN on our duplicates) and become MP_ECOMM with the check macro's message.
 * Waiting (and the watchdog) is in comm/watchdog.c. */
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/halfsum.h"
#include "comm/launch_check.h"
#include "comm/transport_mpi.h"

/* The peers' abort: the communicator's (mp_comm_abort). */
static void abort_owner(void *owner, int code)
{
    mp_comm_abort(owner, code);
}

static mp_status gather_hosts(mp_comm *c)
{
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    snprintf(c->host, sizeof c->host, "%s", name);
    c->hosts = calloc((size_t)c->size, sizeof *c->hosts);
    if (!c->hosts)
        return mp_fail(MP_EINTERNAL, "comm: out of host memory for %d host names", c->size);
    char mine[MP_HOST_MAX] = {0};
    memcpy(mine, c->host, strnlen(c->host, MP_HOST_MAX - 1)); /* longer names are cut */
    MPI_CHECK(MPI_Allgather(mine, MP_HOST_MAX, MPI_CHAR, c->hosts, MP_HOST_MAX, MPI_CHAR,
                            c->world));
    return MP_OK;
}

mp_status mp_comm_init_on(mp_comm *c, MPI_Comm base)
{
    memset(c, 0, sizeof *c);
    c->world = c->watch = c->dworld = MPI_COMM_NULL;
    c->half_word = MPI_DATATYPE_NULL;
    c->sum_f16 = c->sum_bf16 = MPI_OP_NULL;
    c->timeout_s = MP_COMM_DEFAULT_TIMEOUT_S;
    c->step = -1;
    c->report = true;
    MPI_CHECK(MPI_Query_thread(&c->thread_level));
    MPI_CHECK(MPI_Comm_dup(base, &c->world));
    MPI_CHECK(MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_dup(c->world, &c->watch));
    MPI_CHECK(MPI_Comm_rank(c->world, &c->rank));
    MPI_CHECK(MPI_Comm_size(c->world, &c->size));
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &c->local_rank));
    MPI_CHECK(MPI_Comm_size(node, &c->local_size));
    MPI_CHECK(MPI_Comm_free(&node));
    MP_TRY(gather_hosts(c));
    MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &c->half_word));
    MPI_CHECK(MPI_Type_commit(&c->half_word));
    MPI_CHECK(MPI_Op_create(mp_halfsum_f16, 1, &c->sum_f16));
    MPI_CHECK(MPI_Op_create(mp_halfsum_bf16, 1, &c->sum_bf16));
    c->peers = (mp_peers){.world = c->world, .rank = c->rank, .size = c->size,
                          .thread_level = c->thread_level,
                          .hosts = (const char(*)[MP_HOST_MAX])c->hosts,
                          .half_word = c->half_word, .sum_f16 = c->sum_f16,
                          .sum_bf16 = c->sum_bf16, .timeout_s = &c->timeout_s,
                          .step = &c->step, .abort = abort_owner, .owner = c};
    return mp_transport_mpi_open(&c->tx, &c->peers, c->world);
}

mp_status mp_comm_init(mp_comm *c, int *argc, char ***argv)
{
    int inited = 0, provided = 0;
    mp_launch_env env;
    mp_launch_env_read(&env);
    c->report = mp_launch_env_reports(&env);
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited) {
        MP_TRY(mp_launch_precheck(&env));
        MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    }
    MP_TRY(mp_comm_init_on(c, MPI_COMM_WORLD));
    c->owns_mpi = !inited;
    mp_identity_set(c->rank, c->host);
    char warning[256];
    mp_status st = mp_launch_check(&env, c->size, c->rank, c->local_rank, warning, sizeof warning);
    if (st != MP_OK) {
        mp_comm_finalize(c);
        c->report = mp_launch_env_reports(&env);
        return st;
    }
    if (warning[0])
        fprintf(stderr, "mpdist: warning: [rank %d @ %s] %s (%d ranks on this host)\n", c->rank,
                c->host, warning, c->local_size);
    return MP_OK;
}

const char *mp_comm_host(const mp_comm *c, int rank)
{
    return c->hosts && rank >= 0 && rank < c->size ? c->hosts[rank] : "?";
}

mp_status mp_comm_allreduce_start(mp_comm *c, void *buf, size_t n, mp_dtype dt, mp_redop op,
                                  const char *what, uint64_t *ticket)
{
    mp_coll coll = mp_coll_of(MP_COLL_ALLREDUCE, buf, n, dt, op, what);
    return mp_comm_coll_start(c, NULL, &coll, ticket);
}

mp_status mp_comm_allreduce(mp_comm *c, void *buf, size_t n, mp_dtype dt, mp_redop op,
                            const char *what)
{
    uint64_t ticket;
    MP_TRY(mp_comm_allreduce_start(c, buf, n, dt, op, what, &ticket));
    return mp_comm_wait(c, ticket);
}

mp_status mp_comm_bcast(mp_comm *c, void *buf, size_t bytes, int root, const char *what)
{
    mp_coll coll = mp_coll_of(MP_COLL_BCAST, buf, bytes, MP_F32, MP_REDOP_SUM, what);
    coll.root = root;
    uint64_t ticket;
    MP_TRY(mp_comm_coll_start(c, NULL, &coll, &ticket));
    return mp_comm_wait(c, ticket);
}

mp_status mp_comm_agree(mp_comm *c, mp_status local, int *reporter)
{
    *reporter = local != MP_OK ? c->rank : -1;
    /* One MAX over (code, -rank of a rank with that code): the worst code, then the lowest
     * rank among those that have it, in a second pass only when something failed. A stop
     * (MP_ESTOPPED) counts as 0.5, below every error: a rank's error is said, not hidden. */
    double worst = local == MP_ESTOPPED ? 0.5 : (double)local, own = worst;
    mp_status st = mp_comm_allreduce(c, &worst, 1, MP_F64, MP_REDOP_MAX, "status agreement");
    if (st != MP_OK)
        return MP_ECOMM;
    if (worst == (double)MP_OK)
        return MP_OK;
    double mine = own == worst ? -(double)c->rank : -(double)c->size;
    st = mp_comm_allreduce(c, &mine, 1, MP_F64, MP_REDOP_MAX, "status agreement");
    if (st != MP_OK)
        return MP_ECOMM;
    *reporter = (int)-mine;
    return worst == 0.5 ? MP_ESTOPPED : (mp_status)(int)worst;
}

void mp_comm_abort(const mp_comm *c, int code)
{
    if (c && c->dtx.ops && c->dtx.ops->abort)
        c->dtx.ops->abort(c->dtx.self);
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(c && c->world != MPI_COMM_NULL ? c->world : MPI_COMM_WORLD, code);
}

void mp_comm_free(mp_comm *c)
{
    int fin = 0;
    MPI_Finalized(&fin);
    mp_comm_drop_device(c); /* NCCL's close is bounded (aborts after timeout_s); MPI's waits */
    if (c->tx.ops && !c->broken) { /* a broken one's worker may be stuck inside MPI */
        c->tx.ops->close(c->tx.self);
        c->tx.ops = NULL;
        mp_comm_stage_free(c); /* after close: no collective works on the blocks any more */
    }
    if (!fin) {
        if (c->sum_f16 != MPI_OP_NULL)
            MPI_Op_free(&c->sum_f16);
        if (c->sum_bf16 != MPI_OP_NULL)
            MPI_Op_free(&c->sum_bf16);
        if (c->half_word != MPI_DATATYPE_NULL)
            MPI_Type_free(&c->half_word);
        if (c->watch != MPI_COMM_NULL)
            MPI_Comm_free(&c->watch);
        if (c->world != MPI_COMM_NULL)
            MPI_Comm_free(&c->world);
    }
    c->world = c->watch = MPI_COMM_NULL;
    free(c->hosts);
    c->hosts = NULL;
}

void mp_comm_finalize(mp_comm *c)
{
    bool owns = c->owns_mpi;
    mp_comm_free(c);
    int fin = 0;
    MPI_Finalized(&fin);
    if (owns && !fin)
        MPI_Finalize();
}
