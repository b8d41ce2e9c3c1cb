/* comm/launch_check: the launcher's environment against MPI's view, for every way a launch goes
 * wrong (srun without PMIx, another MPI's launcher, a bare process inside a Slurm job script,
 * a rank the launcher and MPI disagree on) and the ways it goes right (mpirun, mpirun inside an
 * allocation, srun --mpi=pmix, no launcher outside Slurm), and which process prints a launch's
 * shared error. */
#include "tests/util/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "comm/launch_check.h"

static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_STEP_ID",
                             "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID",
                             "SLURM_JOB_ID", "SLURM_NTASKS", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"};

/* Clears every launcher variable, then sets the NULL-terminated name/value pairs. */
static void env(const char *name, ...)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    va_list ap;
    va_start(ap, name);
    for (const char *n = name; n; n = va_arg(ap, const char *))
        setenv(n, va_arg(ap, const char *), 1);
    va_end(ap);
}

/* The status of both checks for MPI's (size, rank, local rank); *warn gets the warning. */
static mp_status check(int size, int rank, int local, char *warn)
{
    mp_launch_env e;
    mp_launch_env_read(&e);
    mp_status st = mp_launch_precheck(&e);
    return st != MP_OK ? st : mp_launch_check(&e, size, rank, local, warn, 256);
}

static void expect_error(int size, int rank, const char *text)
{
    char warn[256];
    assert_int_equal(check(size, rank, 0, warn), MP_EUSAGE);
    if (!strstr(mp_error_message(), text))
        fail_msg("message \"%s\" lacks \"%s\"", mp_error_message(), text);
}

static void expect_ok(int size, int rank, int local, const char *warning)
{
    char warn[256];
    assert_int_equal(check(size, rank, local, warn), MP_OK);
    if (warning ? !strstr(warn, warning) : warn[0] != '\0')
        fail_msg("warning \"%s\", expected \"%s\"", warn, warning ? warning : "");
}

static void test_mpirun(void **state)
{
    (void)state;
    env("OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_LOCAL_RANK",
        "2", NULL);
    expect_ok(4, 2, 2, NULL);
    expect_ok(4, 2, 0, "mpirun says local rank 2, MPI's shared-memory split says 0");
    expect_error(1, 0, "mpirun started 4 processes (OMPI_COMM_WORLD_SIZE=4) but MPI sees 1 rank");
    expect_error(4, 1, "mpirun says this is rank 2 (OMPI_COMM_WORLD_RANK) but MPI says rank 1");
    /* Inside an allocation Slurm's variables are those of mpirun's daemons: mpirun's win. */
    env("OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "3", "SLURM_JOB_ID", "7",
        "SLURM_NTASKS", "4", "SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_PROCID",
        "0", NULL);
    expect_ok(4, 3, 0, NULL);
}

static void test_srun(void **state)
{
    (void)state;
    env("SLURM_JOB_ID", "7", "SLURM_NTASKS", "4", "SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS",
        "4", "SLURM_PROCID", "3", "SLURM_LOCALID", "3", "PMIX_RANK", "3", NULL);
    expect_ok(4, 3, 3, NULL);
    expect_error(1, 0, "srun started 4 processes (SLURM_STEP_NUM_TASKS=4) but MPI sees 1 rank");
    unsetenv("PMIX_RANK"); /* srun --mpi=none or pmi2 */
    expect_error(4, 3, "srun started 4 tasks without PMIx");
    expect_error(4, 3, "use srun --mpi=pmix");
    env("SLURM_JOB_ID", "7", "SLURM_NTASKS", "1", "SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS",
        "1", "SLURM_PROCID", "0", NULL); /* one task needs no wiring */
    expect_ok(1, 0, 0, NULL);
}

static void test_bare_in_job(void **state)
{
    (void)state;
    env("SLURM_JOB_ID", "17", "SLURM_NTASKS", "4", "SLURM_PROCID", "0", "SLURM_LOCALID", "0",
        NULL);
    expect_error(1, 0, "started without a launcher inside Slurm job 17, which has 4 tasks");
    env("SLURM_JOB_ID", "17", "SLURM_NTASKS", "1", NULL);
    expect_ok(1, 0, 0, NULL);
    env(NULL); /* no launcher, no Slurm: a one-rank run */
    expect_ok(1, 0, 0, NULL);
}

static void test_other_launcher(void **state)
{
    (void)state;
    env("PMI_SIZE", "2", "PMI_RANK", "1", NULL);
    expect_error(1, 0, "a PMI launcher started 2 processes (PMI_SIZE=2) but MPI sees 1 rank");
    expect_ok(2, 1, 0, NULL);
    env(NULL);
}

/* Whether the process prints a launch's shared error: rank 0 or no launcher, or a rank no
 * launch gives (no rank 0 may be there to print); not another launch's rank. */
static bool reports(void)
{
    mp_launch_env e;
    mp_launch_env_read(&e);
    return mp_launch_env_reports(&e);
}

static void test_who_reports(void **state)
{
    (void)state;
    env(NULL);
    assert_true(reports());
    env("OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "0", NULL);
    assert_true(reports());
    env("OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "3", NULL);
    assert_false(reports());
    env("SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_PROCID", "3", NULL);
    assert_true(reports());
    env("PMI_SIZE", "2", "PMI_RANK", "2", NULL);
    assert_true(reports());
    env(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpirun),
        cmocka_unit_test(test_srun),
        cmocka_unit_test(test_bare_in_job),
        cmocka_unit_test(test_other_launcher),
        cmocka_unit_test(test_who_reports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
