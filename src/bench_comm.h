/* `mpdist bench-comm`: sweeps of all-reduce, reduce-scatter and all-gather in nccl-tests' format
 * through the communicator (the path gradients and ZeRO shards take: the transport's worker, the
 * half sums) beside the raw MPI call on the same bytes, measured alternately in one run. */
#ifndef MP_BENCH_COMM_H
#define MP_BENCH_COMM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "comm/comm.h"

typedef struct mp_bench_comm_opts {
    int64_t min_bytes, max_bytes; /* -b, -e */
    int factor;                   /* -f: size multiplier between rows */
    int64_t step_bytes;           /* -i: size increment between rows instead (0: -f) */
    int iters, warmup;            /* -n, -w: timed and untimed iterations per round */
    int rounds;                   /* -r: alternating rounds; queued, the best round's mean of
                                     the slowest rank (MAX) counts */
    bool csv;                     /* --csv: CSV instead of the table */
    bool blocking;                /* --blocking: each iteration timed alone (waited for before
                                     the next) as the least over the ranks (MIN); the median
                                     over all rounds' iterations counts */
    double timeout_s;             /* --timeout: the watchdog's limit */
    int skew_us;                  /* --skew (with --blocking): the last rank computes this many
                                     microseconds before each timed collective */
    unsigned ops;                 /* --op: MP_BENCH_* bits, the collectives swept */
    unsigned types;               /* -d: MP_BENCH_FLOAT, _HALF, _BFLOAT16 bits, the dtypes
                                     swept */
} mp_bench_comm_opts;

enum { MP_BENCH_ALLREDUCE = 1, MP_BENCH_REDUCE_SCATTER = 2, MP_BENCH_ALLGATHER = 4 };
enum { MP_BENCH_FLOAT = 1, MP_BENCH_HALF = 2, MP_BENCH_BFLOAT16 = 4 }; /* -d's bits */

/* The most sizes a sweep with -i may have. */
enum { MP_BENCH_MAX_SIZES = 1000 };

/* The most iterations (-n times -r) --blocking keeps the times of. */
enum { MP_BENCH_BLOCKING_MAX = 1000000 };

/* Parses argv[first..argc) into *o (defaults first). MP_EUSAGE with a message for a bad option.
 * Not collective. */
mp_status mp_bench_comm_parse(mp_bench_comm_opts *o, int argc, char **argv, int first);

/* Whether the largest size's buffers fit in memory (mp_data_mem_check): the buffer and the
 * collective's working copy of it, for each rank on this host. MP_EDATA with the numbers
 * otherwise, before anything is allocated. */
mp_status mp_bench_comm_check_memory(const mp_comm *c, const mp_bench_comm_opts *o);

/* Runs the sweep; rank 0 writes the table (or CSV) to out. MP_ECOMM when a collective fails or
 * any result is wrong. Collective. */
mp_status mp_bench_comm_run(mp_comm *c, const mp_bench_comm_opts *o, FILE *out);

#endif
