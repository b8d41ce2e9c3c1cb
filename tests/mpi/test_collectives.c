// np: 2 3 4
/* The communicator's collectives on real MPI ranks, with inputs whose sums are exact in any
 * order (small integers): all-reduce sums and maxima for every dtype and sizes around the
 * transport's chunking, broadcast, status agreement; the data plane's reduce-scatter, all-gather,
 * all-reduce and broadcast on each of its three routes (host memory, host copies of device-like
 * memory, the device transport), over whole blocked buffers and over slices that cut the blocks
 * anywhere; and gradient buckets for every gradient and wire dtype with bucket sizes that do and
 * do not divide the buffers, with and without predivision, all-reduced or reduce-scattered, with
 * and without an accumulated micro-batch. Wrong elements are counted on every rank and summed
 * over ranks. */
#include "tests/util/test_util.h"
#include "tests/util/test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/buckets.h"
#include "engine/ops.h"

static mp_comm comm;

/* Sum over ranks of a local count. */
static int64_t total(int64_t local)
{
    int64_t all = 0;
    assert_int_equal(MPI_Allreduce(&local, &all, 1, MPI_INT64_T, MPI_SUM, comm.world),
                     MPI_SUCCESS);
    return all;
}

/* Rank r's element i: a small integer (sums over <= 8 ranks stay below 64: exact in bf16). */
static double value(int64_t i, int r) { return (double)((i * 7 + r * 3) % 8); }

static void test_allreduce_every_dtype(void **state)
{
    (void)state;
    const mp_dtype types[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const size_t sizes[] = {1, 7, 1000, (1u << 18) + 3};
    for (size_t t = 0; t < 4; t++)
        for (size_t s = 0; s < 4; s++) {
            size_t n = sizes[s];
            void *buf = malloc(n * mp_dtype_size(types[t]));
            for (size_t i = 0; i < n; i++)
                mp_store(buf, types[t], i, value((int64_t)i, comm.rank));
            assert_int_equal(mp_comm_allreduce(&comm, buf, n, types[t], MP_REDOP_SUM, "test sum"),
                             MP_OK);
            int64_t wrong = 0;
            for (size_t i = 0; i < n; i++) {
                double want = 0;
                for (int r = 0; r < comm.size; r++)
                    want += value((int64_t)i, r);
                wrong += mp_load(buf, types[t], i) != want;
            }
            int64_t all = total(wrong);
            if (all)
                fail_msg("%s sum of %zu: %lld wrong elements over all ranks",
                         mp_dtype_name(types[t]), n, (long long)all);
            free(buf);
        }
}

static void test_max_and_bcast(void **state)
{
    (void)state;
    double d[3] = {(double)comm.rank, -(double)comm.rank, comm.rank == 1 ? 1.0 : 0.0};
    assert_int_equal(mp_comm_allreduce(&comm, d, 3, MP_F64, MP_REDOP_MAX, "test max"), MP_OK);
    assert_true(d[0] == comm.size - 1 && d[1] == 0.0 && d[2] == 1.0);
    float f[2] = {(float)comm.rank * 0.5f, 7.0f};
    assert_int_equal(mp_comm_allreduce(&comm, f, 2, MP_F32, MP_REDOP_MAX, "test max"), MP_OK);
    assert_true(f[0] == (float)(comm.size - 1) * 0.5f && f[1] == 7.0f);
    char text[64];
    snprintf(text, sizeof text, "from rank %d", comm.rank);
    assert_int_equal(mp_comm_bcast(&comm, text, sizeof text, comm.size - 1, "test bcast"), MP_OK);
    char want[64];
    snprintf(want, sizeof want, "from rank %d", comm.size - 1);
    assert_string_equal(text, want);
}

static void test_agree(void **state)
{
    (void)state;
    int reporter = 0;
    assert_int_equal(mp_comm_agree(&comm, MP_OK, &reporter), MP_OK);
    assert_int_equal(reporter, -1);
    /* Rank 0 fails with a data error, every rank from 1 with a divergence: the worst code wins
     * and its lowest rank reports. */
    mp_status mine = comm.rank == 0 ? MP_EDATA : MP_EDIVERGED;
    assert_int_equal(mp_comm_agree(&comm, mine, &reporter), MP_EDIVERGED);
    assert_int_equal(reporter, 1);
    /* A stop (MP_ESTOPPED, the largest code) never hides an error: rank 0 stopped, the last
     * rank failed to read data, that error is agreed; stopped alone, the stop and rank 0. */
    mine = comm.rank == 0 ? MP_ESTOPPED : comm.rank == comm.size - 1 ? MP_EDATA : MP_OK;
    assert_int_equal(mp_comm_agree(&comm, mine, &reporter), MP_EDATA);
    assert_int_equal(reporter, comm.size - 1);
    mine = comm.rank == 0 ? MP_ESTOPPED : MP_OK;
    assert_int_equal(mp_comm_agree(&comm, mine, &reporter), MP_ESTOPPED);
    assert_int_equal(reporter, 0);
}

/* One data-plane collective of `kind` over buf (n elements of dt in blocks of `block`, backend
 * mem) as slices of `step` elements (0: whole), all started before one wait. */
static void run_slices(const mp_ops *mem, mp_coll_kind kind, mp_tensor *buf, size_t block,
                       size_t step)
{
    size_t n = (size_t)buf->shape[0], elem = mp_dtype_size(buf->dtype);
    uint64_t ticket = 0;
    for (size_t lo = 0; lo < n; lo += step ? step : n) {
        size_t cnt = step && lo + step < n ? step : n - lo;
        char *at = (char *)buf->data + lo * elem;
        mp_coll c = kind == MP_COLL_ALLREDUCE
                        ? mp_coll_of(kind, at, cnt, buf->dtype, MP_REDOP_SUM, "test slice")
                        : mp_coll_blocks(kind, at, cnt, buf->dtype, block, lo, "test slice");
        mp_status st = mp_comm_coll_start(&comm, mem, &c, &ticket);
        if (st != MP_OK)
            fail_msg("%s", mp_error_message());
    }
    bool waited = false;
    assert_int_equal(mp_comm_coll_order(&comm, ticket, &waited), MP_OK);
    assert_int_equal(mp_comm_coll_wait(&comm, ticket), MP_OK);
}

/* Wrong elements of reduce-scatter, all-gather and all-reduce on backend mem, every dtype, block
 * sizes 1, 7 and 1000, whole and cut into slices of 5 and 333 elements. */
static int64_t data_plane_wrong(const mp_ops *mem)
{
    const mp_dtype types[] = {MP_F32, MP_F16, MP_BF16, MP_F64};
    const size_t blocks[] = {1, 7, 1000}, steps[] = {0, 5, 333};
    const mp_coll_kind kinds[] = {MP_COLL_REDUCE_SCATTER, MP_COLL_ALLGATHER, MP_COLL_ALLREDUCE};
    int64_t wrong = 0;
    for (size_t t = 0; t < 4; t++)
        for (size_t b = 0; b < 3; b++)
            for (size_t s = 0; s < 3; s++)
                for (size_t k = 0; k < 3; k++) {
                    size_t block = blocks[b], n = block * (size_t)comm.size;
                    int64_t shape[1] = {(int64_t)n};
                    mp_tensor x = mp_tensor_new(mem, types[t], 1, shape, MP_MEM_WORKSPACE);
                    double *h = malloc(n * sizeof *h);
                    void *raw = malloc(n * mp_dtype_size(types[t]));
                    for (size_t i = 0; i < n; i++) /* an all-gather must overwrite the -1s */
                        h[i] = kinds[k] == MP_COLL_ALLGATHER && i / block != (size_t)comm.rank
                                   ? -1.0
                                   : value((int64_t)i, comm.rank);
                    for (size_t i = 0; i < n; i++)
                        mp_store(raw, types[t], i, h[i]);
                    assert_int_equal(mem->copy_in(x.data, raw, n * mp_dtype_size(types[t])),
                                     MP_OK);
                    run_slices(mem, kinds[k], &x, block, steps[s]);
                    assert_int_equal(mem->copy_out(raw, x.data, n * mp_dtype_size(types[t])),
                                     MP_OK);
                    assert_int_equal(mem->sync(), MP_OK);
                    for (size_t i = 0; i < n; i++) {
                        size_t owner = i / block;
                        double got = mp_load(raw, types[t], i);
                        if (kinds[k] == MP_COLL_REDUCE_SCATTER && owner != (size_t)comm.rank) {
                            wrong += got != 0.0 && got != h[i]; /* not summed: zero or kept */
                            continue;
                        }
                        double want = 0;
                        for (int r = 0; r < comm.size; r++)
                            want += value((int64_t)i, r);
                        if (kinds[k] == MP_COLL_ALLGATHER)
                            want = value((int64_t)i, (int)owner);
                        wrong += got != want;
                    }
                    free(h);
                    free(raw);
                    mp_tensor_delete(mem, &x);
                }
    return total(wrong);
}

/* Two collectives over overlapping memory, the second started before the first is waited for,
 * see each other in order on every route: a sum of element 0, then a max over elements 0..2
 * (the agreement of a sharded step does this), ends with the largest sum. */
static int64_t in_order_wrong(const mp_ops *mem)
{
    int64_t shape[1] = {3};
    mp_tensor x = mp_tensor_new(mem, MP_F64, 1, shape, MP_MEM_WORKSPACE);
    double h[3] = {(double)comm.rank + 1.0, (double)comm.rank, -1.0};
    assert_int_equal(mem->copy_in(x.data, h, sizeof h), MP_OK);
    mp_coll sum = mp_coll_of(MP_COLL_ALLREDUCE, x.data, 1, MP_F64, MP_REDOP_SUM, "test sum");
    mp_coll max = mp_coll_of(MP_COLL_ALLREDUCE, x.data, 3, MP_F64, MP_REDOP_MAX, "test max");
    uint64_t ticket;
    assert_int_equal(mp_comm_coll_start(&comm, mem, &sum, &ticket), MP_OK);
    assert_int_equal(mp_comm_coll_start(&comm, mem, &max, &ticket), MP_OK);
    assert_int_equal(mp_comm_coll_wait(&comm, ticket), MP_OK);
    assert_int_equal(mem->copy_out(h, x.data, sizeof h), MP_OK);
    mp_tensor_delete(mem, &x);
    double want = comm.size * (comm.size + 1) / 2.0; /* 1 + 2 + ... + size */
    return total((h[0] != want) + (h[1] != comm.size - 1.0) + (h[2] != -1.0));
}

/* The three routes of the data plane give the same, exact results; the broadcast too. */
static void test_data_plane_routes(void **state)
{
    (void)state;
    const mp_ops *staged = mp_backend_cpu_staged();
    int64_t host = data_plane_wrong(mp_backend_cpu()) + in_order_wrong(mp_backend_cpu());
    int64_t copies = data_plane_wrong(staged) + in_order_wrong(staged);
    int64_t device = -1;
    if (comm.thread_level == MPI_THREAD_MULTIPLE) {
        assert_int_equal(mp_comm_use_device(&comm, -1, NULL), MP_OK);
        device = data_plane_wrong(staged) + in_order_wrong(staged);
        int64_t shape[1] = {48};
        mp_tensor x = mp_tensor_new(staged, MP_F32, 1, shape, MP_MEM_WORKSPACE);
        char text[48] = "", want[48];
        snprintf(text, sizeof text, "from rank %d", comm.rank);
        snprintf(want, sizeof want, "from rank 0");
        assert_int_equal(staged->copy_in(x.data, text, sizeof text), MP_OK);
        mp_coll c = mp_coll_of(MP_COLL_BCAST, x.data, sizeof text, MP_F32, MP_REDOP_SUM, "test");
        uint64_t ticket;
        assert_int_equal(mp_comm_coll_start(&comm, staged, &c, &ticket), MP_OK);
        assert_int_equal(mp_comm_coll_wait(&comm, ticket), MP_OK);
        assert_int_equal(staged->copy_out(text, x.data, sizeof text), MP_OK);
        assert_string_equal(text, want);
        mp_tensor_delete(staged, &x);
        mp_comm_drop_device(&comm);
    }
    if (host || copies || device > 0)
        fail_msg("wrong elements: host memory %lld, host copies %lld, device transport %lld",
                 (long long)host, (long long)copies, (long long)device);
}

/* A block collective with elements past the last rank's block is refused, not run. */
static void test_blocks_checked(void **state)
{
    (void)state;
    float buf[8] = {0};
    mp_coll c = mp_coll_blocks(MP_COLL_REDUCE_SCATTER, buf, 8, MP_F32, 1, 0, "test overrun");
    uint64_t ticket;
    assert_int_equal(mp_comm_coll_start(&comm, NULL, &c, &ticket),
                     comm.size >= 8 ? MP_OK : MP_EINTERNAL);
    if (comm.size >= 8)
        assert_int_equal(mp_comm_coll_wait(&comm, ticket), MP_OK);
}

/* A parameter table of 37 parameters of uneven sizes in both groups, allocated with the given
 * gradient dtypes, sharded over the ranks (ZeRO-1) when `shard`. */
static void make_params(mp_params *p, mp_dtype grad_weights, mp_dtype grad_norm, bool shard)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 37; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        int64_t shape[1] = {1 + (i * 53) % 301};
        mp_params_add(p, name, i % 4 == 3 ? MP_GROUP_NORM : MP_GROUP_WEIGHTS, 1, shape);
    }
    if (shard)
        mp_params_shard(p, comm.rank, comm.size);
    mp_group_spec specs[MP_NGROUPS] = {{.model = grad_weights, .grad = grad_weights},
                                       {.model = grad_norm, .grad = grad_norm}};
    mp_params_alloc(p, mp_backend_cpu(), specs);
}

/* Fills the gradients as backward would: times `mult` and the pre-scale folded into the loss
 * gradient. */
static void fill_grads(mp_params *p, const mp_grad_sync *s, double mult)
{
    for (int g = 0; g < MP_NGROUPS; g++) {
        mp_tensor *t = &p->groups[g].grad;
        for (int64_t i = 0; i < t->shape[0]; i++)
            mp_store(t->data, t->dtype, (size_t)i,
                     mult * mp_grad_sync_pre_scale(s) * value(i + g, comm.rank));
    }
}

/* One bucketed step: fills the gradients, announces them layer by layer in reverse, finishes,
 * and counts elements that are not the sum over ranks (with cfg->shard those of the rank's
 * block only). With cfg->accumulate a first micro-batch of the same gradients goes to the
 * accumulator before, so the sums are twice as large. */
static int64_t bucket_step(mp_params *p, const mp_grad_sync_config *cfg, double mult)
{
    mp_grad_sync s;
    assert_int_equal(mp_grad_sync_init(&s, &comm, mp_backend_cpu(), p, cfg), MP_OK);
    if (cfg->accumulate) {
        fill_grads(p, &s, mult);
        assert_int_equal(mp_grad_sync_accumulate(&s, true), MP_OK);
    }
    fill_grads(p, &s, mult);
    mp_grad_sync_begin(&s, cfg->accumulate);
    for (int k = p->count - 1; k >= 0; k -= 3) /* "layers" of three parameters */
        assert_int_equal(mp_grad_sync_ready(&s, k), MP_OK);
    mp_status st = mp_grad_sync_finish(&s);
    if (st != MP_OK)
        fail_msg("%s", mp_error_message());
    if (cfg->overlap && (comm.size > 1 || cfg->accumulate))
        assert_true(s.next == s.nbuckets);
    int64_t wrong = 0;
    for (int g = 0; g < MP_NGROUPS; g++) {
        mp_param_group *pg = &p->groups[g];
        for (int64_t i = pg->lo; i < pg->lo + pg->n; i++) {
            double want = 0;
            for (int r = 0; r < comm.size; r++)
                want += mult * value(i + g, r) * (cfg->accumulate ? 2 : 1);
            wrong += mp_load(pg->grad.data, pg->grad.dtype, (size_t)i) !=
                     want * mp_grad_sync_pre_scale(&s);
        }
    }
    mp_grad_sync_free(&s);
    return total(wrong);
}

/* Every gradient and wire dtype, bucket sizes that do and do not divide the buffers, with and
 * without predivision, all-reduced or reduce-scattered (ZeRO-1), with and without an
 * accumulated micro-batch. */
static void test_buckets_every_dtype(void **state)
{
    (void)state;
    const mp_dtype grads[] = {MP_F32, MP_F16, MP_BF16};
    const int wires[] = {-1, MP_F32, MP_F16, MP_BF16};
    const int64_t caps[][2] = {{1, 1}, {64, 32}, {1000, 200}, {4096, 4096}, {1 << 30, 1 << 30}};
    for (int mode = 0; mode < 4; mode++)
        for (size_t g = 0; g < 3; g++)
            for (size_t w = 0; w < 4; w++)
                for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++)
                    for (int pre = 0; pre < 2; pre++) {
                        bool shard = mode & 1, accumulate = mode & 2;
                        mp_params p;
                        make_params(&p, grads[g], MP_F32, shard);
                        mp_grad_sync_config cfg = {caps[c][0],       caps[c][1], wires[w],
                                                   pre ? 2.0 : 1.0, (c + w) % 2 == 0, shard,
                                                   accumulate};
                        /* with predivision by 2 the inputs are even: halving them is exact */
                        int64_t wrong = bucket_step(&p, &cfg, pre ? 2.0 : 1.0);
                        if (wrong)
                            fail_msg("grads %s, wire %s, caps %lld/%lld, predivide %d, shard "
                                     "%d, accumulate %d: %lld wrong",
                                     mp_dtype_name(grads[g]),
                                     wires[w] < 0 ? "auto" : mp_dtype_name((mp_dtype)wires[w]),
                                     (long long)caps[c][0], (long long)caps[c][1], pre ? 2 : 1,
                                     shard, accumulate, (long long)wrong);
                        mp_params_free(&p);
                    }
}

/* The post-scale turns the sums into means: predivide / world. */
static void test_post_scale(void **state)
{
    (void)state;
    mp_params p;
    make_params(&p, MP_F32, MP_F32, false);
    mp_grad_sync_config cfg = {1 << 20, 1 << 20, -1, 4.0, true, false, false};
    mp_grad_sync s;
    assert_int_equal(mp_grad_sync_init(&s, &comm, mp_backend_cpu(), &p, &cfg), MP_OK);
    assert_true(mp_grad_sync_post_scale(&s) == 4.0 / comm.size);
    mp_grad_sync_free(&s);
    mp_params_free(&p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_every_dtype),
        cmocka_unit_test(test_max_and_bcast),
        cmocka_unit_test(test_agree),
        cmocka_unit_test(test_data_plane_routes),
        cmocka_unit_test(test_blocks_checked),
        cmocka_unit_test(test_buckets_every_dtype),
        cmocka_unit_test(test_post_scale),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
