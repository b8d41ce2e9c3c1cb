/* Command-line arguments and environment of the bench programs (bench/attention_ops.c,
 * batchnorm_bw.c, loader_folder.c, optim_bw.c). */
#ifndef MP_BENCH_ARGS_H
#define MP_BENCH_ARGS_H

#include <stdio.h>
#include <stdlib.h>

#include "engine/env_choice.h"

/* argv[i] as an integer in [1, 4096], or `dflt` when there is no argv[i]; -1 when it is not. */
static inline int mp_bench_count_arg(int argc, char **argv, int i, int dflt)
{
    if (i >= argc)
        return dflt;
    char *end = NULL;
    long v = strtol(argv[i], &end, 10);
    return end != argv[i] && *end == '\0' && v >= 1 && v <= 4096 ? (int)v : -1;
}

/* 1 when the engine's path switches (engine/env_choice.h) are unset or set to values of their
 * lists; else 0 after "PROG: error: WHY" on stderr (the caller exits 2), since a mistyped
 * MPDIST_CPU_GEMM would time the default path under the name of another. */
static inline int mp_bench_env_ok(const char *prog)
{
    if (mp_env_check() == MP_OK)
        return 1;
    fprintf(stderr, "%s: error: %s\n", prog, mp_error_message());
    return 0;
}

#endif
