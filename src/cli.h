/* The command line (DESIGN §6), parsed without side effects so it can be tested. */
#ifndef MP_CLI_H
#define MP_CLI_H

#include <stdbool.h>

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
    MP_CMD_BENCH_COMM
} mp_command;

typedef struct mp_cli {
    mp_command cmd;
    const char *config;               /* train, eval: the .cfg path; export, inspect: the
                                         checkpoint file */
    const char *output;               /* export: the file to write */
    const char *sets[MP_CLI_MAX_SETS]; /* "key.path=value" overrides, in order */
    int nsets;
    bool dry_run;
    const char *resume;               /* train: --resume PATH|auto, or NULL */
    const char *checkpoint;           /* eval: --checkpoint FILE */
    const char *dtype;                /* export: --dtype fp16|bf16|fp32 (default fp16) */
    int rest;                         /* bench-comm: index of its first option in argv */
} mp_cli;

/* Parses argv[1..argc) into *cli. Returns MP_OK, or MP_EUSAGE with a one-line message (unknown
 * option, an option of another command, missing or extra arguments, missing option value, too
 * many --set, an unknown --dtype). Pointers refer into argv.
 * bench-comm's options are left to it (cli->rest), except --help. */
mp_status mp_cli_parse(mp_cli *cli, int argc, char **argv);

/* Prints the --help text. */
void mp_cli_usage(FILE *out);

#endif
