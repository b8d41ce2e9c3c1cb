/* mpdist's entry point: parses the command line, and for training starts MPI, loads and agrees
 * on the configuration and the data, then runs. The only place that decides to exit: every
 * failure prints one line on the rank that saw it first and exits with the DESIGN §6 code; a
 * failure in the middle of training aborts all ranks so none hangs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "src/bench_comm.h"
#include "src/cli.h"
#include "src/config.h"
#include "src/info.h"
#include "src/train.h"

static int report(mp_status st)
{
    char line[1024];
    snprintf(line, sizeof line, "%s", mp_error_message());
    for (char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = '?'; /* one line, whatever a path or value held */
    fprintf(stderr, "mpdist: error: %s\n", line);
    fflush(stderr);
    return (int)st;
}

/* Before MPI starts every rank sees the same command line: only the launcher's rank 0 (or a
 * process started without a launcher) prints the error, so it appears once. */
static int report_once(mp_status st)
{
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) != 0)
            return (int)st;
    }
    return report(st);
}

/* Agrees on `st` over all ranks; on failure the lowest failed rank prints its message, every
 * rank finalises MPI, and the agreed code is returned (0 when all succeeded). */
static int agree(mp_comm *comm, mp_status st)
{
    int reporter = -1;
    mp_status all = mp_comm_agree(comm, st, &reporter);
    if (all == MP_OK)
        return 0;
    if (comm->rank == reporter)
        report(st);
    else if (reporter < 0) /* the agreement itself failed: say why here */
        report(all);
    return (int)all;
}

/* A collective run failed midway: the rank the watchdog picked (any rank for other failures)
 * prints, and every rank is ended so none hangs. Returns the exit code. */
static int fail_midway(mp_comm *comm, mp_status st)
{
    if (comm->report)
        report(st);
    if (comm->size > 1)
        mp_comm_abort(comm, (int)st);
    return (int)st;
}

static void print_banner(const mp_trainer *t, const mp_config *c)
{
    printf("mpdist %s: %d rank%s, backend %s, opt level %s, model %s (%lld parameters), "
           "%lld steps (%lld per epoch), global batch %lld\n",
           MPDIST_VERSION, t->comm->size, t->comm->size > 1 ? "s" : "", t->ops->name,
           c->amp.opt_level, c->model.preset, (long long)mp_params_numel(&t->model.params),
           (long long)t->total_steps, (long long)t->steps_per_epoch,
           (long long)(c->data.batch_size * t->comm->size));
    mp_amp_print(&t->amp, stdout);
    fflush(stdout);
}

static int train(const mp_cli *cli, int *argc, char ***argv)
{
    if (cli->resume)
        return report_once(mp_fail(MP_EUSAGE, "--resume is not available in this build yet"));
    mp_comm comm;
    mp_status st = mp_comm_init(&comm, argc, argv);
    if (st != MP_OK)
        return report(st);
    mp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int rc = agree(&comm, mp_config_load(&cfg, cli->config, cli->sets, cli->nsets));
    mp_trainer t;
    memset(&t, 0, sizeof t);
    if (rc == 0)
        rc = agree(&comm, mp_train_setup(&t, &cfg, &comm));
    if (rc == 0)
        rc = agree(&comm, mp_train_sync(&t));
    if (rc == 0 && !cli->dry_run)
        rc = agree(&comm, mp_train_open_outputs(&t));
    if (rc == 0 && comm.rank == 0) {
        if (cli->dry_run) {
            mp_config_print(&cfg, stdout);
            printf("\n");
            mp_model_summary(&t.model, stdout);
            printf("bytes per rank (allocator counters):");
            for (int k = 0; k < MP_MEM_NCAT; k++)
                printf(" %s %lld%s", mp_mem_cat_name((mp_mem_cat)k),
                       (long long)mp_mem_current((mp_mem_cat)k), k + 1 < MP_MEM_NCAT ? "," : "\n");
        }
        print_banner(&t, &cfg);
    }
    if (rc == 0 && !cli->dry_run) {
        mp_train_result res;
        st = mp_train_run(&t, &res);
        if (st != MP_OK) {
            rc = fail_midway(&comm, st);
        } else if (comm.rank == 0) {
            printf("done: %lld steps in %.1f s, %.0f images/s, test loss %.4f\n",
                   (long long)res.steps, res.wall_s, res.images_per_s, res.test_loss);
            printf("test accuracy: %.4f\n", res.accuracy);
        }
    }
    mp_train_free(&t);
    mp_config_free(&cfg);
    mp_comm_finalize(&comm);
    return rc;
}

static int bench_comm(const mp_cli *cli, int *argc, char ***argv)
{
    mp_bench_comm_opts o;
    mp_status st = mp_bench_comm_parse(&o, *argc, *argv, cli->rest);
    if (st != MP_OK)
        return report_once(st);
    mp_comm comm;
    st = mp_comm_init(&comm, argc, argv);
    if (st != MP_OK)
        return report(st);
    int rc = 0;
    st = mp_bench_comm_run(&comm, &o, stdout);
    if (st != MP_OK)
        rc = fail_midway(&comm, st);
    mp_comm_finalize(&comm);
    return rc;
}

int main(int argc, char **argv)
{
    mp_cli cli;
    if (mp_cli_parse(&cli, argc, argv) != MP_OK)
        return report_once(MP_EUSAGE);
    switch (cli.cmd) {
    case MP_CMD_HELP: mp_cli_usage(stdout); return 0;
    case MP_CMD_VERSION: printf("mpdist %s\n", MPDIST_VERSION); return 0;
    case MP_CMD_INFO: mp_info_print(stdout); return 0;
    case MP_CMD_TRAIN: return train(&cli, &argc, &argv);
    case MP_CMD_BENCH_COMM: return bench_comm(&cli, &argc, &argv);
    default:
        return report_once(mp_fail(MP_EUSAGE, "'%s' is not available in this build yet", argv[1]));
    }
}
