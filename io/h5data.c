/* Image datasets in HDF5 files (io/h5data.h). A split holds the file and its image dataset
 * open (HDF5 ids: the library counts its own references, so each split opens the file itself
 * and closes it with the split), the image geometry, and whether the values are floats; its
 * labels are in the mp_dataset as for every image dataset. A sample is one hyperslab of the
 * image dataset, converted by HDF5 to uint8 or double in memory. */
#include "io/h5data.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/clock.h"
#include "engine/stop.h"
#include "io/fsutil.h"
#include "io/h5_chunks.h"
#include "io/h5_internal.h"
#include "io/memcheck.h"

#define MP_H5DATA_PROBE_S 60 /* seconds the probing child may take */

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MP_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(MP_ASAN)
#include <sanitizer/common_interface_defs.h>
/* In the probing child: a sanitizer's report ends it without the death callback a fuzzer set
 * for the parent (libFuzzer's writes a crash file); the parent reports the child's failure. */
static void child_quiet(void) { __sanitizer_set_death_callback(NULL); }
#else
static void child_quiet(void) {}
#endif

#define MP_H5DATA_MAX_SIDE 4096

/* The probing child's own bounds, whatever happens to the parent that polls it: the stop and
 * ending signals act by default (the parent's handlers only set a flag nobody polls here), it
 * dies with the parent (SIGKILL; a parent already gone: it leaves at once), and SIGALRM ends it
 * a little after the parent would have. */
static void child_bounded(pid_t parent)
{
    const int sigs[] = {SIGTERM, SIGUSR1, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent)
        _exit(1);
    alarm(MP_H5DATA_PROBE_S + 5);
}

struct mp_h5data {
    hid_t file, images;
    int rank;           /* 3 or 4 */
    bool nchw, is_float;
    haddr_t eoa;        /* the file's end as HDF5 allocated it: a shorter file was cut */
    mp_h5_chunks *chunks; /* the images' chunk checks (NULL: not chunked) */
    char path[512];     /* the file */
    char name[256];     /* the image dataset */
};

/* Frees what a load put in d and zeroes it (not mp_dataset_free: io/idx.c calls this file). */
static void drop(mp_dataset *d)
{
    mp_h5data_free(d->h5);
    mp_free(d->labels);
    memset(d, 0, sizeof *d);
}

void mp_h5data_free(mp_h5data *h)
{
    if (!h)
        return;
    mp_h5_chunks_free(h->chunks);
    if (h->images >= 0)
        H5Dclose(h->images);
    if (h->file >= 0)
        H5Fclose(h->file);
    free(h);
}

bool mp_h5data_float(const mp_dataset *d) { return d->h5->is_float; }

const char *mp_h5data_sample_name(const mp_dataset *d, int64_t index, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s: image %lld of %s", d->h5->path, (long long)index, d->h5->name);
    return buf;
}

/* MP_OK unless dataset d is stored compact (inside its object header) with fewer bytes than
 * its dataspace and type need: HDF5 1.10 would read past that buffer (found by fuzz_h5data:
 * tests/fuzz/corpus/h5data/compact_too_small); keeps its values in other files (a virtual
 * dataset, external raw files: a missing or short one reads as fill values, a FIFO blocks the
 * reading thread for ever, and the cut-file check covers this file only); or is contiguous and
 * never written (it would read as the fill value, zeros say; a chunked dataset's missing chunks
 * are io/h5_chunks.h's to find). */
static mp_status storage_ok(hid_t d, const char *path, const char *name)
{
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d), s = H5Dget_space(d);
    H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
    int external = dcpl >= 0 ? H5Pget_external_count(dcpl) : 0;
    bool compact = layout == H5D_COMPACT;
    /* chunked: io/h5_chunks.h counts the stored chunks and looks each up when it is checked */
    bool unwritten = layout == H5D_CONTIGUOUS && H5Dget_storage_size(d) == 0;
    hssize_t points = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    size_t size = t >= 0 ? H5Tget_size(t) : 0;
    hsize_t have = compact ? H5Dget_storage_size(d) : 0;
    MP_H5_CLOSE(dcpl, t, s);
    if (points < 0 || size == 0)
        return mp_fail(MP_EDATA, "%s: %s: unreadable dataspace or type", path, name);
    if (layout == H5D_VIRTUAL || external > 0)
        return mp_fail(MP_EDATA, "%s: %s keeps its values in other files (%s): mpdist reads "
                       "datasets stored in the file itself", path, name,
                       external > 0 ? "external raw files" : "a virtual dataset");
    if (points > 0 && unwritten)
        return mp_fail(MP_EDATA, "%s: %s %s", path, name, MP_H5_UNWRITTEN);
    if (compact && have / size < (hsize_t)points)
        return mp_fail(MP_EDATA, "%s: %s is stored compact in %llu bytes, less than its %lld "
                       "elements of %zu bytes need (damaged)", path, name,
                       (unsigned long long)have, (long long)points, size);
    return MP_OK;
}

/* Set only in the probing child (probe below), a process of one thread: its load skips the
 * chunk checks, a pass over the data that may take long on a large file. */
static bool probing;

/* An external link's traversal callback that refuses it: set on the access lists of every
 * lookup and open, so that no path reaches another file, a soft link to one included. */
static herr_t no_other_file(const char *parent_file, const char *parent_group,
                            const char *child_file, const char *child_object,
                            unsigned *acc_flags, hid_t fapl, void *op_data)
{
    (void)parent_file, (void)parent_group, (void)child_file, (void)child_object;
    (void)acc_flags, (void)fapl;
    *(bool *)op_data = true; /* what the failure that follows means */
    return -1;
}

/* A new access property list of `cls` (link or dataset access) that refuses external links,
 * setting *crossed when it does. */
static hid_t in_file_only(hid_t cls, bool *crossed)
{
    hid_t pl = H5Pcreate(cls);
    if (pl >= 0 && H5Pset_elink_cb(pl, no_other_file, crossed) < 0) {
        H5Pclose(pl);
        pl = -1;
    }
    return pl;
}

/* Opens dataset `name` of file f if it exists (every prefix of its path too: H5Lexists needs
 * the parents), is a dataset and is reached without leaving the file (the access lists lapl and
 * dapl refuse external links; a direct one is named); else MP_EDATA naming it, with HDF5's
 * reason when a lookup fails (a damaged object header) rather than finding nothing. With
 * `chunks`, its chunks are checked too (all of them: a dataset read whole). */
static mp_status open_in_file(hid_t f, const char *path, const char *name, hid_t lapl,
                              hid_t dapl, const bool *crossed, bool chunks, hid_t *out)
{
    char prefix[256];
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof prefix)
        return mp_fail(MP_EDATA, "%s: dataset name \"%s\": expected 1..%zu characters", path,
                       name, sizeof prefix - 1);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && name[i] != '/')
            continue;
        memcpy(prefix, name, i);
        prefix[i] = '\0';
        mp_h5_forget();
        htri_t there = H5Lexists(f, prefix, lapl);
        if (there < 0 && *crossed)
            return mp_fail(MP_EDATA, "%s: %s leads to another file: mpdist reads datasets "
                           "stored in the file itself", path, prefix);
        if (there < 0) /* e.g. a damaged object header on the way, not a missing name */
            return mp_fail(MP_EDATA, "%s: cannot look up %s (%s)", path, prefix,
                           mp_h5_message());
        if (there == 0)
            return mp_fail(MP_EDATA, "%s: no dataset %s (%s is missing)", path, name, prefix);
        H5L_info_t link;
        if (H5Lget_info(f, prefix, &link, lapl) >= 0 && link.type == H5L_TYPE_EXTERNAL)
            return mp_fail(MP_EDATA, "%s: %s is a link to another file: mpdist reads datasets "
                           "stored in the file itself", path, prefix);
    }
    mp_h5_forget();
    hid_t o = H5Oopen(f, name, lapl);
    if (o < 0 && *crossed) /* a soft link through an external one, say */
        return mp_fail(MP_EDATA, "%s: %s leads to another file: mpdist reads datasets stored "
                       "in the file itself", path, name);
    if (o < 0)
        return mp_fail(MP_EDATA, "%s: cannot open %s (%s)", path, name, mp_h5_message());
    bool dataset = H5Iget_type(o) == H5I_DATASET;
    H5Oclose(o);
    if (!dataset)
        return mp_fail(MP_EDATA, "%s: %s is not a dataset", path, name);
    *out = H5Dopen2(f, name, dapl);
    if (*out < 0)
        return mp_fail(MP_EDATA, "%s: cannot open dataset %s (%s)", path, name,
                       mp_h5_message());
    mp_status st = storage_ok(*out, path, name);
    if (st == MP_OK && chunks && !probing)
        st = mp_h5_check_chunks(*out, path, name);
    if (st != MP_OK) {
        H5Dclose(*out);
        *out = -1;
    }
    return st;
}

static mp_status open_dataset(hid_t f, const char *path, const char *name, bool chunks,
                              hid_t *out)
{
    *out = -1;
    bool crossed = false;
    hid_t lapl = in_file_only(H5P_LINK_ACCESS, &crossed);
    hid_t dapl = in_file_only(H5P_DATASET_ACCESS, &crossed);
    mp_status st = lapl >= 0 && dapl >= 0
                       ? open_in_file(f, path, name, lapl, dapl, &crossed, chunks, out)
                       : mp_fail(MP_EDATA, "%s: cannot make HDF5 access lists", path);
    MP_H5_CLOSE(lapl, dapl);
    return st;
}

/* The dimensions of dataset d (*rank of them, from lo to hi <= 4), else MP_EDATA saying what
 * `expect`s. */
static mp_status dims_of(hid_t d, const char *path, const char *name, int lo, int hi,
                         const char *expect, int *rank, hsize_t dims[4])
{
    hid_t s = H5Dget_space(d);
    int r = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    if (r >= lo && r <= hi)
        H5Sget_simple_extent_dims(s, dims, NULL);
    if (s >= 0)
        H5Sclose(s);
    if (r < lo || r > hi)
        return mp_fail(MP_EDATA, "%s: %s has %d dimensions: %s", path, name, r, expect);
    *rank = r;
    return MP_OK;
}

/* Image geometry and value type of split h into d (h, w, c, count). */
static mp_status image_shape(mp_h5data *h, mp_dataset *d)
{
    hsize_t dims[4];
    MP_TRY(dims_of(h->images, h->path, h->name, 3, 4,
                   "images are (N, H, W), (N, H, W, C) or (N, C, H, W)", &h->rank, dims));
    hsize_t hh = dims[1], ww = dims[2], cc = h->rank == 4 ? dims[3] : 1;
    if (h->rank == 4 && h->nchw) {
        cc = dims[1];
        hh = dims[2];
        ww = dims[3];
    }
    if (hh < 1 || ww < 1 || cc < 1 || hh > MP_H5DATA_MAX_SIDE || ww > MP_H5DATA_MAX_SIDE ||
        cc > MP_DATA_MAX_CHANNELS)
        return mp_fail(MP_EDATA, "%s: %s holds images of %llu x %llu x %llu (H x W x C, layout "
                       "%s): H and W must be 1..%d, C 1..%d", h->path, h->name,
                       (unsigned long long)hh, (unsigned long long)ww, (unsigned long long)cc,
                       h->nchw ? "nchw" : "nhwc", MP_H5DATA_MAX_SIDE, MP_DATA_MAX_CHANNELS);
    hid_t t = H5Dget_type(h->images);
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    size_t size = t >= 0 ? H5Tget_size(t) : 0;
    bool u8 = cls == H5T_INTEGER && size == 1 && H5Tget_sign(t) == H5T_SGN_NONE;
    if (t >= 0)
        H5Tclose(t);
    /* HDF5 converts through a buffer of the type's size per element: a damaged type (4 GiB
     * was seen) is refused; x86's long double (16 bytes, numpy's float128) is the widest. */
    if (!u8 && (cls != H5T_FLOAT || size > 16))
        return mp_fail(MP_EDATA, "%s: %s: images must be uint8 (pixels) or floats of at most 16 "
                       "bytes (values)", h->path, h->name);
    h->is_float = cls == H5T_FLOAT;
    d->count = (int64_t)dims[0];
    d->h = (int)hh;
    d->w = (int)ww;
    d->c = (int)cc;
    return MP_OK;
}

/* The labels of split d (count of them, checked against num_classes) into d->labels. */
static mp_status read_labels(mp_dataset *d, hid_t f, const char *path, const char *name,
                             int64_t num_classes, int64_t total)
{
    hid_t l;
    MP_TRY(open_dataset(f, path, name, true, &l));
    int rank = 0;
    hsize_t dims[4];
    mp_status st = dims_of(l, path, name, 1, 1, "labels are (N) integers, one per image", &rank,
                           dims);
    hid_t t = H5Dget_type(l);
    bool integer = t >= 0 && H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) <= 8;
    bool sign = integer && H5Tget_sign(t) != H5T_SGN_NONE; /* uint64 read as such, not clamped */
    if (t >= 0)
        H5Tclose(t);
    if (st == MP_OK && (rank != 1 || !integer || (int64_t)dims[0] != total))
        st = mp_fail(MP_EDATA, "%s: %s must be (N) integers of at most 8 bytes, one per image "
                     "(N = %lld)", path, name, (long long)total);
    int64_t factors[2] = {total, (int64_t)(sizeof(int64_t) + sizeof(int32_t))};
    char what[96];
    snprintf(what, sizeof what, "%lld labels", (long long)total);
    if (st == MP_OK)
        st = mp_data_mem_check(path, what, 2, factors, NULL);
    int64_t *all = st == MP_OK ? malloc((size_t)total * sizeof *all + 1) : NULL;
    if (st == MP_OK && !all)
        st = mp_fail(MP_EDATA, "%s: out of memory for %s", path, what);
    if (st == MP_OK && H5Dread(l, sign ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL,
                               H5P_DEFAULT, all) < 0)
        st = mp_fail(MP_EDATA, "%s: cannot read %s (%s)", path, name, mp_h5_message());
    if (st == MP_OK) {
        d->labels = mp_alloc((size_t)d->count * sizeof *d->labels + 1, MP_MEM_DATA);
        for (int64_t i = 0; st == MP_OK && i < d->count; i++) {
            uint64_t u = (uint64_t)all[i];
            if (sign ? all[i] < 0 || all[i] >= num_classes : u >= (uint64_t)num_classes) {
                char v[32];
                if (sign)
                    snprintf(v, sizeof v, "%lld", (long long)all[i]);
                else
                    snprintf(v, sizeof v, "%llu", (unsigned long long)u);
                st = mp_fail(MP_EDATA, "%s: %s[%lld] is %s, not a class in [0, %lld) "
                             "(data.num_classes)", path, name, (long long)i, v,
                             (long long)num_classes);
            } else {
                d->labels[i] = (int32_t)all[i];
            }
        }
    }
    free(all);
    H5Dclose(l);
    return st;
}

/* MP_OK when the file still holds every byte HDF5 allocated in it (HDF5 reads the bytes past
 * a file's end as zeros, silently), else MP_EDATA. */
static mp_status whole(const mp_h5data *h)
{
    struct stat sb;
    if (stat(h->path, &sb) != 0)
        return mp_fail(MP_EDATA, "%s: %s", h->path, strerror(errno));
    if ((uint64_t)sb.st_size < (uint64_t)h->eoa)
        return mp_fail(MP_EDATA, "%s: holds %lld bytes, but its HDF5 structure ends at byte %llu "
                       "(cut short, or changed since it was loaded)", h->path,
                       (long long)sb.st_size, (unsigned long long)h->eoa);
    return MP_OK;
}

/* Opens one split: file, images, labels. */
static mp_status load_split(mp_dataset *d, const char *path, const mp_h5data_keys *k, bool nchw,
                            int64_t num_classes, int64_t cache_mb, int64_t limit)
{
    mp_h5data *h = calloc(1, sizeof *h);
    if (!h)
        return mp_fail(MP_EDATA, "%s: out of memory", path);
    h->file = h->images = -1;
    h->nchw = nchw;
    snprintf(h->path, sizeof h->path, "%s", path);
    snprintf(h->name, sizeof h->name, "%s", k->images);
    d->h5 = h;
    mp_h5_forget();
    h->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (h->file < 0)
        return mp_fail(MP_EDATA, "%s: not a readable HDF5 file, truncated or damaged (%s)", path,
                       mp_h5_message());
    if (H5Fget_eoa(h->file, &h->eoa) < 0)
        return mp_fail(MP_EDATA, "%s: cannot read the file's size from HDF5 (%s)", path,
                       mp_h5_message());
    MP_TRY(whole(h));
    MP_TRY(open_dataset(h->file, path, k->images, false, &h->images));
    MP_TRY(image_shape(h, d));
    hid_t dapl = H5Dget_access_plist(h->images);
    if (dapl >= 0) { /* reopened with its chunk cache sized: 521 slots, a prime, as HDF5's */
        H5Pset_chunk_cache(dapl, 521, (size_t)cache_mb << 20, 0.75);
        H5Dclose(h->images);
        h->images = H5Dopen2(h->file, k->images, dapl);
        H5Pclose(dapl);
        if (h->images < 0)
            return mp_fail(MP_EDATA, "%s: cannot open dataset %s (%s)", path, k->images,
                           mp_h5_message());
    }
    if (!probing) /* its chunks checked as the loader first reads each row of them */
        MP_TRY(mp_h5_chunks_open(h->images, h->path, h->name, &h->chunks));
    int64_t total = d->count;
    if (total < 1)
        return mp_fail(MP_EDATA, "%s: %s holds no image", path, k->images);
    if (limit > 0 && limit < d->count)
        d->count = limit;
    d->num_classes = (int)num_classes;
    return read_labels(d, h->file, path, k->labels, num_classes, total);
}

/* Both splits into *train and *test, or an error with both zeroed. */
static mp_status load_both(mp_dataset *train, mp_dataset *test, const char *path,
                           const mp_h5data_keys keys[2], bool nchw, int64_t num_classes,
                           int64_t cache_mb, int64_t train_limit, int64_t test_limit)
{
    mp_status st = load_split(train, path, &keys[0], nchw, num_classes, cache_mb, train_limit);
    if (st == MP_OK)
        st = load_split(test, path, &keys[1], nchw, num_classes, cache_mb, test_limit);
    if (st != MP_OK) {
        drop(train);
        drop(test);
    }
    return st;
}

/* HDF5 1.10 trusts a file's structure: a damaged one can make it read through a NULL or past a
 * buffer (fuzz_h5data found a local heap whose size made malloc fail:
 * corpus/h5data/local_heap_huge; and one whose structure makes it loop). So a child process loads
 * the file first, walking the structures the load uses (links, dataset headers, the labels; not the
 * chunks' data, which io/h5_chunks.c checks in the parent: the labels' afterwards, the images' as
 * they are read), and exits; a child killed by a signal (or by a sanitizer's report) leaves the job
 * an error to report, not a crash, and so does one still running after MP_H5DATA_PROBE_S seconds.
 * The parent loads only a file its child loaded or refused. The child touches nothing but HDF5 and
 * leaves with _exit (HDF5's exit-time clean-up is off: mp_h5_quiet), so the parent's open files and
 * MPI are untouched. */
static mp_status probe(const char *path, const mp_h5data_keys keys[2], bool nchw,
                       int64_t num_classes, int64_t cache_mb)
{
    enum { EXIT_BASE = 64 }; /* the child's exit codes: 64 + its status, apart from 1 (ASan) */
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return mp_fail(MP_EDATA, "%s: cannot start the process that checks the file (%s)", path,
                       strerror(errno));
    if (pid == 0) {
        child_quiet();
        child_bounded(parent);
        probing = true;
        mp_dataset tr, te;
        memset(&tr, 0, sizeof tr);
        memset(&te, 0, sizeof te);
        mp_status st = load_both(&tr, &te, path, keys, nchw, num_classes, cache_mb, 0, 0);
        _exit(EXIT_BASE + (int)st);
    }
    /* Polled, so that a file that makes HDF5 loop (MP_H5DATA_PROBE_S) or a stop signal to this
     * process ends the child at once (SIGKILL) with its reason. */
    int status = 0;
    mp_status st = MP_OK;
    for (double t0 = mp_now(); st == MP_OK;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid || (got < 0 && errno != EINTR))
            break;
        st = mp_stop_check("HDF5 checked the file's structure");
        if (st == MP_OK && mp_now() - t0 > MP_H5DATA_PROBE_S)
            st = mp_fail(MP_EDATA, "%s: HDF5 took more than %d s to read the file's structure "
                         "(a loop in a damaged file?)", path, MP_H5DATA_PROBE_S);
        if (st != MP_OK) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                continue;
            return st;
        }
        struct timespec nap = {0, 5000000}; /* 5 ms */
        nanosleep(&nap, NULL);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) >= EXIT_BASE)
        return MP_OK; /* loaded, or refused with a message the parent's load will give */
    if (WIFSIGNALED(status) && mp_stop_requested()) /* the same signal to both: a stop */
        return mp_stop_check("HDF5 checked the file's structure");
    if (WIFSIGNALED(status))
        return mp_fail(MP_EDATA, "%s: HDF5 crashed reading the file's structure (signal %d): "
                       "the file is damaged", path, WTERMSIG(status));
    return mp_fail(MP_EDATA, "%s: HDF5 failed reading the file's structure (exit %d): the file "
                   "is damaged", path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

mp_status mp_h5data_load(mp_dataset *train, mp_dataset *test, const char *path,
                         const mp_h5data_keys keys[2], bool nchw, int64_t num_classes,
                         int64_t cache_mb, int64_t train_limit, int64_t test_limit)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!path || !*path || num_classes < 2 || num_classes > 1000000 || cache_mb < 0)
        return mp_fail(MP_EUSAGE, "hdf5 data: no path, or num_classes %lld or cache %lld MiB out "
                       "of range", (long long)num_classes, (long long)cache_mb);
    mp_h5_quiet();
    const char *why; /* checked without blocking: a FIFO must never reach H5Fopen */
    int fd = mp_open_regular(path, NULL, &why);
    if (fd < 0)
        return mp_fail(MP_EDATA, "%s: %s", path, why);
    close(fd);
    MP_TRY(probe(path, keys, nchw, num_classes, cache_mb));
    return load_both(train, test, path, keys, nchw, num_classes, cache_mb, train_limit,
                     test_limit);
}

mp_status mp_h5data_read(const mp_dataset *d, int64_t index, void *out)
{
    const mp_h5data *h = d->h5;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* HDF5 prints per thread: not on a loader's either */
    MP_TRY(whole(h));
    MP_TRY(mp_h5_chunks_row(h->chunks, (hsize_t)index));
    size_t n = (size_t)d->h * (size_t)d->w * (size_t)d->c, es = h->is_float ? 8 : 1;
    hid_t mem_type = h->is_float ? H5T_NATIVE_DOUBLE : H5T_NATIVE_UINT8;
    hsize_t start[4] = {(hsize_t)index, 0, 0, 0}, count[4] = {1, 1, 1, 1};
    hsize_t chw[3] = {(hsize_t)d->c, (hsize_t)d->h, (hsize_t)d->w};
    hsize_t hwc[3] = {(hsize_t)d->h, (hsize_t)d->w, (hsize_t)d->c};
    bool nchw = h->nchw && h->rank == 4; /* (N, H, W) is one channel whatever the layout */
    for (int k = 1; k < h->rank; k++)
        count[k] = nchw ? chw[k - 1] : hwc[k - 1];
    bool transpose = nchw && d->c > 1;
    void *buf = transpose ? malloc(n * es) : out;
    hid_t fs = H5Dget_space(h->images);
    hsize_t flat = (hsize_t)n;
    hid_t ms = H5Screate_simple(1, &flat, NULL);
    bool ok = buf && fs >= 0 && ms >= 0 &&
              H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
              H5Dread(h->images, mem_type, ms, fs, H5P_DEFAULT, buf) >= 0;
    MP_H5_CLOSE(ms, fs);
    if (ok && transpose) {
        size_t hw = (size_t)d->h * (size_t)d->w, c = (size_t)d->c;
        for (size_t ch = 0; ch < c; ch++)
            for (size_t p = 0; p < hw; p++)
                memcpy((char *)out + (p * c + ch) * es, (char *)buf + (ch * hw + p) * es, es);
    }
    if (transpose)
        free(buf);
    if (!ok) {
        H5Eclear2(H5E_DEFAULT);
        return mp_fail(MP_EDATA, "%s: reading image %lld of %s failed (the file changed since "
                       "it was loaded, or is damaged)", h->path, (long long)index, h->name);
    }
    for (size_t i = 0; h->is_float && i < n; i++) /* inf or NaN would only skip steps later */
        if (!isfinite(((const double *)out)[i])) {
            size_t c = (size_t)d->c, w = (size_t)d->w;
            return mp_fail(MP_EDATA, "%s: image %lld of %s holds %g at row %zu, column %zu, "
                           "channel %zu: values must be finite", h->path, (long long)index,
                           h->name, ((const double *)out)[i], i / c / w, i / c % w, i % c);
        }
    return MP_OK;
}
