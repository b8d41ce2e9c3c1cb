/* Command-line parsing: `mpdist [train] CONFIG [--set k=v]... [--resume PATH|auto] [--dry-run]`
 * and the other subcommands of DESIGN §6. */
#include "src/cli.h"

#include <string.h>

static const struct {
    const char *name;
    mp_command cmd;
} mp_subcommands[] = {
    {"train", MP_CMD_TRAIN},     {"info", MP_CMD_INFO},       {"eval", MP_CMD_EVAL},
    {"export", MP_CMD_EXPORT},   {"inspect", MP_CMD_INSPECT}, {"bench-comm", MP_CMD_BENCH_COMM},
    {"help", MP_CMD_HELP},
};

void mp_cli_usage(FILE *out)
{
    fputs("usage: mpdist [train] CONFIG.cfg [--set key.path=value]... [--dry-run]\n"
          "       mpdist bench-comm [options] | info | --version | --help\n"
          "\n"
          "Trains a neural network with mixed precision on every MPI rank it is started on:\n"
          "  mpirun -np 4 mpdist configs/fashion-mnist-mlp.cfg\n"
          "  srun --mpi=pmix mpdist train.cfg\n"
          "\n"
          "options:\n"
          "  --set key.path=value  override a config key (libconfig syntax; a bare word is a\n"
          "                        string), repeatable, e.g. --set optim.lr=0.05\n"
          "  --dry-run             validate config and data, print the resolved configuration\n"
          "                        and the model summary, then exit\n"
          "  --version             print the version\n"
          "  --help                print this help\n"
          "commands:\n"
          "  train                 train (the default)\n"
          "  info                  backends, MPI, HDF5, CUDA/cuDNN/NCCL versions in this binary\n"
          "  bench-comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--csv]\n"
          "                        all-reduce bandwidth sweep (nccl-tests' table) of the\n"
          "                        communicator in fp32, fp16 and bf16 beside raw MPI_Allreduce;\n"
          "                        sizes in bytes with K, M or G suffixes (defaults 1K..16M)\n"
          "exit codes: 0 done, 2 usage or config error, 3 data error, 4 checkpoint error,\n"
          "            5 diverged, 6 communication failure or timeout\n"
          "config keys: configs/README.md\n",
          out);
}

static mp_status take_value(int argc, char **argv, int *i, const char *opt, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(opt);
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return MP_OK;
    }
    if (*i + 1 >= argc)
        return mp_fail(MP_EUSAGE, "%s needs a value (see mpdist --help)", opt);
    *value = argv[++*i];
    return MP_OK;
}

static bool is_option(const char *arg, const char *opt)
{
    size_t n = strlen(opt);
    return strncmp(arg, opt, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

mp_status mp_cli_parse(mp_cli *cli, int argc, char **argv)
{
    memset(cli, 0, sizeof *cli);
    cli->cmd = MP_CMD_TRAIN;
    int first = 1;
    if (argc > 1)
        for (size_t k = 0; k < sizeof mp_subcommands / sizeof mp_subcommands[0]; k++)
            if (strcmp(argv[1], mp_subcommands[k].name) == 0) {
                cli->cmd = mp_subcommands[k].cmd;
                first = 2;
            }
    cli->rest = first;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (cli->cmd == MP_CMD_BENCH_COMM && strcmp(a, "--help") != 0 && strcmp(a, "-h") != 0)
            continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli->cmd = MP_CMD_HELP;
            return MP_OK;
        } else if (strcmp(a, "--version") == 0) {
            cli->cmd = MP_CMD_VERSION;
            return MP_OK;
        } else if (strcmp(a, "--dry-run") == 0) {
            cli->dry_run = true;
        } else if (is_option(a, "--set")) {
            if (cli->nsets >= MP_CLI_MAX_SETS)
                return mp_fail(MP_EUSAGE, "too many --set options (at most %d)", MP_CLI_MAX_SETS);
            MP_TRY(take_value(argc, argv, &i, "--set", &cli->sets[cli->nsets]));
            cli->nsets++;
        } else if (is_option(a, "--resume")) {
            MP_TRY(take_value(argc, argv, &i, "--resume", &cli->resume));
        } else if (a[0] == '-' && a[1] != '\0') {
            return mp_fail(MP_EUSAGE, "unknown option '%s' (see mpdist --help)", a);
        } else if (!cli->config) {
            cli->config = a;
        } else {
            return mp_fail(MP_EUSAGE, "unexpected argument '%s' (one config file only)", a);
        }
    }
    if (cli->cmd == MP_CMD_TRAIN && !cli->config)
        return mp_fail(MP_EUSAGE, "no config file given (usage: mpdist [train] CONFIG.cfg; "
                                  "see mpdist --help)");
    return MP_OK;
}
