/* A check of a chunked HDF5 dataset's stored chunks before HDF5 reads them (io/h5_chunks.h).
 * HDF5 1.10 trusts a chunk's filtered bytes: a chunk that inflates to fewer bytes than the
 * chunk's size is then read past its buffer (fuzz_h5data found it: corpus/h5data/
 * chunk_inflates_short). So each chunk is read raw once (H5Dread_chunk), its pipeline undone
 * here in reverse order as HDF5 would (Fletcher32's 4 bytes off the end, zlib's inflate;
 * shuffling keeps the size), and must come to exactly the chunk's size. */
#include "io/h5_chunks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/stop.h"
#include "io/h5_internal.h"
#include "io/h5file.h"

#define MP_H5_MAX_CHUNK ((hsize_t)1 << 28) /* bytes of one chunk, unfiltered */

/* The pipeline of dcpl: its filters' ids in order (*n of them, at most H5Z_MAX_NFILTERS); MP_OK
 * when each is deflate, shuffle or Fletcher32, else MP_EDATA naming it. */
static mp_status filters(hid_t dcpl, const char *path, const char *name, H5Z_filter_t *ids,
                         int *n)
{
    *n = H5Pget_nfilters(dcpl);
    if (*n < 0 || *n > H5Z_MAX_NFILTERS)
        return mp_fail(MP_EDATA, "%s: %s: an unreadable filter pipeline", path, name);
    for (int i = 0; i < *n; i++) {
        unsigned flags, conf;
        size_t nv = 0;
        char fname[64] = "";
        ids[i] = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nv, NULL, sizeof fname, fname, &conf);
        if (ids[i] != H5Z_FILTER_DEFLATE && ids[i] != H5Z_FILTER_FLETCHER32 &&
            ids[i] != H5Z_FILTER_SHUFFLE)
            return mp_fail(MP_EDATA, "%s: %s is stored with HDF5 filter %d (%s): only gzip "
                           "(deflate), shuffle and fletcher32 are read", path, name, (int)ids[i],
                           fname[0] ? fname : "unknown");
    }
    return MP_OK;
}

/* Inflates in (n bytes) into out (cap bytes): the bytes it gave, or -1 for a bad stream. */
static int64_t inflate_all(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return -1;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_FINISH);
    int64_t got = (int64_t)z.total_out;
    inflateEnd(&z);
    return rc == Z_STREAM_END ? got : -1;
}

/* The bytes a stored chunk of `size` bytes (raw, cap bytes of room in plain) holds once its
 * pipeline (ids[0..n), filters whose bit is set in mask skipped) is undone in reverse order:
 * Fletcher32 takes its 4 bytes off the end, deflate inflates into plain, shuffling keeps the
 * size. -1 for a stream that does not inflate. */
static int64_t unfiltered(const H5Z_filter_t *ids, int n, unsigned mask, uint8_t *raw,
                          int64_t size, uint8_t *plain, size_t cap)
{
    uint8_t *cur = raw;
    for (int k = n - 1; k >= 0 && size >= 0; k--) {
        if (mask & (1u << k))
            continue;
        if (ids[k] == H5Z_FILTER_FLETCHER32)
            size = size >= 4 ? size - 4 : -1;
        else if (ids[k] == H5Z_FILTER_DEFLATE && cur == raw)
            size = inflate_all(cur, (size_t)size, plain, cap), cur = plain;
        else if (ids[k] == H5Z_FILTER_DEFLATE)
            size = -1; /* deflate twice: not a pipeline anyone writes */
    }
    return size;
}

struct mp_h5_chunks {
    hid_t d;                      /* the caller's */
    const char *path, *name;      /* the caller's, for messages */
    int rank, nf;
    hsize_t cdims[H5S_MAX_RANK], dims[H5S_MAX_RANK], bytes;
    H5Z_filter_t ids[H5Z_MAX_NFILTERS];
    hsize_t rows;                 /* chunks along the first dimension */
    atomic_uchar *done;           /* per row of chunks: checked and found whole */
    pthread_mutex_t mu;           /* one row checked at a time: its buffers, once */
};

/* The geometry, filters and stored count of c->d; MP_OK, or MP_EDATA (see the header). */
static mp_status plan(mp_h5_chunks *c, hid_t dcpl, hid_t t, hid_t s)
{
    const char *path = c->path, *name = c->name;
    c->bytes = H5Tget_size(t);
    c->rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, c->cdims);
    if (c->rank < 1 || H5Sget_simple_extent_dims(s, c->dims, NULL) != c->rank)
        return mp_fail(MP_EDATA, "%s: %s: chunk and dataspace ranks disagree", path, name);
    for (int k = 0; k < c->rank && c->bytes <= MP_H5_MAX_CHUNK; k++)
        c->bytes = c->cdims[k] <= MP_H5_MAX_CHUNK ? c->bytes * c->cdims[k] : MP_H5_MAX_CHUNK + 1;
    if (c->bytes == 0 || c->bytes > MP_H5_MAX_CHUNK)
        return mp_fail(MP_EDATA, "%s: %s has chunks of %llu bytes: expected 1..%llu", path,
                       name, (unsigned long long)c->bytes, (unsigned long long)MP_H5_MAX_CHUNK);
    MP_TRY(filters(dcpl, path, name, c->ids, &c->nf));
    if (H5Sget_simple_extent_npoints(s) == 0)
        return MP_OK;
    hsize_t stored = 0, grid = 1;
    if (H5Dget_storage_size(c->d) == 0) /* none stored: HDF5 would read the fill value */
        return mp_fail(MP_EDATA, "%s: %s %s", path, name, MP_H5_UNWRITTEN);
    if (H5Dget_num_chunks(c->d, s, &stored) < 0) /* 1.10.8 refuses H5S_ALL here */
        return mp_fail(MP_EDATA, "%s: %s: the chunk index is unreadable", path, name);
    for (int k = 0; k < c->rank && grid <= 4 * stored + 4096; k++)
        grid *= c->cdims[k] ? (c->dims[k] + c->cdims[k] - 1) / c->cdims[k] : 1;
    /* Each chunk is looked up by its coordinates (a lookup in the chunk index each, where the
     * chunk's number would walk the index from its start every time); a grid far larger than
     * the chunks stored (a damaged or hostile extent) would take forever: refused. Fewer
     * chunks stored than the grid has: some values never written. */
    if (grid > 4 * stored + 4096)
        return mp_fail(MP_EDATA, "%s: %s: %llu chunks stored in a grid of more than %llu: not "
                       "read (damaged?)", path, name, (unsigned long long)stored,
                       (unsigned long long)(4 * stored + 4096));
    if (stored < grid)
        return mp_fail(MP_EDATA, "%s: %s %s", path, name, MP_H5_UNWRITTEN);
    c->rows = c->cdims[0] ? (c->dims[0] + c->cdims[0] - 1) / c->cdims[0] : 0;
    c->done = calloc(c->rows + 1, sizeof *c->done);
    return c->done ? MP_OK : mp_fail(MP_EDATA, "%s: %s: out of memory", path, name);
}

mp_status mp_h5_chunks_open(hid_t d, const char *path, const char *name, mp_h5_chunks **out)
{
    *out = NULL;
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d), s = H5Dget_space(d);
    mp_h5_chunks *c = NULL;
    mp_status st = MP_OK;
    if (dcpl >= 0 && t >= 0 && s >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        c = calloc(1, sizeof *c);
        if (c) {
            *c = (mp_h5_chunks){.d = d, .path = path, .name = name};
            pthread_mutex_init(&c->mu, NULL);
            st = plan(c, dcpl, t, s);
        } else {
            st = mp_fail(MP_EDATA, "%s: %s: out of memory", path, name);
        }
    }
    MP_H5_CLOSE(dcpl, t, s);
    if (st == MP_OK)
        *out = c;
    else
        mp_h5_chunks_free(c);
    return st;
}

void mp_h5_chunks_free(mp_h5_chunks *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->done);
    free(c);
}

/* Checks the stored chunk at element offset off (raw into *raw, grown; plain has bytes + 8).
 * H5Dget_chunk_storage_size looks the chunk up in the index; HDF5 1.10's
 * H5Dget_chunk_info_by_coord walks the whole index instead (42 ms a call at a million chunks:
 * a file of one chunk per image trained at 21 images/s). A chunk never written has no storage:
 * the call fails, as it does for a damaged index. */
static mp_status check_one(const mp_h5_chunks *c, const hsize_t *off, uint8_t **raw,
                           uint8_t *plain)
{
    int64_t at[H5S_MAX_RANK];
    for (int k = 0; k < c->rank; k++)
        at[k] = (int64_t)off[k];
    char where[160];
    mp_h5_shape_text(c->rank, at, where, sizeof where);
    hsize_t size = 0;
    if (H5Dget_chunk_storage_size(c->d, off, &size) < 0 || size == 0)
        return mp_fail(MP_EDATA, "%s: %s: the chunk at %s is not in the chunk index (never "
                       "written, or the index is damaged: it would read as the fill value)",
                       c->path, c->name, where);
    uint8_t *r = size <= 2 * c->bytes + 4096 ? realloc(*raw, size + 1) : NULL;
    uint32_t fm = 0;
    if (r)
        *raw = r;
    if (!r || H5Dread_chunk(c->d, H5P_DEFAULT, off, &fm, r) < 0 ||
        unfiltered(c->ids, c->nf, fm, r, (int64_t)size, plain, c->bytes + 8) !=
            (int64_t)c->bytes)
        return mp_fail(MP_EDATA, "%s: %s: the chunk at %s holds %llu bytes that do not unpack "
                       "to the chunk's %llu (damaged)", c->path, c->name, where,
                       (unsigned long long)size, (unsigned long long)c->bytes);
    return MP_OK;
}

mp_status mp_h5_chunks_row(mp_h5_chunks *c, hsize_t element)
{
    if (!c || !c->rows || element >= c->dims[0])
        return MP_OK;
    hsize_t row = element / c->cdims[0];
    if (atomic_load(&c->done[row]))
        return MP_OK;
    pthread_mutex_lock(&c->mu);
    if (atomic_load(&c->done[row])) { /* another thread checked it meanwhile */
        pthread_mutex_unlock(&c->mu);
        return MP_OK;
    }
    uint8_t *raw = NULL, *plain = malloc(c->bytes + 8);
    mp_status st = plain ? MP_OK : mp_fail(MP_EDATA, "%s: %s: out of memory for a chunk",
                                           c->path, c->name);
    hsize_t at[H5S_MAX_RANK] = {row};
    for (bool more = true; st == MP_OK && more;) {
        hsize_t off[H5S_MAX_RANK];
        for (int k = 0; k < c->rank; k++)
            off[k] = at[k] * c->cdims[k];
        st = check_one(c, off, &raw, plain);
        more = false; /* the next chunk of the row, last dimension fastest */
        for (int k = c->rank - 1; k >= 1 && !more; k--) {
            if (++at[k] * c->cdims[k] < c->dims[k])
                more = true;
            else
                at[k] = 0;
        }
    }
    free(raw);
    free(plain);
    if (st == MP_OK)
        atomic_store(&c->done[row], 1);
    pthread_mutex_unlock(&c->mu);
    return st;
}

mp_status mp_h5_check_chunks(hid_t d, const char *path, const char *name)
{
    mp_h5_chunks *c;
    MP_TRY(mp_h5_chunks_open(d, path, name, &c));
    mp_status st = MP_OK;
    char doing[600];
    snprintf(doing, sizeof doing, "checking the chunks of %.280s in %.280s", name, path);
    for (hsize_t r = 0; c && st == MP_OK && r < c->rows; r++) {
        st = mp_stop_check(doing);
        if (st == MP_OK)
            st = mp_h5_chunks_row(c, r * c->cdims[0]);
    }
    mp_h5_chunks_free(c);
    return st;
}
