/* A check of a chunked HDF5 dataset's stored chunks before HDF5 reads them (io/h5_chunks.h).
 * HDF5 1.10 trusts a chunk's filtered bytes: a chunk that inflates to fewer bytes than the
 * chunk's size is then read past its buffer (fuzz_h5data found it: corpus/h5data/
 * chunk_inflates_short). So each chunk is read raw once (H5Dread_chunk), unfiltered here as
 * HDF5 would (Fletcher32's 4 bytes off the end, then zlib's inflate; shuffling keeps the
 * size), and must come to exactly the chunk's size. */
#include "io/h5_chunks.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MP_H5_MAX_CHUNK ((hsize_t)1 << 28) /* bytes of one chunk, unfiltered */

/* The filters of dcpl, in order: MP_OK when each is deflate, shuffle or Fletcher32 (else
 * MP_EDATA naming it); *deflate and *fletcher are their places in the pipeline (-1: none). */
static mp_status filters(hid_t dcpl, const char *path, const char *name, int *deflate,
                         int *fletcher)
{
    *deflate = *fletcher = -1;
    int n = H5Pget_nfilters(dcpl);
    for (int i = 0; i < n; i++) {
        unsigned flags, conf;
        size_t nv = 0;
        char fname[64] = "";
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nv, NULL, sizeof fname,
                                         fname, &conf);
        if (id == H5Z_FILTER_DEFLATE)
            *deflate = i;
        else if (id == H5Z_FILTER_FLETCHER32)
            *fletcher = i;
        else if (id != H5Z_FILTER_SHUFFLE)
            return mp_fail(MP_EDATA, "%s: %s is stored with HDF5 filter %d (%s): only gzip "
                           "(deflate), shuffle and fletcher32 are read", path, name, (int)id,
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

mp_status mp_h5_check_chunks(hid_t d, const char *path, const char *name)
{
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d);
    mp_status st = MP_OK;
    if (dcpl < 0 || t < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED)
        goto out;
    hsize_t cdims[H5S_MAX_RANK], bytes = H5Tget_size(t);
    int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims);
    for (int k = 0; k < rank && bytes <= MP_H5_MAX_CHUNK; k++)
        bytes = cdims[k] <= MP_H5_MAX_CHUNK ? bytes * cdims[k] : MP_H5_MAX_CHUNK + 1;
    if (rank < 1 || bytes == 0 || bytes > MP_H5_MAX_CHUNK) {
        st = mp_fail(MP_EDATA, "%s: %s has chunks of %llu bytes: expected 1..%llu", path, name,
                     (unsigned long long)bytes, (unsigned long long)MP_H5_MAX_CHUNK);
        goto out;
    }
    int deflate, fletcher;
    st = filters(dcpl, path, name, &deflate, &fletcher);
    hsize_t nchunks = 0; /* none stored (never written: HDF5 reads the fill value) */
    if (st == MP_OK && H5Dget_storage_size(d) > 0 && H5Dget_num_chunks(d, H5S_ALL, &nchunks) < 0)
        st = mp_fail(MP_EDATA, "%s: %s: cannot list its chunks", path, name);
    uint8_t *raw = NULL, *plain = st == MP_OK ? malloc(bytes + 1) : NULL;
    if (st == MP_OK && !plain)
        st = mp_fail(MP_EDATA, "%s: %s: out of memory for a chunk", path, name);
    for (hsize_t i = 0; st == MP_OK && i < nchunks; i++) {
        hsize_t off[H5S_MAX_RANK], size = 0;
        unsigned mask = 0;
        haddr_t addr;
        if (H5Dget_chunk_info(d, H5S_ALL, i, off, &mask, &addr, &size) < 0 ||
            size > 2 * bytes + 4096) {
            st = mp_fail(MP_EDATA, "%s: %s: chunk %llu is unreadable or too large (%llu bytes)",
                         path, name, (unsigned long long)i, (unsigned long long)size);
            break;
        }
        uint8_t *r = realloc(raw, size + 1);
        if (!r) {
            st = mp_fail(MP_EDATA, "%s: %s: out of memory for a chunk", path, name);
            break;
        }
        raw = r;
        uint32_t filter_mask = 0;
        if (H5Dread_chunk(d, H5P_DEFAULT, off, &filter_mask, raw) < 0) {
            st = mp_fail(MP_EDATA, "%s: %s: chunk %llu cannot be read", path, name,
                         (unsigned long long)i);
            break;
        }
        /* Bit k of the chunk's mask set: the pipeline's filter k was skipped for it. */
        (void)addr;
        hsize_t n = size;
        if (fletcher >= 0 && !(filter_mask & (1u << fletcher)) && n >= 4)
            n -= 4;
        int64_t got = (int64_t)n;
        if (deflate >= 0 && !(filter_mask & (1u << deflate)))
            got = inflate_all(raw, (size_t)n, plain, (size_t)bytes + 1);
        if (got != (int64_t)bytes)
            st = mp_fail(MP_EDATA, "%s: %s: chunk %llu holds %lld bytes once unfiltered, not "
                         "the chunk's %llu (damaged)", path, name, (unsigned long long)i,
                         (long long)got, (unsigned long long)bytes);
    }
    free(raw);
    free(plain);
out:
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (t >= 0)
        H5Tclose(t);
    return st;
}
