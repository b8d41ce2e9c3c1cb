/* What the MPI tests of the NCCL transport over the stand-in (tests/mpi/test_nccl_standin*.c)
 * share: the communicator and the compute stream, the ranks' inputs, one collective through a
 * route, and the comparison of the NCCL route's bytes with the MPI transport's. Tests only, and
 * only where the stand-in is built (MP_HAVE_NCCL_STANDIN). */
#ifndef MP_NCCL_STANDIN_CASES_H
#define MP_NCCL_STANDIN_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "engine/ops.h"

/* The test's communicator (mp_test_mpi_run starts it) and the compute stream the transport
 * orders, a stand-in stream (main sets it with mp_standin_stream before anything else). */
extern mp_comm comm;
extern void *stream;

/* The sum of `local` over the ranks (every rank gets it). */
int64_t standin_total(int64_t local);

/* Rank r's input element i: not a small integer, so half sums round. */
double standin_value(int64_t i, int r);

/* Starts one collective of kind (op for all-reduce) over the n elements at buf (blocks of
 * `block`), as slices of `step` elements (0: whole), on route mem (NULL: host memory), then
 * orders it and waits; a failure fails the test. */
void standin_run(const mp_ops *mem, mp_coll_kind kind, mp_redop op, void *buf, size_t n,
                 mp_dtype dt, size_t block, size_t step);

/* Elements where the NCCL route's result `got` differs from the MPI route's `want` beyond what
 * the order of a sum explains (nothing on 2 ranks, or for what is copied, not summed); before:
 * the inputs (a reduce-scatter leaves the other blocks zero or as they were). */
int64_t standin_differ(mp_coll_kind kind, mp_redop op, const void *got, const void *want,
                       const void *before, size_t n, mp_dtype dt, size_t block);

/* Wrong elements on this rank of one collective: the same inputs through the MPI transport on
 * host memory and through the NCCL transport on the staged backend's memory. */
int64_t standin_compare(mp_coll_kind kind, mp_redop op, mp_dtype dt, size_t block,
                        size_t step);

/* standin_compare's wrong elements over all ranks (every rank gets the sum). */
int64_t standin_wrong(mp_coll_kind kind, mp_redop op, mp_dtype dt, size_t block, size_t step);

/* Opens the device transport (NCCL, over the stand-in) on `stream`; a failure fails the test. */
void standin_open_device(void);

/* The staged backend's table whose graph_launch launches a stand-in graph on `stream`, as
 * CUDA's does on the backend's stream. */
mp_ops standin_graph_ops(void);

#endif
