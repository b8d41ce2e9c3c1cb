// np: 2 3 4
/* The communicator's collectives on real MPI ranks, with inputs whose sums are exact in any
 * order (small integers): all-reduce sums and maxima for every dtype and sizes around the
 * transport's chunking, broadcast, status agreement, and gradient buckets for every gradient and
 * wire dtype with bucket sizes that do and do not divide the buffers, with and without
 * predivision. Wrong elements are counted on every rank and summed over ranks. */
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
}

/* A parameter table of 37 parameters of uneven sizes in both groups, allocated with the given
 * gradient dtypes. */
static void make_params(mp_params *p, mp_dtype grad_weights, mp_dtype grad_norm)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 37; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        int64_t shape[1] = {1 + (i * 53) % 301};
        mp_params_add(p, name, i % 4 == 3 ? MP_GROUP_NORM : MP_GROUP_WEIGHTS, 1, shape);
    }
    mp_group_spec specs[MP_NGROUPS] = {{grad_weights, grad_weights, false},
                                       {grad_norm, grad_norm, false}};
    mp_params_alloc(p, mp_backend_cpu(), specs);
}

/* One bucketed step: fills the gradients (times `mult` and the pre-scale, as backward would
 * with the pre-scale folded into the loss gradient), announces them layer by layer in reverse,
 * finishes, and counts elements that are not the sum over ranks. */
static int64_t bucket_step(mp_params *p, const mp_grad_sync_config *cfg, double mult)
{
    mp_grad_sync s;
    assert_int_equal(mp_grad_sync_init(&s, &comm, mp_backend_cpu(), p, cfg), MP_OK);
    for (int g = 0; g < MP_NGROUPS; g++) {
        mp_tensor *t = &p->groups[g].grad;
        for (int64_t i = 0; i < t->shape[0]; i++)
            mp_store(t->data, t->dtype, (size_t)i,
                     mult * mp_grad_sync_pre_scale(&s) * value(i + g, comm.rank));
    }
    mp_grad_sync_begin(&s);
    for (int k = p->count - 1; k >= 0; k -= 3) /* "layers" of three parameters */
        assert_int_equal(mp_grad_sync_ready(&s, k), MP_OK);
    mp_status st = mp_grad_sync_finish(&s);
    if (st != MP_OK)
        fail_msg("%s", mp_error_message());
    if (cfg->overlap)
        assert_true(s.next == s.nbuckets);
    int64_t wrong = 0;
    for (int g = 0; g < MP_NGROUPS; g++) {
        mp_tensor *t = &p->groups[g].grad;
        for (int64_t i = 0; i < t->shape[0]; i++) {
            double want = 0;
            for (int r = 0; r < comm.size; r++)
                want += mult * value(i + g, r);
            wrong += mp_load(t->data, t->dtype, (size_t)i) != want * mp_grad_sync_pre_scale(&s);
        }
    }
    mp_grad_sync_free(&s);
    return total(wrong);
}

static void test_buckets_every_dtype(void **state)
{
    (void)state;
    const mp_dtype grads[] = {MP_F32, MP_F16, MP_BF16};
    const int wires[] = {-1, MP_F32, MP_F16, MP_BF16};
    const int64_t caps[][2] = {{1, 1}, {64, 32}, {1000, 200}, {4096, 4096}, {1 << 30, 1 << 30}};
    for (size_t g = 0; g < 3; g++)
        for (size_t w = 0; w < 4; w++)
            for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++)
                for (int pre = 0; pre < 2; pre++) {
                    mp_params p;
                    make_params(&p, grads[g], MP_F32);
                    mp_grad_sync_config cfg = {caps[c][0], caps[c][1], wires[w],
                                               pre ? 2.0 : 1.0, (c + w) % 2 == 0};
                    /* with predivision by 2 the inputs are even: halving them is exact */
                    int64_t wrong = bucket_step(&p, &cfg, pre ? 2.0 : 1.0);
                    if (wrong)
                        fail_msg("grads %s, wire %s, caps %lld/%lld, predivide %d: %lld wrong",
                                 mp_dtype_name(grads[g]),
                                 wires[w] < 0 ? "auto" : mp_dtype_name((mp_dtype)wires[w]),
                                 (long long)caps[c][0], (long long)caps[c][1], pre ? 2 : 1,
                                 (long long)wrong);
                    mp_params_free(&p);
                }
}

/* The post-scale turns the sums into means: predivide / world. */
static void test_post_scale(void **state)
{
    (void)state;
    mp_params p;
    make_params(&p, MP_F32, MP_F32);
    mp_grad_sync_config cfg = {1 << 20, 1 << 20, -1, 4.0, true};
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
        cmocka_unit_test(test_buckets_every_dtype),
        cmocka_unit_test(test_post_scale),
    };
    return mp_test_mpi_run(&comm, &argc, &argv, tests);
}
