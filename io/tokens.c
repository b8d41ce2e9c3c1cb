/* Token shards (io/tokens.h): a split is a list of shards, each with its path, where its tokens
 * start, their width and count, and the windows it holds; window j of the split is window
 * j - first of the shard whose [first, first + count) holds j. Nothing of a shard is kept in
 * memory: the check reads the shards in pieces of MP_TOKENS_CHUNK bytes, numbered over all the
 * shards so that ranks can share them, to check their tokens against the vocabulary, and a
 * batch preads each window's T + 1 tokens. Reading rather than
 * mapping keeps the address space small (a run fits under `ulimit -v` whatever the corpus's
 * size) and turns a shard that shrinks during training into an error, not a SIGBUS. */
#include "io/tokens.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/stop.h"
#include "io/fsutil.h"

#define MP_TOKENS_MAX_CONTEXT 4096
#define MP_TOKENS_MAX_VOCAB 1000000
#define MP_TOKENS_CHUNK (1 << 20)

typedef struct mp_token_shard {
    char *path;       /* malloc'd */
    int64_t start;    /* byte offset of the first token */
    int64_t ntok;     /* tokens in the shard */
    int64_t first;    /* the split's index of the shard's first window */
    int64_t count;    /* windows in the shard */
    int64_t piece0;   /* the number of its first piece (mp_tokens_pieces' numbering) */
} mp_token_shard;

struct mp_tokens {
    mp_token_shard *shards;
    int nshards;
    int width;      /* bytes a token: 2 or 4 */
    int64_t pieces; /* pieces of its shards */
};

void mp_tokens_free(mp_tokens *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nshards; i++)
        free(t->shards[i].path);
    free(t->shards);
    free(t);
}

/* Reads len bytes at offset off of fd into buf: MP_OK, or MP_EDATA naming path, and for a short
 * read what the bytes were for ("the header", "a window", "the check's piece"). */
static mp_status read_at(int fd, const char *path, void *buf, size_t len, int64_t off,
                         const char *what)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + (int64_t)got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return mp_fail(MP_EDATA, "%s: read error at byte %lld: %s", path,
                           (long long)(off + (int64_t)got), strerror(errno));
        struct stat st;
        if (r == 0 && fstat(fd, &st) == 0)
            return mp_fail(MP_EDATA, "%s: holds %lld bytes now, too few for the %zu bytes at "
                           "byte %lld %s needs (the file changed since it was opened?)",
                           path, (long long)st.st_size, len, (long long)off, what);
        if (r == 0)
            return mp_fail(MP_EDATA, "%s: ends before the %zu bytes at byte %lld %s needs (the "
                           "file changed since it was opened?)", path, len, (long long)off, what);
        got += (size_t)r;
    }
    return MP_OK;
}

/* Token k of a little-endian array of width-byte tokens. */
static uint32_t token_at(const uint8_t *p, int width, int64_t k)
{
    const uint8_t *b = p + (size_t)k * (size_t)width;
    uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8;
    if (width == 4)
        v |= (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return v;
}

/* Fills s (path set) from its file's size and header: the header or the headerless width, the
 * token count. *width is the split's width so far (0: none yet). */
static mp_status read_header(mp_token_shard *s, int token_bytes, int *width)
{
    const char *why;
    long long size;
    int fd = mp_open_regular(s->path, &size, &why);
    if (fd < 0)
        return mp_fail(MP_EDATA, "%s: %s", s->path, why);
    mp_status st = MP_OK;
    int32_t head[3] = {0, 0, 0};
    int w = token_bytes;
    if (size >= (long long)sizeof head[0])
        st = read_at(fd, s->path, head, size < (long long)sizeof head ? sizeof head[0]
                                                                         : sizeof head, 0,
                     "the header");
    close(fd);
    if (st == MP_OK && size < MP_TOKENS_HEADER_BYTES && head[0] == MP_TOKENS_MAGIC)
        st = mp_fail(MP_EDATA, "%s: starts with llm.c's header magic but holds %lld bytes, "
                     "less than the %d-byte header (a cut file?)", s->path, size,
                     MP_TOKENS_HEADER_BYTES);
    if (st == MP_OK && size >= MP_TOKENS_HEADER_BYTES && head[0] == MP_TOKENS_MAGIC) {
        if (head[1] != 1 && head[1] != 2)
            st = mp_fail(MP_EDATA, "%s: llm.c header version %d: expected 1 (uint16 tokens) or "
                         "2 (uint32 tokens)", s->path, head[1]);
        w = head[1] == 1 ? 2 : 4;
        s->start = MP_TOKENS_HEADER_BYTES;
        s->ntok = head[2];
        if (st == MP_OK && (head[2] < 0 || (size - s->start) != (int64_t)head[2] * w))
            st = mp_fail(MP_EDATA, "%s: the header announces %d tokens of %d bytes, but the "
                         "file holds %lld bytes after its %d-byte header", s->path, head[2], w,
                         size - s->start, MP_TOKENS_HEADER_BYTES);
    } else if (st == MP_OK) {
        s->start = 0;
        s->ntok = size / w;
        if (size % w)
            st = mp_fail(MP_EDATA, "%s: %lld bytes are not a whole number of %d-byte tokens "
                         "(no llm.c header; data.token_bytes = %d)", s->path, size, w, w);
    }
    if (st == MP_OK && *width && w != *width)
        st = mp_fail(MP_EDATA, "%s: %d-byte tokens, but the shards before it have %d-byte "
                     "tokens", s->path, w, *width);
    *width = w;
    return st;
}

/* Pieces of MP_TOKENS_CHUNK bytes in shard s of w-byte tokens. */
static int64_t shard_pieces(const mp_token_shard *s, int w)
{
    const int64_t per = MP_TOKENS_CHUNK / w;
    return (s->ntok + per - 1) / per;
}

/* The last shard of t (nshards >= 1) whose first piece (by_piece: piece0) or first window
 * (first) is at most v: a binary search. An empty shard shares its successor's, so the search
 * passes it for the successor. */
static const mp_token_shard *last_from(const mp_tokens *t, int64_t v, bool by_piece)
{
    int lo = 0, hi = t->nshards - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if ((by_piece ? t->shards[mid].piece0 : t->shards[mid].first) <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &t->shards[lo];
}

/* Numbers split t's pieces from `first` on (piece0 of each shard, t->pieces). */
static void number_pieces(mp_tokens *t, int64_t first)
{
    t->pieces = 0;
    for (int i = 0; i < t->nshards; i++) {
        t->shards[i].piece0 = first + t->pieces;
        t->pieces += shard_pieces(&t->shards[i], t->width);
    }
}

int64_t mp_tokens_pieces(const mp_dataset *train, const mp_dataset *test)
{
    return train->tokens->pieces + test->tokens->pieces;
}

/* The shard of piece p (global numbering: the training shards', then the validation shards'),
 * its width in *w and p's number within it in *q (a binary search); NULL past the last piece. */
static const mp_token_shard *piece_shard(const mp_dataset *train, const mp_dataset *test,
                                         int64_t p, int *w, int64_t *q)
{
    const mp_tokens *t = p < train->tokens->pieces ? train->tokens : test->tokens;
    if (p < 0 || p >= mp_tokens_pieces(train, test))
        return NULL;
    const mp_token_shard *s = last_from(t, p, true);
    *w = t->width;
    *q = p - s->piece0;
    return s;
}

/* Checks piece q of shard s (w-byte tokens, read through fd into buf) against vocab. */
static mp_status check_piece(const mp_token_shard *s, int fd, int w, int64_t q, int64_t vocab,
                             uint8_t *buf)
{
    const int64_t per = MP_TOKENS_CHUNK / w, k0 = q * per;
    const int64_t n = s->ntok - k0 < per ? s->ntok - k0 : per;
    MP_TRY(read_at(fd, s->path, buf, (size_t)(n * w), s->start + k0 * w, "the check's piece"));
    for (int64_t k = 0; k < n; k++)
        if (token_at(buf, w, k) >= (uint64_t)vocab)
            return mp_fail(MP_EDATA, "%s: token %lld is %u, not below the vocabulary "
                           "(data.num_classes = %lld)", s->path, (long long)(k0 + k),
                           token_at(buf, w, k), (long long)vocab);
    return MP_OK;
}

mp_status mp_tokens_check(const mp_dataset *train, const mp_dataset *test, int64_t first,
                          int64_t count, int64_t stride, int64_t *at)
{
    int64_t here = -1;
    if (at)
        *at = -1;
    if (stride < 1)
        return mp_fail(MP_EINTERNAL, "checking the tokens: stride %lld", (long long)stride);
    uint8_t *buf = malloc(MP_TOKENS_CHUNK);
    if (!buf)
        return mp_fail(MP_EDATA, "checking the tokens: out of memory");
    mp_status st = MP_OK;
    const mp_token_shard *open_shard = NULL;
    int fd = -1, w;
    char doing[600] = "";
    for (int64_t i = 0, q; st == MP_OK && i < count; i++) {
        here = first + i * stride;
        const mp_token_shard *s = piece_shard(train, test, here, &w, &q);
        if (!s)
            break;
        if (s != open_shard) {
            const char *why;
            if (fd >= 0)
                close(fd);
            open_shard = s;
            snprintf(doing, sizeof doing, "checking the tokens of %.560s", s->path);
            if ((fd = mp_open_regular(s->path, NULL, &why)) < 0)
                st = mp_fail(MP_EDATA, "%s: %s", s->path, why);
        }
        if (st == MP_OK)
            st = mp_stop_check(doing);
        if (st == MP_OK)
            st = check_piece(s, fd, w, q, train->num_classes, buf);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    if (at && st != MP_OK)
        *at = here;
    return st;
}

static bool shard_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".bin") == 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shard names in dir, sorted, in a malloc'd array of malloc'd strings (*n of them). */
static mp_status list_names(const char *dir, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    MP_TRY(mp_check_dir(dir));
    DIR *d = opendir(dir);
    if (!d)
        return mp_fail(MP_EDATA, "%s: %s", dir, strerror(errno));
    int cap = 0;
    mp_status st = MP_OK;
    for (struct dirent *e; st == MP_OK && (e = readdir(d));) {
        if (!shard_name(e->d_name))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **m = realloc(*names, (size_t)cap * sizeof *m);
            if (!m) {
                st = mp_fail(MP_EDATA, "%s: out of memory listing the shards", dir);
                break;
            }
            *names = m;
        }
        (*names)[*n] = strdup(e->d_name);
        if (!(*names)[*n])
            st = mp_fail(MP_EDATA, "%s: out of memory listing the shards", dir);
        else
            (*n)++;
    }
    closedir(d);
    if (*n > 1)
        qsort(*names, (size_t)*n, sizeof **names, name_cmp);
    return st;
}

/* Adds shard dir/name to split t; `train` splits shift their windows. */
static mp_status add_shard(mp_tokens *t, const char *dir, const char *name, int T, bool train,
                           int token_bytes, int64_t *windows)
{
    mp_token_shard *m = realloc(t->shards, (size_t)(t->nshards + 1) * sizeof *m);
    if (!m)
        return mp_fail(MP_EDATA, "%s: out of memory listing the shards", dir);
    t->shards = m;
    mp_token_shard *s = &m[t->nshards];
    memset(s, 0, sizeof *s);
    size_t len = strlen(dir) + strlen(name) + 2;
    s->path = malloc(len);
    if (!s->path)
        return mp_fail(MP_EDATA, "%s: out of memory listing the shards", dir);
    snprintf(s->path, len, "%s/%s", dir, name);
    t->nshards++;
    MP_TRY(read_header(s, token_bytes, &t->width));
    int64_t c = train ? s->ntok / T - 1 : (s->ntok - 1) / T;
    s->first = *windows;
    s->count = c > 0 ? c : 0;
    *windows += s->count;
    return MP_OK;
}

/* Builds one split (train: the names without "val") into *d. */
static mp_status load_split(mp_dataset *d, const char *dir, char **names, int n, bool train,
                            int T, int token_bytes, int64_t vocab, int64_t limit)
{
    mp_tokens *t = calloc(1, sizeof *t);
    if (!t)
        return mp_fail(MP_EDATA, "%s: out of memory", dir);
    *d = (mp_dataset){.h = 1, .w = T, .c = 1, .num_classes = (int)vocab, .tokens = t,
                      .text_shift = train};
    int64_t windows = 0;
    for (int i = 0; i < n; i++)
        if ((strstr(names[i], "val") == NULL) == train)
            MP_TRY(add_shard(t, dir, names[i], T, train, token_bytes, &windows));
    const char *split = train ? "training" : "validation";
    if (t->nshards == 0)
        return mp_fail(MP_EDATA, "%s: no %s shard (*.bin files%s)", dir, split,
                       train ? " whose names do not contain \"val\"" : " named *val*");
    if (windows == 0)
        return mp_fail(MP_EDATA, "%s: the %s shards hold no whole window of data.context = %d "
                       "tokens (a training shard needs %d tokens, a validation shard %d)", dir,
                       split, T, 2 * T, T + 1);
    d->count = limit > 0 && limit < windows ? limit : windows;
    return MP_OK;
}

mp_status mp_tokens_open(mp_dataset *train, mp_dataset *test, const char *path, int context,
                         int token_bytes, int64_t vocab, int64_t train_limit, int64_t test_limit)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!path || !*path)
        return mp_fail(MP_EUSAGE, "token data: no path");
    if (context < 2 || context > MP_TOKENS_MAX_CONTEXT)
        return mp_fail(MP_EUSAGE, "token data: context %d: expected 2..%d", context,
                       MP_TOKENS_MAX_CONTEXT);
    if (vocab < 2 || vocab > MP_TOKENS_MAX_VOCAB)
        return mp_fail(MP_EUSAGE, "token data: vocabulary %lld: expected 2..%d",
                       (long long)vocab, MP_TOKENS_MAX_VOCAB);
    if (token_bytes != 2 && token_bytes != 4)
        return mp_fail(MP_EUSAGE, "token data: %d-byte tokens: expected 2 or 4", token_bytes);
    char **names;
    int n;
    mp_status st = list_names(path, &names, &n);
    if (st == MP_OK)
        st = load_split(train, path, names, n, true, context, token_bytes, vocab, train_limit);
    if (st == MP_OK)
        st = load_split(test, path, names, n, false, context, token_bytes, vocab, test_limit);
    if (st == MP_OK) {
        number_pieces(train->tokens, 0);
        number_pieces(test->tokens, train->tokens->pieces);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (st != MP_OK) {
        mp_tokens_free(train->tokens);
        mp_tokens_free(test->tokens);
        memset(train, 0, sizeof *train);
        memset(test, 0, sizeof *test);
    }
    return st;
}

mp_status mp_tokens_load(mp_dataset *train, mp_dataset *test, const char *path, int context,
                         int token_bytes, int64_t vocab, int64_t train_limit, int64_t test_limit)
{
    MP_TRY(mp_tokens_open(train, test, path, context, token_bytes, vocab, train_limit,
                          test_limit));
    mp_status st = mp_tokens_check(train, test, 0, INT64_MAX, 1, NULL);
    if (st != MP_OK) {
        mp_dataset_free(train);
        mp_dataset_free(test);
    }
    return st;
}

/* The shard holding window j (its first <= j < first + count). */
static const mp_token_shard *shard_of(const mp_tokens *t, int64_t j)
{
    return last_from(t, j, false); /* never an empty one: it shares its successor's first */
}

mp_status mp_tokens_batch(const mp_dataset *d, const int64_t *idx, int64_t n, uint64_t seed,
                          int64_t epoch, mp_dtype dt, void *x, int32_t *y)
{
    const mp_tokens *t = d->tokens;
    int64_t T = d->w, off = mp_text_offset(d, seed, epoch);
    size_t es = mp_dtype_size(dt), len = (size_t)(T + 1) * (size_t)t->width;
    uint8_t buf[(MP_TOKENS_MAX_CONTEXT + 1) * 4];
    const mp_token_shard *open_s = NULL;
    int fd = -1;
    mp_status st = MP_OK;
    for (int64_t i = 0; st == MP_OK && i < n; i++) {
        assert(idx[i] >= 0 && idx[i] < d->count);
        const mp_token_shard *s = shard_of(t, idx[i]);
        if (s != open_s) {
            if (fd >= 0)
                close(fd);
            fd = open(s->path, O_RDONLY | O_CLOEXEC);
            open_s = s;
            if (fd < 0) {
                st = mp_fail(MP_EDATA, "%s: %s", s->path, strerror(errno));
                break;
            }
        }
        int64_t first = (idx[i] - s->first) * T + off;
        st = read_at(fd, s->path, buf, len, s->start + first * t->width, "a window");
        unsigned char *dst = (unsigned char *)x + (size_t)i * (size_t)T * es;
        for (int64_t k = 0; st == MP_OK && k <= T; k++) /* rewritten since it was checked? */
            if (token_at(buf, t->width, k) >= (uint32_t)d->num_classes)
                st = mp_fail(MP_EDATA, "%s: token %lld is %u, not below the vocabulary (the "
                             "file changed since it was loaded)", s->path,
                             (long long)(first + k), token_at(buf, t->width, k));
        for (int64_t k = 0; st == MP_OK && k < T; k++) {
            mp_store(dst, dt, (size_t)k, (double)token_at(buf, t->width, k));
            y[i * T + k] = (int32_t)token_at(buf, t->width, k + 1);
        }
    }
    if (fd >= 0)
        close(fd);
    return st;
}
