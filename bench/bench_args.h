/* Command-line arguments of the bench programs (bench/attention_ops.c, batchnorm_bw.c,
 * loader_folder.c). */
#ifndef MP_BENCH_ARGS_H
#define MP_BENCH_ARGS_H

#include <stdlib.h>

/* argv[i] as an integer in [1, 4096], or `dflt` when there is no argv[i]; -1 when it is not. */
static inline int mp_bench_count_arg(int argc, char **argv, int i, int dflt)
{
    if (i >= argc)
        return dflt;
    char *end = NULL;
    long v = strtol(argv[i], &end, 10);
    return end != argv[i] && *end == '\0' && v >= 1 && v <= 4096 ? (int)v : -1;
}

#endif
