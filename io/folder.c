/* Image folders (io/folder.h). A split keeps its files' paths and the sample geometry; the
 * mp_dataset keeps the labels. A batch reads each file whole, decodes it (io/image_decode.c),
 * maps every output pixel through the sample's crop box (and flip) to a source position,
 * resamples bilinearly, rounds to a byte as an image library would, and normalises. */
#include "io/folder.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "engine/rng.h"
#include "engine/stop.h"
#include "io/augment.h"
#include "io/fsutil.h"
#include "io/image_decode.h"

#define MP_FOLDER_SALT 0x3c6ef372fe94f82bull
#define MP_FOLDER_MAX_FILE ((long long)64 << 20) /* bytes of one image file */

struct mp_folder {
    char **paths;  /* (count) malloc'd */
    int64_t count; /* paths held (the whole split, before any limit) */
    int size, channels, resize;
};

typedef struct name_list {
    char **names;
    int n;
} name_list;

static void names_free(name_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether a file name is an image's: *.jpg, *.jpeg or *.png in any case, not hidden. */
static bool image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (name[0] == '.' || !dot)
        return false;
    char ext[8] = "";
    for (int i = 0; i < 7 && dot[i + 1]; i++)
        ext[i] = (char)tolower((unsigned char)dot[i + 1]);
    return strcmp(ext, "jpg") == 0 || strcmp(ext, "jpeg") == 0 || strcmp(ext, "png") == 0;
}

/* The entries of dir that are directories (dirs) or image files (!dirs), sorted. An entry with
 * an image's name that is not a regular file (a dangling or looping link, a directory) is an
 * error, as it would be when read. */
static mp_status list(const char *dir, bool dirs, name_list *out)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d)
        return mp_fail(MP_EDATA, "%s: %s", dir, strerror(errno));
    int cap = 0;
    mp_status st = MP_OK;
    char path[4096];
    char doing[600];
    snprintf(doing, sizeof doing, "listing %.560s", dir);
    for (struct dirent *e; st == MP_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if ((st = mp_stop_check(doing)) != MP_OK)
            break;
        int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        bool image = !dirs && image_name(e->d_name);
        struct stat sb;
        if (image && (w < 0 || (size_t)w >= sizeof path)) {
            st = mp_fail(MP_EDATA, "%s/%s: path too long", dir, e->d_name);
            break;
        }
        if (image) {
            int failed = stat(path, &sb) != 0 ? errno : 0;
            if (failed || !S_ISREG(sb.st_mode)) {
                st = failed ? mp_fail(MP_EDATA, "%s: %s", path, strerror(failed))
                            : mp_fail(MP_EDATA, "%s: not a regular file", path);
                break;
            }
        } else {
            /* files beside the classes are skipped; a class path too long to name too */
            int failed = !dirs || w < 0 || (size_t)w >= sizeof path ? -1
                         : stat(path, &sb) != 0                    ? errno
                                                                   : 0;
            struct stat lsb;
            if (failed > 0 && lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode)) {
                /* a class would be missing and the later ones renumbered */
                st = mp_fail(MP_EDATA, "%s: a link to a class folder that cannot be reached "
                             "(%s)", path, strerror(failed));
                break;
            }
            if (failed != 0 || !S_ISDIR(sb.st_mode))
                continue;
        }
        if (out->n == cap) {
            cap = cap ? 2 * cap : 64;
            char **m = realloc(out->names, (size_t)cap * sizeof *m);
            if (!m) {
                st = mp_fail(MP_EDATA, "%s: out of memory listing it", dir);
                break;
            }
            out->names = m;
        }
        if (!(out->names[out->n] = strdup(e->d_name)))
            st = mp_fail(MP_EDATA, "%s: out of memory listing it", dir);
        else
            out->n++;
    }
    closedir(d);
    if (out->n > 1)
        qsort(out->names, (size_t)out->n, sizeof *out->names, name_cmp);
    if (st != MP_OK)
        names_free(out);
    return st;
}

/* Appends dir/CLASS/FILE of every image of split directory dir to f and its label to *labels
 * (grown with realloc); classes are looked up among the training classes `classes`. With
 * `whole` (the training split) a class directory without an image is an error, as in
 * torchvision's ImageFolder: a link to the folder's root, say, is not taken for a class. */
static mp_status add_split(mp_folder *f, int32_t **labels, const char *dir,
                           const name_list *classes, bool whole)
{
    name_list sub;
    MP_TRY(list(dir, true, &sub));
    mp_status st = MP_OK;
    char cdir[4096];
    for (int k = 0; st == MP_OK && k < sub.n; k++) {
        char **hit = bsearch(&sub.names[k], classes->names, (size_t)classes->n,
                             sizeof *classes->names, name_cmp);
        if (!hit) {
            st = mp_fail(MP_EDATA, "%s/%s: a class the training split does not have", dir,
                         sub.names[k]);
            break;
        }
        int w = snprintf(cdir, sizeof cdir, "%s/%s", dir, sub.names[k]);
        if (w < 0 || (size_t)w >= sizeof cdir) {
            st = mp_fail(MP_EDATA, "%s/%s: path too long", dir, sub.names[k]);
            break;
        }
        name_list files;
        st = list(cdir, false, &files);
        if (st == MP_OK && whole && files.n == 0)
            st = mp_fail(MP_EDATA, "%s: a class directory with no image (*.jpg, *.jpeg, *.png)",
                         cdir);
        char **p = st == MP_OK ? realloc(f->paths, (size_t)(f->count + files.n + 1) * sizeof *p)
                               : NULL;
        int32_t *l = p ? realloc(*labels, (size_t)(f->count + files.n + 1) * sizeof *l) : NULL;
        if (p)
            f->paths = p;
        if (l)
            *labels = l;
        if (st == MP_OK && (!p || !l))
            st = mp_fail(MP_EDATA, "%s: out of memory listing it", cdir);
        for (int i = 0; st == MP_OK && i < files.n; i++) {
            size_t len = strlen(cdir) + strlen(files.names[i]) + 2;
            char *path = malloc(len);
            if (!path) {
                st = mp_fail(MP_EDATA, "%s: out of memory listing it", cdir);
                break;
            }
            snprintf(path, len, "%s/%s", cdir, files.names[i]);
            f->paths[f->count] = path;
            (*labels)[f->count++] = (int32_t)(hit - classes->names);
        }
        names_free(&files);
    }
    names_free(&sub);
    return st;
}

const char *mp_folder_name(const mp_dataset *d, int64_t i)
{
    const char *p = d->folder->paths[i], *name = strrchr(p, '/');
    if (!name)
        return p;
    const char *cls = name;
    while (cls > p && cls[-1] != '/')
        cls--;
    return cls;
}

void mp_folder_free(mp_folder *f)
{
    if (!f)
        return;
    for (int64_t i = 0; i < f->count; i++)
        free(f->paths[i]);
    free(f->paths);
    free(f);
}

/* Frees what a load put in d and zeroes it (not mp_dataset_free: io/idx.c calls this file). */
static void drop(mp_dataset *d)
{
    mp_folder_free(d->folder);
    mp_free(d->labels);
    memset(d, 0, sizeof *d);
}

static mp_status load_split(mp_dataset *d, const char *root, const char *split,
                            const name_list *classes, int size, int channels, int resize,
                            int64_t limit)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, split);
    MP_TRY(mp_check_dir(dir));
    mp_folder *f = calloc(1, sizeof *f);
    if (!f)
        return mp_fail(MP_EDATA, "%s: out of memory", dir);
    f->size = size;
    f->channels = channels;
    f->resize = resize > 0 ? resize : (int)(size / 0.875);
    d->folder = f;
    int32_t *labels = NULL;
    mp_status st = add_split(f, &labels, dir, classes, strcmp(split, "train") == 0);
    if (st == MP_OK && f->count == 0)
        st = mp_fail(MP_EDATA, "%s: no image (*.jpg, *.jpeg, *.png) in its class directories",
                     dir);
    if (st == MP_OK) {
        d->count = limit > 0 && limit < f->count ? limit : f->count;
        d->h = d->w = size;
        d->c = channels;
        d->labels = mp_alloc((size_t)d->count * sizeof *d->labels, MP_MEM_DATA);
        memcpy(d->labels, labels, (size_t)d->count * sizeof *d->labels);
    }
    free(labels);
    return st;
}

mp_status mp_folder_load(mp_dataset *train, mp_dataset *test, const char *root, int size,
                         int channels, int resize, int64_t num_classes, int64_t train_limit,
                         int64_t test_limit)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!root || !*root || size < 8 || size > 1024 || (channels != 1 && channels != 3) ||
        resize < 0 || resize > 4096 || (resize > 0 && resize < size))
        return mp_fail(MP_EUSAGE, "image folder: size %d (8..1024), channels %d (1 or 3) or "
                       "resize %d (0, or size..4096) out of range", size, channels, resize);
    MP_TRY(mp_check_dir(root));
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/train", root);
    MP_TRY(mp_check_dir(dir));
    name_list classes;
    MP_TRY(list(dir, true, &classes));
    mp_status st = MP_OK;
    if (classes.n == 0)
        st = mp_fail(MP_EDATA, "%s: no class directories", dir);
    else if (classes.n > num_classes)
        st = mp_fail(MP_EDATA, "%s: %d classes, more than data.num_classes = %lld", dir,
                     classes.n, (long long)num_classes);
    if (st == MP_OK)
        st = load_split(train, root, "train", &classes, size, channels, resize, train_limit);
    if (st == MP_OK)
        st = load_split(test, root, "val", &classes, size, channels, resize, test_limit);
    names_free(&classes);
    if (st == MP_OK) {
        train->num_classes = test->num_classes = (int)num_classes;
        return MP_OK;
    }
    drop(train);
    drop(test);
    return st;
}

/* The source box (y, x, height, width, in source pixels) of a sample of an h x w image, and
 * whether it is flipped. */
typedef struct box {
    double y, x, h, w;
    bool flip;
} box;

/* torchvision's RandomResizedCrop(scale = (0.08, 1), ratio = (3/4, 4/3)) and a flip. */
static box random_box(int h, int w, uint64_t seed, int64_t epoch, int64_t index)
{
    mp_rng r;
    mp_rng_seed(&r, seed ^ MP_FOLDER_SALT, ((uint64_t)epoch << 32) + (uint64_t)index);
    double area = (double)h * w, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
    box b = {0, 0, h, w, false};
    bool found = false;
    for (int t = 0; t < 10 && !found; t++) {
        double target = area * (0.08 + 0.92 * mp_rng_uniform(&r));
        double ar = exp(lo + (hi - lo) * mp_rng_uniform(&r));
        /* Python's round(), as torchvision's: halves to even */
        int cw = (int)nearbyint(sqrt(target * ar)), ch = (int)nearbyint(sqrt(target / ar));
        if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
            b.y = (double)mp_rng_below(&r, (uint64_t)(h - ch + 1));
            b.x = (double)mp_rng_below(&r, (uint64_t)(w - cw + 1));
            b.h = ch;
            b.w = cw;
            found = true;
        }
    }
    if (!found) { /* the centre crop at the nearest allowed aspect ratio */
        double in = (double)w / h;
        b.w = in < 0.75 ? w : in > 4.0 / 3.0 ? nearbyint(h * 4.0 / 3.0) : w;
        b.h = in < 0.75 ? nearbyint(w / 0.75) : h;
        b.y = floor((h - b.h) / 2);
        b.x = floor((w - b.w) / 2);
    }
    b.flip = mp_rng_next(&r) >> 63;
    return b;
}

/* The shorter side resized to `resize` and the longer to resize * long / short (rounded down,
 * as torchvision's Resize), then the centre size x size (offsets rounded half to even, as its
 * CenterCrop): as a source box. */
static box centre_box(int h, int w, int size, int resize)
{
    int64_t lng = (int64_t)resize * (h < w ? w : h) / (h < w ? h : w);
    double nh = h < w ? resize : (double)lng, nw = h < w ? (double)lng : resize;
    double sy = nh / h, sx = nw / w;
    double top = nearbyint((nh - size) / 2), left = nearbyint((nw - size) / 2);
    box b = {top / sy, left / sx, size / sy, size / sx, false};
    return b;
}

/* Source taps of one output coordinate: the two neighbours and the second's weight in
 * 1/2048ths (the first's is 2048 minus it), as PIL's fixed-point resampling keeps weights. */
typedef struct tap {
    int i0, i1, w;
} tap;

enum { MP_TAP_ONE = 2048, MP_TAP_SHIFT = 22 }; /* 2048^2 = 2^22 */
_Static_assert((int64_t)MP_TAP_ONE * MP_TAP_ONE * 255 + (1 << (MP_TAP_SHIFT - 1)) <= INT32_MAX,
               "a row_bytes sum fits an int");

/* The taps of `size` outputs over a box [start, start + len) of a side of n pixels (pixel
 * centres aligned: output o samples start + (o + 0.5) len / size - 0.5, clamped to the side). */
static void taps(tap *t, int size, double start, double len, int n, bool flip)
{
    for (int o = 0; o < size; o++) {
        int f = flip ? size - 1 - o : o;
        double s = start + (f + 0.5) * len / size - 0.5;
        s = s < 0 ? 0 : s > n - 1 ? n - 1 : s;
        t[o].i0 = (int)s;
        t[o].i1 = t[o].i0 + 1 < n ? t[o].i0 + 1 : t[o].i0;
        t[o].w = (int)lround((s - t[o].i0) * MP_TAP_ONE);
    }
}

/* One output row of bytes: bilinear from source rows r0 and r1 (weight wy of r1), in integers,
 * rounded half up as PIL rounds. */
static void row_bytes(const uint8_t *r0, const uint8_t *r1, int wy, const tap *tx, int size,
                      int c, uint8_t *row)
{
    int vy = MP_TAP_ONE - wy;
    for (int ox = 0; ox < size; ox++) {
        int x0 = tx[ox].i0 * c, x1 = tx[ox].i1 * c, w1 = tx[ox].w, w0 = MP_TAP_ONE - w1;
        for (int ch = 0; ch < c; ch++) {
            int top = w0 * r0[x0 + ch] + w1 * r0[x1 + ch];
            int bot = w0 * r1[x0 + ch] + w1 * r1[x1 + ch];
            row[ox * c + ch] = (uint8_t)((vy * top + wy * bot + (1 << (MP_TAP_SHIFT - 1))) >>
                                         MP_TAP_SHIFT);
        }
    }
}

/* out[k] = table[(k % c) * 256 + row[k]] for the n bytes of row, elements of T. */
#define MP_NORMALISE(T, out, table, row, n, c)                                             \
    do {                                                                                   \
        const T *tb_ = (const T *)(table);                                                 \
        T *o_ = (T *)(out);                                                                \
        for (int k_ = 0; k_ < (n); k_ += (c))                                              \
            for (int ch_ = 0; ch_ < (c); ch_++)                                            \
                o_[k_ + ch_] = tb_[ch_ * 256 + (row)[k_ + ch_]];                           \
    } while (0)

/* Writes sample im through box b into dst (size x size x c of dt): each output byte bilinear
 * from its four source pixels, then normalised through `table` (c x 256 values of dt: (p / 255
 * - mean) / std rounded once, so a byte maps to what an IDX pixel of that value gives). */
static void resample(const mp_image *im, const box *b, int size, const void *table,
                     mp_dtype dt, tap *ty, tap *tx, uint8_t *row, unsigned char *dst)
{
    size_t stride = (size_t)im->w * (size_t)im->c, line = (size_t)size * (size_t)im->c;
    int n = size * im->c, c = im->c;
    taps(ty, size, b->y, b->h, im->h, false);
    taps(tx, size, b->x, b->w, im->w, b->flip);
    for (int oy = 0; oy < size; oy++) {
        row_bytes(im->px + (size_t)ty[oy].i0 * stride, im->px + (size_t)ty[oy].i1 * stride,
                  ty[oy].w, tx, size, c, row);
        unsigned char *out = dst + (size_t)oy * line * mp_dtype_size(dt);
        switch (mp_dtype_size(dt)) {
        case 2: MP_NORMALISE(uint16_t, out, table, row, n, c); break;
        case 4: MP_NORMALISE(uint32_t, out, table, row, n, c); break;
        default: MP_NORMALISE(uint64_t, out, table, row, n, c); break;
        }
    }
}

/* Reads file `path` whole into a malloc'd buffer. */
static mp_status read_file(const char *path, uint8_t **buf, size_t *n)
{
    const char *why;
    long long size;
    int fd = mp_open_regular(path, &size, &why);
    if (fd < 0)
        return mp_fail(MP_EDATA, "%s: %s", path, why);
    FILE *f = fdopen(fd, "rb");
    if (!f || size > MP_FOLDER_MAX_FILE) {
        if (f)
            fclose(f);
        else
            close(fd);
        return mp_fail(MP_EDATA, "%s: %s", path, f ? "larger than 64 MiB" : strerror(errno));
    }
    *buf = malloc((size_t)size + 1);
    *n = *buf ? fread(*buf, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!*buf || *n != (size_t)size) {
        free(*buf);
        *buf = NULL;
        return mp_fail(MP_EDATA, "%s: cannot read its %lld bytes", path, size);
    }
    return MP_OK;
}

mp_status mp_folder_batch(const mp_dataset *d, const int64_t *idx, int64_t n,
                          const double *mean, const double *std, uint64_t seed, int64_t epoch,
                          bool augment, mp_dtype dt, void *x, int32_t *y)
{
    const mp_folder *f = d->folder;
    int size = f->size, resize = f->resize;
    size_t es = mp_dtype_size(dt), per = (size_t)size * size * (size_t)f->channels * es;
    double table[3 * 256]; /* per channel the 256 byte values normalised, in dt */
    MP_TRY(mp_pixel_tables(table, (size_t)f->channels, mean, std, dt));
    tap ty[1024], tx[1024];
    uint8_t row[1024 * 3];
    for (int64_t i = 0; i < n; i++) {
        const char *path = f->paths[idx[i]];
        uint8_t *buf = NULL;
        size_t len = 0;
        MP_TRY(read_file(path, &buf, &len));
        mp_image im;
        mp_status st = mp_image_decode(buf, len, path, f->channels, &im);
        free(buf);
        MP_TRY(st);
        box b = augment ? random_box(im.h, im.w, seed, epoch, idx[i])
                        : centre_box(im.h, im.w, size, resize);
        resample(&im, &b, size, table, dt, ty, tx, row, (unsigned char *)x + (size_t)i * per);
        free(im.px);
        y[i] = d->labels[idx[i]];
    }
    return MP_OK;
}
