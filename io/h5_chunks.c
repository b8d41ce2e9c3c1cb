/* A check of a chunked HDF5 dataset's stored chunks before HDF5 reads them (io/h5_chunks.h).
 * HDF5 1.10 trusts a chunk's filtered bytes: a chunk that inflates to fewer bytes than the
 * chunk's size is then read past its buffer (fuzz_h5data found it: corpus/h5data/
 * chunk_inflates_short). So each chunk is read raw once (H5Dread_chunk), its pipeline undone
 * here in reverse order as HDF5 would (Fletcher32's 4 bytes off the end, zlib's inflate;
 * shuffling keeps the size), and must come to exactly the chunk's size. */
#include "io/h5_chunks.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

mp_status mp_h5_check_chunks(hid_t d, const char *path, const char *name)
{
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d), s = H5Dget_space(d);
    mp_status st = MP_OK;
    uint8_t *raw = NULL, *plain = NULL;
    if (dcpl < 0 || t < 0 || s < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED)
        goto out;
    hsize_t cdims[H5S_MAX_RANK], dims[H5S_MAX_RANK], bytes = H5Tget_size(t);
    int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims);
    if (rank < 1 || H5Sget_simple_extent_dims(s, dims, NULL) != rank) {
        st = mp_fail(MP_EDATA, "%s: %s: chunk and dataspace ranks disagree", path, name);
        goto out;
    }
    for (int k = 0; k < rank && bytes <= MP_H5_MAX_CHUNK; k++)
        bytes = cdims[k] <= MP_H5_MAX_CHUNK ? bytes * cdims[k] : MP_H5_MAX_CHUNK + 1;
    if (bytes == 0 || bytes > MP_H5_MAX_CHUNK) {
        st = mp_fail(MP_EDATA, "%s: %s has chunks of %llu bytes: expected 1..%llu", path, name,
                     (unsigned long long)bytes, (unsigned long long)MP_H5_MAX_CHUNK);
        goto out;
    }
    H5Z_filter_t ids[H5Z_MAX_NFILTERS];
    int nf;
    st = filters(dcpl, path, name, ids, &nf);
    if (st != MP_OK)
        goto out;
    if (H5Dget_storage_size(d) == 0) { /* none stored: HDF5 would read the fill value */
        if (H5Sget_simple_extent_npoints(s) > 0)
            st = mp_fail(MP_EDATA, "%s: %s %s", path, name, MP_H5_UNWRITTEN);
        goto out;
    }
    plain = malloc(bytes + 8);
    hsize_t stored = 0, grid = 1;
    if (!plain || H5Dget_num_chunks(d, s, &stored) < 0) { /* 1.10.8 refuses H5S_ALL here */
        st = mp_fail(MP_EDATA, "%s: %s: %s", path, name,
                     plain ? "the chunk index is unreadable" : "out of memory for a chunk");
        goto out;
    }
    for (int k = 0; k < rank && grid <= 4 * stored + 4096; k++)
        grid *= cdims[k] ? (dims[k] + cdims[k] - 1) / cdims[k] : 1;
    /* Every chunk of the grid by its coordinates (a lookup in the chunk index each, where the
     * chunk's number would walk the index from its start every time); a grid far larger than
     * the chunks stored (a damaged or hostile extent) would take forever: refused. */
    if (grid > 4 * stored + 4096) {
        st = mp_fail(MP_EDATA, "%s: %s: %llu chunks stored in a grid of more than %llu: not "
                     "read (damaged?)", path, name, (unsigned long long)stored,
                     (unsigned long long)(4 * stored + 4096));
        goto out;
    }
    hsize_t at[H5S_MAX_RANK] = {0};
    for (bool more = true; st == MP_OK && more;) {
        hsize_t off[H5S_MAX_RANK], size = 0;
        for (int k = 0; k < rank; k++)
            off[k] = at[k] * cdims[k];
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        if (H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) < 0)
            st = mp_fail(MP_EDATA, "%s: %s: the chunk index is unreadable", path, name);
        else if (addr == HADDR_UNDEF) /* never written: it would read as the fill value */
            st = mp_fail(MP_EDATA, "%s: %s %s", path, name, MP_H5_UNWRITTEN);
        else {
            uint8_t *r = size <= 2 * bytes + 4096 ? realloc(raw, size + 1) : NULL;
            uint32_t fm = 0;
            if (r)
                raw = r;
            if (!r || H5Dread_chunk(d, H5P_DEFAULT, off, &fm, raw) < 0 ||
                unfiltered(ids, nf, fm, raw, (int64_t)size, plain, bytes + 8) != (int64_t)bytes)
                st = mp_fail(MP_EDATA, "%s: %s: the chunk at element %llu holds %llu bytes "
                             "that do not unpack to the chunk's %llu (damaged)", path, name,
                             (unsigned long long)off[0], (unsigned long long)size,
                             (unsigned long long)bytes);
        }
        more = false; /* the next coordinate, last dimension fastest */
        for (int k = rank - 1; k >= 0 && !more; k--) {
            if (++at[k] * cdims[k] < dims[k])
                more = true;
            else
                at[k] = 0;
        }
    }
out:
    free(raw);
    free(plain);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (t >= 0)
        H5Tclose(t);
    if (s >= 0)
        H5Sclose(s);
    return st;
}
