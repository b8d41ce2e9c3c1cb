/* The command line (docs/ARCHITECTURE.md §6), parsed without side effects so it can be tested. */
#ifndef MP_CLI_H
#define MP_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include <stdio.h>

#include "engine/status.h"

#define MP_CLI_MAX_SETS 128

typedef enum mp_command {
    MP_CMD_TRAIN,
    MP_CMD_INFO,
    MP_CMD_HELP,
    MP_CMD_VERSION,
    MP_CMD_EVAL,
    MP_CMD_EXPORT,
    MP_CMD_INSPECT,
    MP_CMD_BENCH_COMM,
    MP_CMD_SAMPLE
} mp_command;

typedef struct mp_cli {
    mp_command cmd;
    const char *config;               /* train, eval: the .cfg path; export, inspect: the
                                         checkpoint file */
    const char *output;               /* export: the file to write */
    const char *sets[MP_CLI_MAX_SETS]; /* "key.path=value" overrides, in order */
    int nsets;
    bool dry_run;
    bool restartable;                 /* train: --restartable (launch/mpdist-run --max-restarts) */
    const char *resume;               /* train: --resume PATH|auto, or NULL */
    const char *checkpoint;           /* eval, sample: --checkpoint FILE */
    const char *prompt;               /* sample: --prompt TEXT, or NULL */
    int64_t tokens;                   /* sample: --tokens N in [1, 100000] (default 200) */
    double temperature;               /* sample: --temperature T, finite, >= 0 (default 1) */
    uint64_t seed;                    /* sample: --seed S (default 0) */
    const char *dtype;                /* export: --dtype fp16|bf16|fp32 (default fp16) */
    bool keep_bn_fp32;                /* export: --keep-batchnorm-fp32 */
    int rest;                         /* bench-comm: index of its first option in argv */
} mp_cli;

/* Parses argv[1..argc) into *cli. Returns MP_OK, or MP_EUSAGE with a one-line message (unknown
 * option, an option of another command, missing or extra arguments, missing option value, too
 * many --set, an unknown --dtype, a sample number out of range). Pointers refer into argv.
 * bench-comm's options are left to it (cli->rest), except --help. */
mp_status mp_cli_parse(mp_cli *cli, int argc, char **argv);

/* Prints the --help text. */
void mp_cli_usage(FILE *out);

#endif
