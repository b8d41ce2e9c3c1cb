/* A trainer's data: the config's format read into t->train and t->test (src/train_setup.c's
 * set-up calls it), and the check of token shards that the ranks share after it. */
#include "src/train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/augment.h"
#include "io/folder.h"
#include "io/fsutil.h"
#include "io/h5data.h"
#include "io/memcheck.h"
#include "io/tokens.h"

/* Pieces of 1 MiB each rank checks in a round of the shared token check. */
enum { MP_TOKEN_ROUND = 32 };

/* MP_EUSAGE when an output of the run lies inside a directory that the format reads whole:
 * text's data.path, walked for text files, or an image folder's train/ and val/, whose
 * directories are classes: the next run would read the metrics, the trace (and, for image
 * folders, checkpoint.dir) as data. */
static mp_status outputs_outside_data(const mp_config *c)
{
    bool text = strcmp(c->data.format, "text") == 0;
    if (!text && strcmp(c->data.format, "folder") != 0)
        return MP_OK;
    char read[2][1100];
    snprintf(read[0], sizeof read[0], text ? "%s" : "%s/train", c->data.path);
    snprintf(read[1], sizeof read[1], text ? "%s" : "%s/val", c->data.path);
    const char *key[3] = {"log.metrics", "log.trace", "checkpoint.dir"};
    const char *val[3] = {c->log.metrics, c->log.trace, text ? "" : c->checkpoint.dir};
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < 2 && val[i] && val[i][0]; r++)
            if (mp_path_within(read[r], val[i])) {
                char at[1200];
                return mp_fail(MP_EUSAGE, "%s: %s lies inside %s, which data.format \"%s\" "
                               "reads whole (the next run would take it for data): put it "
                               "elsewhere", mp_config_key_at(c, key[i], at, sizeof at), val[i],
                               read[r], c->data.format);
            }
    return MP_OK;
}

mp_status mp_train_load_data(mp_trainer *t)
{
    const mp_config *c = t->cfg;
    bool train = !t->forward_only;
    if (train)
        MP_TRY(outputs_outside_data(c));
    if (strcmp(c->data.format, "cifar10") == 0) {
        if (train)
            MP_TRY(mp_cifar10_load(&t->train, c->data.path, "train", c->data.train_limit));
        MP_TRY(mp_cifar10_load(&t->test, c->data.path, "test", c->data.test_limit));
        char at[256];
        if (c->data.num_classes != 10)
            return mp_fail(MP_EUSAGE, "%s: cifar10 has 10 classes (got %lld)",
                           mp_config_key_at(c, "data.num_classes", at, sizeof at),
                           (long long)c->data.num_classes);
    } else if (strcmp(c->data.format, "text") == 0) {
        MP_TRY(mp_text_load(&t->train, &t->test, c->data.path, (int)c->data.context,
                            c->data.val_fraction, c->data.train_limit, c->data.test_limit));
    } else if (strcmp(c->data.format, "tokens") == 0) {
        MP_TRY(mp_tokens_open(&t->train, &t->test, c->data.path, (int)c->data.context,
                              (int)c->data.token_bytes, c->data.num_classes, c->data.train_limit,
                              c->data.test_limit));
    } else if (strcmp(c->data.format, "hdf5") == 0) {
        const mp_h5data_keys keys[2] = {{c->data.train_images, c->data.train_labels},
                                        {c->data.test_images, c->data.test_labels}};
        MP_TRY(mp_h5data_load(&t->train, &t->test, c->data.path, keys,
                              strcmp(c->data.layout, "nchw") == 0, c->data.num_classes,
                              c->data.chunk_cache_mb, c->data.train_limit, c->data.test_limit));
    } else if (strcmp(c->data.format, "folder") == 0) {
        MP_TRY(mp_folder_load(&t->train, &t->test, c->data.path, (int)c->data.image_size,
                              (int)c->data.channels, (int)c->data.resize, c->data.num_classes,
                              c->data.train_limit, c->data.test_limit));
    } else if (strcmp(c->data.format, "synthetic") == 0) {
        const int64_t *sh = c->data.synthetic_shape;
        char at[256], what[160];
        if (c->data.nsynthetic_shape != 3)
            return mp_fail(MP_EUSAGE, "%s: give [height, width, channels] (got %d values)",
                           mp_config_key_at(c, "data.synthetic_shape", at, sizeof at),
                           c->data.nsynthetic_shape);
        if (sh[2] > MP_DATA_MAX_CHANNELS)
            return mp_fail(MP_EUSAGE, "%s: %lld channels, more than the %d an image may have",
                           mp_config_key_at(c, "data.synthetic_shape", at, sizeof at),
                           (long long)sh[2], MP_DATA_MAX_CHANNELS);
        int64_t n[2] = {c->data.synthetic_train, c->data.synthetic_test};
        int64_t lim[2] = {c->data.train_limit, c->data.test_limit};
        for (int k = 0; k < 2; k++)
            if (lim[k] > 0 && lim[k] < n[k])
                n[k] = lim[k];
        /* both splits' pixels at once, before either is made (the training split can take
         * minutes to fill) */
        int64_t all[4] = {(train ? n[0] : 0) + n[1], sh[0], sh[1], sh[2]};
        snprintf(what, sizeof what, "%s: %lld images of %lldx%lldx%lld",
                 train ? "the train and test splits" : "the test split", (long long)all[0],
                 (long long)sh[0], (long long)sh[1], (long long)sh[2]);
        MP_TRY(mp_data_mem_check("synthetic data", what, 4, all, NULL));
        if (train)
            MP_TRY(mp_synthetic_make(&t->train, "train", (int)sh[0], (int)sh[1], (int)sh[2],
                                     n[0], (int)c->data.num_classes, (uint64_t)c->train.seed));
        MP_TRY(mp_synthetic_make(&t->test, "test", (int)sh[0], (int)sh[1], (int)sh[2], n[1],
                                 (int)c->data.num_classes, (uint64_t)c->train.seed));
    } else {
        if (train)
            MP_TRY(mp_idx_load(&t->train, c->data.path, "train", (int)c->data.num_classes,
                               c->data.train_limit));
        MP_TRY(mp_idx_load(&t->test, c->data.path, "test", (int)c->data.num_classes,
                           c->data.test_limit));
    }
    double m[3], s[3];
    bool own = mp_config_channel_norm(c, m, s); /* the format's per-channel defaults */
    for (int k = 0; k < MP_DATA_MAX_CHANNELS; k++) {
        t->mean[k] = own && k < 3 && !mp_config_given(c, "data.mean") ? m[k] : c->data.mean;
        t->std[k] = own && k < 3 && !mp_config_given(c, "data.std") ? s[k] : c->data.std;
    }
    if (t->train.count > 0 &&
        (t->train.h != t->test.h || t->train.w != t->test.w || t->train.c != t->test.c))
        return mp_fail(MP_EDATA, "%s: train images are %dx%dx%d but test images are %dx%dx%d",
                       c->data.path, t->train.h, t->train.w, t->train.c, t->test.h, t->test.w,
                       t->test.c);
    /* rank 0 writes it in checkpoints; every rank's is compared with rank 0's
     * (mp_train_check_data), each hashing its own copy at the same time */
    t->train_digest = mp_dataset_digest(&t->train);
    if (!train)
        return MP_OK;
    const char *what = strcmp(c->data.format, "synthetic") == 0 ? "synthetic data" : c->data.path;
    if (t->train.count < 1)
        return mp_fail(MP_EDATA, "%s: no training samples", what);
    if (t->train.count < t->comm->size)
        return mp_fail(MP_EUSAGE, "%s: %lld training sample%s cannot be shared by %d ranks: "
                       "start at most %lld rank%s, or train on more data", what,
                       (long long)t->train.count, t->train.count == 1 ? "" : "s", t->comm->size,
                       (long long)t->train.count, t->train.count == 1 ? "" : "s");
    return MP_OK;
}

/* What tells one rank's data from another's, each fact named for the message: both splits'
 * sample counts, shapes and classes, the token pieces, then the training set's digest
 * (mp_dataset_digest, in two halves that doubles hold exactly). */
enum { MP_DATA_FACTS = 13, MP_DATA_DIGEST = 11 };

static const char *const mp_data_fact_names[MP_DATA_FACTS] = {
    "training samples", "test samples", "rows a training sample", "columns a training sample",
    "channels a training sample", "rows a test sample", "columns a test sample",
    "channels a test sample", "training classes", "test classes", "token pieces"};

static void data_facts(const mp_trainer *t, double f[MP_DATA_FACTS])
{
    const mp_dataset *a = &t->train, *b = &t->test;
    const double v[MP_DATA_FACTS] = {
        (double)a->count, (double)b->count, a->h, a->w, a->c, b->h, b->w, b->c,
        a->num_classes, b->num_classes,
        a->tokens && b->tokens ? (double)mp_tokens_pieces(a, b) : 0,
        (double)(t->train_digest >> 32), (double)(t->train_digest & 0xffffffffu)};
    memcpy(f, v, sizeof v);
}

/* Every rank's data agree with rank 0's (rank 0's facts broadcast, each rank compares its own):
 * MP_OK, or MP_EDATA on a rank whose data differ, naming the first fact that does (per-node
 * copies of a dataset that differ, a file that changed while the ranks started), before a
 * collective that sizes would set apart could go out of step. */
static mp_status agree_on_data(mp_trainer *t)
{
    mp_comm *comm = t->comm;
    double mine[MP_DATA_FACTS], root[MP_DATA_FACTS];
    data_facts(t, mine);
    memcpy(root, mine, sizeof root);
    MP_TRY(mp_comm_bcast(comm, root, sizeof root, 0, "rank 0's data"));
    int k = 0;
    while (k < MP_DATA_FACTS && mine[k] == root[k])
        k++;
    if (k == MP_DATA_FACTS)
        return MP_OK;
    char how[160];
    if (k >= MP_DATA_DIGEST)
        snprintf(how, sizeof how, "the same sizes but other training labels or bytes");
    else
        snprintf(how, sizeof how, "%.0f %s against rank 0's %.0f", mine[k],
                 mp_data_fact_names[k], root[k]);
    return mp_fail(MP_EDATA, "rank %d on %s reads other data than rank 0 from data.path \"%s\": "
                   "%s; every rank must read the same files", comm->rank, comm->host,
                   t->cfg->data.path, how);
}

/* The token shards' check, in rounds: each rank checks MP_TOKEN_ROUND pieces (rank r of P the
 * pieces r, r + P, ...) and the ranks agree after each round, so that a bad token found by any
 * rank, or a stop reaching any of them, ends the check on all of them within a round, and each
 * shard is read once by the job rather than once per rank. After a failed round only the rank
 * whose failed piece comes first keeps its failure (the others return MP_OK), so that the token
 * reported is the first bad one in the files' order whatever the number of ranks. */
static mp_status check_tokens(mp_trainer *t)
{
    mp_comm *comm = t->comm;
    const int64_t most = mp_tokens_pieces(&t->train, &t->test); /* agreed: agree_on_data */
    const int64_t ranks = comm->size, step = ranks * MP_TOKEN_ROUND;
    for (int64_t base = 0; base < most; base += step) {
        int64_t at;
        mp_status st = mp_tokens_check(&t->train, &t->test, base + comm->rank, MP_TOKEN_ROUND,
                                       ranks, &at);
        int reporter;
        mp_status all = mp_comm_agree(comm, st, &reporter);
        if (all == MP_OK)
            continue;
        if (all == MP_ECOMM)
            return MP_ECOMM;
        double first = st == all ? -(double)at : -INFINITY; /* MAX of -piece: the lowest */
        MP_TRY(mp_comm_allreduce(comm, &first, 1, MP_F64, MP_REDOP_MAX, "the first bad piece"));
        return st == all && -(double)at != first ? MP_OK : st;
    }
    return MP_OK;
}

/* data.mean and data.std keep every pixel value finite in the input's dtype (mp_pixel_tables,
 * MP_EDATA as the first batch would say), so that set-up and --dry-run find it. Datasets of pixels
 * only: text and tokens are not normalised, HDF5 values are checked as they are read. The same
 * on every rank (the data agreed, the config too). */
static mp_status check_pixels(const mp_trainer *t)
{
    const mp_dataset *split[2] = {&t->train, &t->test}; /* an HDF5 file's may differ */
    for (int k = 0; k < 2; k++) {
        const mp_dataset *d = split[k];
        if (d->count == 0 || d->text || d->tokens || (d->h5 && mp_h5data_float(d)))
            continue;
        double tables[MP_DATA_MAX_CHANNELS * 256]; /* 256 elements of the dtype per channel */
        MP_TRY(mp_pixel_tables(tables, (size_t)d->c, t->mean, t->std,
                               mp_model_input_dtype(&t->model)));
    }
    return MP_OK;
}

mp_status mp_train_check_data(mp_trainer *t)
{
    mp_status st = agree_on_data(t);
    int reporter;
    mp_status all = mp_comm_agree(t->comm, st, &reporter);
    if (all != MP_OK) /* this rank's own: the caller's agreement names whoever failed */
        return all == MP_ECOMM ? MP_ECOMM : st;
    MP_TRY(check_pixels(t));
    return strcmp(t->cfg->data.format, "tokens") == 0 ? check_tokens(t) : MP_OK;
}
