/* The launcher cross-checks; see launch_check.h. */
#include "comm/launch_check.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* The integer in variable `name`, or -1 when it is unset or empty. */
static long env_long(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : -1;
}

void mp_launch_env_read(mp_launch_env *e)
{
    memset(e, 0, sizeof *e);
    e->size = e->rank = e->local_rank = -1;
    e->job = env_long("SLURM_JOB_ID");
    e->job_tasks = (int)env_long("SLURM_NTASKS");
    e->step_pmix = getenv("PMIX_RANK") != NULL;
    if (env_long("OMPI_COMM_WORLD_SIZE") > 0) {
        e->launcher = "mpirun";
        e->size_var = "OMPI_COMM_WORLD_SIZE";
        e->rank_var = "OMPI_COMM_WORLD_RANK";
        e->local_rank = (int)env_long("OMPI_COMM_WORLD_LOCAL_RANK");
    } else if (env_long("SLURM_STEP_ID") >= 0 && env_long("SLURM_STEP_NUM_TASKS") > 0) {
        e->launcher = "srun";
        e->size_var = "SLURM_STEP_NUM_TASKS";
        e->rank_var = "SLURM_PROCID";
        e->local_rank = (int)env_long("SLURM_LOCALID");
    } else if (env_long("PMI_SIZE") > 0) {
        e->launcher = "a PMI launcher";
        e->size_var = "PMI_SIZE";
        e->rank_var = "PMI_RANK";
    }
    if (e->launcher) {
        e->size = (int)env_long(e->size_var);
        e->rank = (int)env_long(e->rank_var);
    }
}

bool mp_launch_env_reports(const mp_launch_env *e)
{
    return e->rank <= 0 || (e->size > 0 && e->rank >= e->size);
}

mp_status mp_launch_precheck(const mp_launch_env *e)
{
    if (e->launcher && strcmp(e->launcher, "srun") == 0 && e->size > 1 && !e->step_pmix)
        return mp_fail(MP_EUSAGE,
                       "srun started %d tasks without PMIx, so MPI cannot join them and each "
                       "would train alone as rank 0: use srun --mpi=pmix (srun --mpi=list shows "
                       "the plugins) or launch/mpdist-run",
                       e->size);
    return MP_OK;
}

mp_status mp_launch_check(const mp_launch_env *e, int size, int rank, int local_rank,
                          char *warning, size_t cap)
{
    warning[0] = '\0';
    if (e->launcher && e->size != size)
        return mp_fail(MP_EUSAGE,
                       "%s started %d processes (%s=%d) but MPI sees %d rank%s: each process "
                       "runs its own MPI job as rank 0. Start mpdist with the mpirun of the Open "
                       "MPI it was built with, or srun --mpi=pmix (launch/mpdist-run picks)",
                       e->launcher, e->size, e->size_var, e->size, size, size == 1 ? "" : "s");
    if (e->launcher && e->rank >= 0 && e->rank != rank)
        return mp_fail(MP_EUSAGE,
                       "%s says this is rank %d (%s) but MPI says rank %d of %d: the launcher "
                       "and MPI disagree; start mpdist with mpirun or srun --mpi=pmix",
                       e->launcher, e->rank, e->rank_var, rank, size);
    if (!e->launcher && size == 1 && e->job >= 0 && e->job_tasks > 1)
        return mp_fail(MP_EUSAGE,
                       "started without a launcher inside Slurm job %ld, which has %d tasks: "
                       "mpdist would train alone as rank 0 of 1. Start it with srun --mpi=pmix "
                       "(or launch/mpdist-run), or submit the job with --ntasks=1",
                       e->job, e->job_tasks);
    if (e->local_rank >= 0 && e->local_rank != local_rank)
        snprintf(warning, cap,
                 "%s says local rank %d, MPI's shared-memory split says %d; using MPI's",
                 e->launcher, e->local_rank, local_rank);
    return MP_OK;
}

void mp_launch_bind_lifetime(const mp_launch_env *e)
{
#ifdef __linux__
    if (e->launcher)
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#else
    (void)e;
#endif
}
