/* Evaluation on the test split, and the persistent buffers (BatchNorm running statistics) made
 * equal to rank 0's before it (see train.h). */
#include "src/train.h"

#include <string.h>

#include "engine/clock.h"

/* mp_train_sync_buffers on host copies of the buffers. */
static mp_status bcast_buffers(mp_trainer *t)
{
    float *p = t->bufpack;
    for (int j = 0; j < t->nbufs && t->comm->rank == 0; j++) {
        const mp_tensor *b = &t->bufs[j].t;
        mp_convert(p, MP_F32, b->data, b->dtype, (size_t)mp_tensor_numel(b));
        p += mp_tensor_numel(b);
    }
    MP_TRY(mp_comm_bcast(t->comm, t->bufpack, (size_t)t->bufpack_len * sizeof(float), 0,
                         "broadcast of the BatchNorm running statistics"));
    p = t->bufpack;
    for (int j = 0; j < t->nbufs && t->comm->rank != 0; j++) {
        mp_tensor *b = &t->bufs[j].t;
        mp_convert(b->data, b->dtype, p, MP_F32, (size_t)mp_tensor_numel(b));
        p += mp_tensor_numel(b);
    }
    return MP_OK;
}

mp_status mp_train_sync_buffers(mp_trainer *t)
{
    if (t->comm->size == 1 || t->nbufs == 0)
        return MP_OK;
    mp_tensor *ts[MP_MAX_PARAMS];
    mp_host_swap hs;
    MP_TRY(mp_host_begin(&hs, t->ops, ts, mp_train_state_tensors(t, MP_STATE_BUFFERS, ts),
                         t->comm->rank == 0));
    mp_status st = bcast_buffers(t);
    mp_status end = mp_host_end(&hs, st == MP_OK && t->comm->rank != 0);
    return st != MP_OK ? st : end;
}

/* On several ranks, agrees on st, each rank's status over its test batches (a data error on
 * one rank, such as a damaged image, stops only its own loop): a failure ends every rank
 * together (t->failed_together), reported by the lowest rank with the worst code. */
static mp_status agree_batches(mp_trainer *t, mp_status st)
{
    if (t->comm->size == 1)
        return st;
    int reporter = -1;
    mp_status all = mp_comm_agree(t->comm, st, &reporter);
    if (all == MP_OK || t->comm->broken)
        return all;
    t->failed_together = true;
    t->fail_reporter = reporter;
    return reporter == t->comm->rank ? st
                                     : mp_fail(all, "the test data of rank %d failed", reporter);
}

mp_status mp_train_evaluate(mp_trainer *t, double *loss, double *accuracy)
{
    mp_eval_speed speed;
    return mp_train_evaluate_timed(t, loss, accuracy, &speed);
}

mp_status mp_train_evaluate_timed(mp_trainer *t, double *loss, double *accuracy,
                                  mp_eval_speed *speed)
{
    const mp_config *c = t->cfg;
    double t0 = mp_now(), t_first = 0.0;
    MP_TRY(mp_train_sync_buffers(t));
    int64_t b = c->data.batch_size;
    int64_t *idx = mp_alloc((size_t)b * sizeof *idx, MP_MEM_WORKSPACE);
    double sums[3] = {0, 0, 0}; /* loss * rows, correct, rows (a row: one label) */
    mp_status st = MP_OK;
    for (int64_t start = t->comm->rank; start < t->test.count; start += b * t->comm->size) {
        int64_t n = 0;
        for (int64_t i = start; i < t->test.count && n < b; i += t->comm->size)
            idx[n++] = i;
        st = mp_dataset_batch_augmented(&t->test, idx, n, t->mean, t->std, 0, 0, 0, false,
                                        t->x.dtype, t->xhost, t->y);
        if (st != MP_OK)
            break;
        mp_tensor x = mp_tensor_batch(&t->x, n);
        int64_t rows = n * mp_dataset_label_len(&t->test);
        const mp_tensor *logits;
        mp_xent_result res;
        if (!t->ops->host_memory) { /* the last batch's copies are done: its result was read */
            st = t->ops->copy_in(x.data, t->xhost, (size_t)mp_tensor_bytes(&x));
            if (st == MP_OK)
                st = t->ops->copy_in(t->ydev, t->y, (size_t)rows * sizeof(int32_t));
        }
        if (st == MP_OK)
            st = mp_model_forward(&t->model, &x, false, &logits);
        if (st == MP_OK)
            st = t->ops->softmax_xent(logits, t->ydev, 0.0, 1.0, NULL, &res, NULL);
        if (st != MP_OK)
            break;
        sums[0] += res.loss * (double)rows;
        sums[1] += (double)res.correct;
        sums[2] += (double)rows;
        if (t_first == 0.0)
            t_first = mp_now(); /* its result read: the first batch is done */
    }
    mp_free(idx);
    MP_TRY(agree_batches(t, st));
    if (t->comm->size > 1)
        MP_TRY(mp_comm_allreduce(t->comm, sums, 3, MP_F64, MP_REDOP_SUM, "sum of the test loss"));
    int64_t first = b * t->comm->size < t->test.count ? b * t->comm->size : t->test.count;
    bool warm = first < t->test.count && t_first > 0.0;
    speed->samples = warm ? t->test.count - first : t->test.count;
    speed->seconds = mp_now() - (warm ? t_first : t0);
    *loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
    *accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
    return MP_OK;
}

