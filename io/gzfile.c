/* Whole-file reads through zlib's inflate; see gzfile.h. The input is read in blocks of
 * MP_GZF_IN bytes into a buffer; `pos`/`have` mark its unread bytes. */
#include "io/gzfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/fsutil.h"

#define MP_GZF_IN (1u << 17)
#define MP_GZF_OUT_CHUNK (1u << 30) /* avail_out is an unsigned int */

struct mp_gzf {
    int fd;
    bool gzip, eof, done, inflating;
    z_stream zs;
    unsigned char in[MP_GZF_IN];
    size_t pos, have;
    char path[4096];
};

/* One read(2) of up to n bytes into buf (retried when interrupted); 0 sets eof; -1 after
 * MP_EDATA. */
static ssize_t read_once(mp_gzf *f, void *buf, size_t n)
{
    ssize_t got;
    while ((got = read(f->fd, buf, n)) < 0 && errno == EINTR)
        ;
    if (got < 0)
        mp_fail(MP_EDATA, "%s: read error: %s", f->path, strerror(errno));
    if (got == 0)
        f->eof = true;
    return got;
}

/* Reads more input after the unread bytes (moved to the front); -1 after MP_EDATA. */
static int refill(mp_gzf *f)
{
    if (f->pos > 0) {
        memmove(f->in, f->in + f->pos, f->have - f->pos);
        f->have -= f->pos;
        f->pos = 0;
    }
    if (f->eof || f->have == sizeof f->in)
        return 0;
    ssize_t got = read_once(f, f->in + f->have, sizeof f->in - f->have);
    if (got < 0)
        return -1;
    f->have += (size_t)got;
    return 0;
}

/* At least k unread bytes unless the file ends first; -1 after MP_EDATA. */
static int want(mp_gzf *f, size_t k)
{
    while (f->have - f->pos < k && !f->eof)
        if (refill(f) < 0)
            return -1;
    return 0;
}

static bool at_magic(const mp_gzf *f)
{
    return f->have - f->pos >= 2 && f->in[f->pos] == 0x1f && f->in[f->pos + 1] == 0x8b;
}

mp_status mp_gzf_open(mp_gzf **out, const char *path, bool *missing)
{
    *out = NULL;
    if (missing)
        *missing = false;
    const char *why;
    int fd = mp_open_regular(path, NULL, &why);
    if (fd < 0) {
        if (missing)
            *missing = errno == ENOENT;
        return mp_fail(MP_EDATA, "%s: %s", path, why);
    }
    mp_gzf *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return mp_fail(MP_EDATA, "%s: out of memory", path);
    }
    f->fd = fd;
    snprintf(f->path, sizeof f->path, "%s", path);
    if (want(f, 2) < 0) {
        mp_gzf_close(f);
        return MP_EDATA;
    }
    f->gzip = at_magic(f);
    if (f->gzip) {
        if (inflateInit2(&f->zs, 16 + MAX_WBITS) != Z_OK) {
            mp_gzf_close(f);
            return mp_fail(MP_EDATA, "%s: out of memory for the gzip decoder", path);
        }
        f->inflating = true;
    }
    *out = f;
    return MP_OK;
}

/* Raw bytes: the buffered ones first, then straight from the file. */
static int64_t read_raw(mp_gzf *f, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        if (f->pos < f->have) {
            size_t k = f->have - f->pos < n - got ? f->have - f->pos : n - got;
            memcpy(buf + got, f->in + f->pos, k);
            f->pos += k;
            got += k;
            continue;
        }
        if (f->eof)
            break;
        ssize_t r = read_once(f, buf + got, n - got);
        if (r < 0)
            return -1;
        got += (size_t)r;
    }
    return (int64_t)got;
}

/* After a member's end: another member follows (its magic), or the data ends there. */
static int next_member(mp_gzf *f)
{
    if (want(f, 2) < 0)
        return -1;
    if (at_magic(f)) {
        inflateReset(&f->zs);
        return 0;
    }
    f->done = true; /* nothing, or bytes that are not a member: ignored, as by gzip(1) */
    return 0;
}

int64_t mp_gzf_read(mp_gzf *f, void *buf, size_t n)
{
    if (!f->gzip)
        return read_raw(f, buf, n);
    unsigned char *out = buf;
    size_t got = 0;
    while (got < n && !f->done) {
        if (f->pos == f->have && !f->eof && refill(f) < 0)
            return -1;
        size_t room = n - got < MP_GZF_OUT_CHUNK ? n - got : MP_GZF_OUT_CHUNK;
        f->zs.next_in = f->in + f->pos;
        f->zs.avail_in = (uInt)(f->have - f->pos);
        f->zs.next_out = out + got;
        f->zs.avail_out = (uInt)room;
        int rc = inflate(&f->zs, Z_NO_FLUSH);
        f->pos = f->have - f->zs.avail_in;
        got += room - f->zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (next_member(f) < 0)
                return -1;
        } else if (rc == Z_BUF_ERROR || (rc == Z_OK && f->zs.avail_in == 0 && f->eof &&
                                         f->zs.avail_out > 0)) {
            if (f->pos == f->have && f->eof) {
                mp_fail(MP_EDATA, "%s: truncated: the gzip stream ends before its CRC-32 and "
                        "length trailer, so its data cannot be trusted", f->path);
                return -1;
            }
        } else if (rc != Z_OK) {
            mp_fail(MP_EDATA, "%s: gzip stream error: %s", f->path,
                    rc == Z_MEM_ERROR ? "out of memory" : f->zs.msg ? f->zs.msg : "damaged data");
            return -1;
        }
    }
    return (int64_t)got;
}

mp_status mp_gzf_rest(mp_gzf *f, int64_t *rest)
{
    *rest = 0;
    if (!f->gzip) {
        struct stat sb;
        off_t at = lseek(f->fd, 0, SEEK_CUR);
        if (at < 0 || fstat(f->fd, &sb) != 0)
            return mp_fail(MP_EDATA, "%s: cannot tell the file's size: %s", f->path,
                           strerror(errno));
        int64_t read_so_far = (int64_t)at - (int64_t)(f->have - f->pos);
        *rest = sb.st_size > read_so_far ? (int64_t)sb.st_size - read_so_far : 0;
        return MP_OK;
    }
    unsigned char sink[16384];
    for (;;) {
        int64_t got = mp_gzf_read(f, sink, sizeof sink);
        if (got < 0)
            return MP_EDATA;
        *rest += got;
        if (got < (int64_t)sizeof sink)
            return MP_OK;
    }
}

bool mp_gzf_compressed(const mp_gzf *f) { return f->gzip; }

const char *mp_gzf_path(const mp_gzf *f) { return f->path; }

void mp_gzf_close(mp_gzf *f)
{
    if (!f)
        return;
    if (f->inflating)
        inflateEnd(&f->zs);
    close(f->fd);
    free(f);
}
