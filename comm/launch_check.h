/* Does the MPI job match what the launcher started? The classic launch errors leave every
 * process alone in its own one-rank MPI job, each training as rank 0: srun without an MPI plugin
 * this Open MPI speaks (--mpi=pmix), another MPI's launcher, or a binary run bare inside a Slurm
 * job script. The launcher's view comes from its environment: Open MPI's mpirun sets
 * OMPI_COMM_WORLD_*, srun sets SLURM_STEP_* and SLURM_PROCID/LOCALID in each task, other
 * launchers PMI_SIZE/PMI_RANK; a Slurm job script has SLURM_JOB_ID and SLURM_NTASKS but no step.
 * mpirun's variables win over Slurm's (under mpirun in an allocation, Slurm's are those of the
 * daemons mpirun started). */
#ifndef MP_LAUNCH_CHECK_H
#define MP_LAUNCH_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/status.h"

typedef struct mp_launch_env {
    const char *launcher;            /* "mpirun", "srun", "a PMI launcher" or NULL (none) */
    const char *size_var, *rank_var; /* the variables that said size and rank */
    int size, rank, local_rank;      /* what the launcher says; -1 when it says nothing */
    int step_pmix;                   /* an srun task with PMIx wired up (PMIX_RANK set) */
    long job;                        /* SLURM_JOB_ID, or -1 outside Slurm */
    int job_tasks;                   /* SLURM_NTASKS of that job, or -1 */
} mp_launch_env;

/* Fills *e from this process's environment. */
void mp_launch_env_read(mp_launch_env *e);

/* Whether this process prints an error that every process of the launch meets alike (a bad
 * command line, a launch that MPI did not wire up), so that it appears once: the launcher's
 * rank 0, a process without a launcher, and one whose launcher gives it a rank outside [0,
 * size) (its environment is not a launch's, and no rank 0 may exist to print). */
bool mp_launch_env_reports(const mp_launch_env *e);

/* Before MPI starts: MP_EUSAGE with a one-line message when srun started several tasks that
 * MPI could not wire up (no PMIx: srun --mpi=none or pmi2 with Debian's Open MPI), else MP_OK. */
mp_status mp_launch_precheck(const mp_launch_env *e);

/* After MPI started with `size` ranks, this one `rank`: MP_EUSAGE with a one-line message when
 * the launcher started another number of processes or gave this one another rank, or when a
 * bare process runs as 1 rank inside a Slurm job of several tasks. When only the local rank
 * disagrees with MPI's shared-memory split (`local_rank`), MP_OK, with a warning written to
 * warning[0..cap) (else warning[0] = '\0'). */
mp_status mp_launch_check(const mp_launch_env *e, int size, int rank, int local_rank,
                          char *warning, size_t cap);

/* Under a launcher (e->launcher set): asks the kernel to SIGKILL this process when the parent
 * that started it (mpirun, orted or slurmstepd) ends, so that no rank outlives its job, also one
 * that is stopped (SIGSTOP) when the launcher goes (the kernel's hang-up of an orphaned process
 * group does not come when the rank's new parent is a subreaper in the same session). Without a
 * launcher nothing changes (`nohup mpdist ... &` from a shell keeps running). Linux only. */
void mp_launch_bind_lifetime(const mp_launch_env *e);

#endif
