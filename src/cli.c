/* Command-line parsing: `mpdist [train] CONFIG [--set k=v]... [--resume PATH|auto] [--dry-run]`
 * and the other subcommands of docs/ARCHITECTURE.md §6. */
#include "src/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    mp_command cmd;
} mp_subcommands[] = {
    {"train", MP_CMD_TRAIN},     {"info", MP_CMD_INFO},       {"eval", MP_CMD_EVAL},
    {"export", MP_CMD_EXPORT},   {"inspect", MP_CMD_INSPECT}, {"bench-comm", MP_CMD_BENCH_COMM},
    {"sample", MP_CMD_SAMPLE},   {"help", MP_CMD_HELP},
};

void mp_cli_usage(FILE *out)
{
    fputs("usage: mpdist [train] CONFIG.cfg [--set key.path=value]... [--resume PATH|auto]\n"
          "                                  [--dry-run]\n"
          "       mpdist eval CONFIG.cfg --checkpoint FILE.h5 [--set key.path=value]...\n"
          "       mpdist export FILE.h5 OUT.h5 [--dtype fp16|bf16|fp32] [--keep-batchnorm-fp32]\n"
          "       mpdist inspect FILE.h5\n"
          "       mpdist sample CONFIG.cfg --checkpoint FILE.h5 [--prompt TEXT] [--tokens N]\n"
          "                     [--temperature T] [--seed S] [--set key.path=value]...\n"
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
          "  --resume PATH|auto    continue from a checkpoint (auto: the newest valid one in\n"
          "                        checkpoint.dir); the same as checkpoint.resume\n"
          "  --restartable         tells mpdist that its launcher restarts a failed run from\n"
          "                        checkpoint.dir (launch/mpdist-run --max-restarts adds it):\n"
          "                        refused without checkpoint.dir\n"
          "  --version             print the version\n"
          "  --help                print this help\n"
          "commands:\n"
          "  train                 train (the default); SIGTERM or SIGUSR1 stop it at the next\n"
          "                        step with a checkpoint\n"
          "  eval                  test-set accuracy of a checkpoint (full or exported)\n"
          "  export                weights only, in one dtype (--dtype, fp16 unless given: about\n"
          "                        half the size of fp32), but BatchNorm's parameters and\n"
          "                        running statistics in FP32 with --keep-batchnorm-fp32\n"
          "  inspect               meta, parameter table, scaler and optimizer of a checkpoint;\n"
          "                        every dataset's checksum is verified\n"
          "  sample                text from a language model's checkpoint (data.format\n"
          "                        \"text\") on the CPU: the prompt (default: none, the model\n"
          "                        starts after a newline) and --tokens N more bytes (200),\n"
          "                        drawn at --temperature T (1; 0: the likeliest byte) with\n"
          "                        --seed S (0): the same seed gives the same text\n"
          "  info                  backends, MPI, HDF5, CUDA/cuDNN/NCCL versions in this binary\n"
          "  bench-comm [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP]\n"
          "             [-r ROUNDS] [--op OPS] [-d TYPES] [--blocking [--skew US]] [--csv]\n"
          "             [--device cuda [--share-gpu] | --device cpu]\n"
          "                        bandwidth sweeps (nccl-tests' tables) of the communicator's\n"
          "                        collectives beside the raw MPI call: OPS allreduce,\n"
          "                        reduce_scatter, all_gather, TYPES float, half, bfloat16\n"
          "                        (comma-separated; default all); sizes in bytes with K, M\n"
          "                        or G suffixes (defaults 1K..16M, times 2, or plus STEP);\n"
          "                        --blocking waits for each collective before starting the\n"
          "                        next (default: queued back to back); --skew: the last\n"
          "                        rank computes US microseconds first; --device cuda: GPU\n"
          "                        memory through the NCCL transport beside a bare NCCL\n"
          "                        loop (--share-gpu: ranks on one GPU, a test that gives no\n"
          "                        speed); --device cpu: the CPU backend's memory\n"
          "exit codes: 0 done, 2 usage or config error, 3 data error, 4 checkpoint error,\n"
          "            5 diverged, 6 communication failure or timeout, 128 + N stopped\n"
          "            by signal N without checkpoint.dir (nothing kept), 1 anything else\n"
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

/* --tokens: an integer in [1, 100000], digits only (as --seed: no sign, no blanks). */
static mp_status parse_tokens(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end || errno || n < 1 || n > 100000)
        return mp_fail(MP_EUSAGE, "--tokens: must be an integer in [1, 100000] (got '%s')", v);
    *out = n;
    return MP_OK;
}

/* --temperature: a finite number >= 0 (one below DBL_MIN, which strtod flags as an underflow,
 * too: it samples as 0 does). */
static mp_status parse_temperature(const char *v, double *out)
{
    char *end;
    double t = strtod(v, &end);
    if (end == v || *end || !isfinite(t) || t < 0.0)
        return mp_fail(MP_EUSAGE, "--temperature: must be a finite number >= 0 (got '%s')", v);
    *out = t;
    return MP_OK;
}

/* --seed: an integer in [0, 2^64). */
static mp_status parse_seed(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end || errno)
        return mp_fail(MP_EUSAGE, "--seed: must be an integer in [0, 2^64) (got '%s')", v);
    *out = s;
    return MP_OK;
}

/* An option that only `cmd` takes. */
static mp_status only_for(const mp_cli *cli, mp_command cmd, const char *opt, const char *name)
{
    if (cli->cmd != cmd)
        return mp_fail(MP_EUSAGE, "%s is an option of mpdist %s (see mpdist --help)", opt, name);
    return MP_OK;
}

static mp_status check_arguments(const mp_cli *cli, int npos)
{
    if (cli->checkpoint && !cli->checkpoint[0])
        return mp_fail(MP_EUSAGE, "--checkpoint: the path is empty");
    if (cli->resume && !cli->resume[0])
        return mp_fail(MP_EUSAGE, "--resume: the path is empty (a checkpoint, or auto; a "
                                  "fresh start despite the config's checkpoint.resume: --set "
                                  "checkpoint.resume='\"\"')");
    if (cli->config && !cli->config[0]) /* inspect's and export's first word is a checkpoint */
        return cli->cmd == MP_CMD_INSPECT || cli->cmd == MP_CMD_EXPORT
                   ? mp_fail(MP_EUSAGE, "%s: the checkpoint path is empty",
                             cli->cmd == MP_CMD_INSPECT ? "inspect" : "export")
                   : mp_fail(MP_EUSAGE, "the config path is empty");
    switch (cli->cmd) {
    case MP_CMD_TRAIN:
        if (!cli->config)
            return mp_fail(MP_EUSAGE, "no config file given (usage: mpdist [train] CONFIG.cfg; "
                                      "see mpdist --help)");
        break;
    case MP_CMD_EVAL:
        if (!cli->config || !cli->checkpoint)
            return mp_fail(MP_EUSAGE, "usage: mpdist eval CONFIG.cfg --checkpoint FILE.h5");
        break;
    case MP_CMD_SAMPLE:
        if (!cli->config || !cli->checkpoint)
            return mp_fail(MP_EUSAGE, "usage: mpdist sample CONFIG.cfg --checkpoint FILE.h5 "
                                      "[--prompt TEXT] [--tokens N] [--temperature T] [--seed S]");
        break;
    case MP_CMD_EXPORT:
        if (npos != 2)
            return mp_fail(MP_EUSAGE, "usage: mpdist export FILE.h5 OUT.h5 [--dtype "
                                      "fp16|bf16|fp32] [--keep-batchnorm-fp32]");
        if (strcmp(cli->dtype, "fp16") != 0 && strcmp(cli->dtype, "bf16") != 0 &&
            strcmp(cli->dtype, "fp32") != 0)
            return mp_fail(MP_EUSAGE, "--dtype: must be fp16, bf16 or fp32 (got '%s')",
                           cli->dtype);
        if (cli->keep_bn_fp32 && strcmp(cli->dtype, "fp32") == 0)
            return mp_fail(MP_EUSAGE, "--keep-batchnorm-fp32: the export is FP32 already (it "
                                      "goes with --dtype fp16 or bf16)");
        break;
    case MP_CMD_INSPECT:
        if (npos != 1)
            return mp_fail(MP_EUSAGE, "usage: mpdist inspect FILE.h5");
        break;
    default: break;
    }
    return MP_OK;
}

mp_status mp_cli_parse(mp_cli *cli, int argc, char **argv)
{
    memset(cli, 0, sizeof *cli);
    cli->cmd = MP_CMD_TRAIN;
    cli->dtype = "fp16";
    cli->tokens = 200;
    cli->temperature = 1.0;
    int first = 1, npos = 0;
    if (argc > 1)
        for (size_t k = 0; k < sizeof mp_subcommands / sizeof mp_subcommands[0]; k++)
            if (strcmp(argv[1], mp_subcommands[k].name) == 0) {
                cli->cmd = mp_subcommands[k].cmd;
                first = 2;
            }
    cli->rest = first;
    int max_pos = cli->cmd == MP_CMD_EXPORT ? 2 : cli->cmd == MP_CMD_INFO ? 0 : 1;
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
            MP_TRY(only_for(cli, MP_CMD_TRAIN, "--dry-run", "train"));
            cli->dry_run = true;
        } else if (strcmp(a, "--restartable") == 0) {
            MP_TRY(only_for(cli, MP_CMD_TRAIN, "--restartable", "train"));
            cli->restartable = true;
        } else if (is_option(a, "--set")) {
            if (cli->cmd != MP_CMD_EVAL && cli->cmd != MP_CMD_SAMPLE)
                MP_TRY(only_for(cli, MP_CMD_TRAIN, "--set", "train, eval and sample"));
            if (cli->nsets >= MP_CLI_MAX_SETS)
                return mp_fail(MP_EUSAGE, "too many --set options (at most %d)", MP_CLI_MAX_SETS);
            MP_TRY(take_value(argc, argv, &i, "--set", &cli->sets[cli->nsets]));
            cli->nsets++;
        } else if (is_option(a, "--resume")) {
            MP_TRY(only_for(cli, MP_CMD_TRAIN, "--resume", "train"));
            MP_TRY(take_value(argc, argv, &i, "--resume", &cli->resume));
        } else if (is_option(a, "--checkpoint")) {
            if (cli->cmd != MP_CMD_SAMPLE)
                MP_TRY(only_for(cli, MP_CMD_EVAL, "--checkpoint", "eval and sample"));
            MP_TRY(take_value(argc, argv, &i, "--checkpoint", &cli->checkpoint));
        } else if (is_option(a, "--prompt")) {
            MP_TRY(only_for(cli, MP_CMD_SAMPLE, "--prompt", "sample"));
            MP_TRY(take_value(argc, argv, &i, "--prompt", &cli->prompt));
        } else if (is_option(a, "--tokens")) {
            const char *v = "";
            MP_TRY(only_for(cli, MP_CMD_SAMPLE, "--tokens", "sample"));
            MP_TRY(take_value(argc, argv, &i, "--tokens", &v));
            MP_TRY(parse_tokens(v, &cli->tokens));
        } else if (is_option(a, "--temperature")) {
            const char *v = "";
            MP_TRY(only_for(cli, MP_CMD_SAMPLE, "--temperature", "sample"));
            MP_TRY(take_value(argc, argv, &i, "--temperature", &v));
            MP_TRY(parse_temperature(v, &cli->temperature));
        } else if (is_option(a, "--seed")) {
            const char *v = "";
            MP_TRY(only_for(cli, MP_CMD_SAMPLE, "--seed", "sample"));
            MP_TRY(take_value(argc, argv, &i, "--seed", &v));
            MP_TRY(parse_seed(v, &cli->seed));
        } else if (is_option(a, "--dtype")) {
            MP_TRY(only_for(cli, MP_CMD_EXPORT, "--dtype", "export"));
            MP_TRY(take_value(argc, argv, &i, "--dtype", &cli->dtype));
        } else if (strcmp(a, "--keep-batchnorm-fp32") == 0) {
            MP_TRY(only_for(cli, MP_CMD_EXPORT, "--keep-batchnorm-fp32", "export"));
            cli->keep_bn_fp32 = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            return mp_fail(MP_EUSAGE, "unknown option '%s' (see mpdist --help)", a);
        } else if (npos < max_pos) {
            *(npos++ == 0 ? &cli->config : &cli->output) = a;
        } else if (first == 1 && npos == 1 && !strpbrk(cli->config, "./") &&
                   access(cli->config, F_OK) != 0) {
            /* `mpdist evall CONFIG`: the first word was no config but a mistyped command */
            return mp_fail(MP_EUSAGE, "unknown command '%s' (train, eval, sample, export, "
                                      "inspect, info, bench-comm; see mpdist --help)",
                           cli->config);
        } else {
            return mp_fail(MP_EUSAGE, "unexpected argument '%s' (see mpdist --help)", a);
        }
    }
    return check_arguments(cli, npos);
}
